import { RequestError, type NatsConnection } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { FaultOrderReplySchema, FaultOrderSchema, type FaultOrder, type FaultOrderReply } from '../protocol/fault-orders.js';
import { hostKey } from './hosts.js';
import { faultSubject } from './subjects.js';

// Fault orders travel as core NATS requests on `fault.<host>` (request/reply: the giver learns at
// once whether the host armed it, refused it, or does not listen at all). Nothing is persisted:
// an order to a host that is gone is no order.

/** How long a giver waits for a host's answer by default. */
export const FAULT_ORDER_TIMEOUT_MS = 5_000;

/** Stable bus error codes of fault orders. */
export const FAULT_ORDER_CODES = { failed: 'bus.fault_order_failed' } as const;

/**
 * Gives `order` to the host named `host` and returns its answer; null when no process listens on
 * its subject (the holder takes no fault orders: a command hosting in-process, or an older host).
 * No answer in `timeoutMs`, or one that is not a reply, is a BusError.
 */
export async function sendFaultOrder(nc: NatsConnection, host: string, order: FaultOrder, timeoutMs = FAULT_ORDER_TIMEOUT_MS): Promise<FaultOrderReply | null> {
  let data: unknown;
  try {
    const msg = await nc.request(faultSubject(hostKey(host)), JSON.stringify(order), { timeout: timeoutMs });
    data = msg.json();
  } catch (err) {
    if (err instanceof RequestError && err.isNoResponders()) return null;
    throw new BusError(FAULT_ORDER_CODES.failed, `host ${host} did not answer the fault order: ${(err as Error).message}`, { cause: err, retryable: true });
  }
  const reply = FaultOrderReplySchema.safeParse(data);
  if (!reply.success) throw new BusError(FAULT_ORDER_CODES.failed, `host ${host} answered the fault order with something that is not a reply`);
  return reply.data;
}

/** What a taker does with one order: the reply, and what to do once it is on the wire. */
export interface FaultOrderOutcome {
  reply: FaultOrderReply;
  /** Runs after the reply is flushed to the server (a `now` kill: the giver hears of it first). */
  then?: () => void;
}

/** A host's subscription to its fault orders. */
export interface FaultOrderListener {
  close(): void;
}

/**
 * Takes the fault orders given to the host named `host`: each order is parsed (a bad one is
 * refused with `host.fault_order_invalid`), answered with what `take` says, and its `then` runs
 * once the answer is flushed.
 */
export function listenForFaultOrders(
  nc: NatsConnection,
  host: string,
  take: (order: FaultOrder) => FaultOrderOutcome,
  logger: Logger = pino({ level: 'silent' }),
): FaultOrderListener {
  const sub = nc.subscribe(faultSubject(hostKey(host)), {
    callback: (err, msg) => {
      if (err) return void logger.warn({ err }, 'fault order subscription failed');
      let outcome: FaultOrderOutcome;
      let json: unknown;
      try {
        json = msg.json();
      } catch {
        json = null;
      }
      const order = FaultOrderSchema.safeParse(json);
      if (!order.success) {
        outcome = { reply: { armed: false, hostId: host, pid: process.pid, code: 'host.fault_order_invalid', message: `not a fault order: ${order.error.issues.map((i) => i.message).join('; ')}` } };
      } else {
        try {
          outcome = take(order.data);
        } catch (e) {
          logger.warn({ err: e, order: order.data }, 'fault order not taken');
          outcome = { reply: { armed: false, hostId: host, pid: process.pid, code: 'host.fault_order_failed', message: (e as Error).message } };
        }
      }
      if (!msg.respond(JSON.stringify(outcome.reply))) logger.warn({ subject: msg.subject }, 'fault order had no reply subject');
      const then = outcome.then;
      if (then) {
        // the giver hears the answer before the process is gone; should the flush fail, the kill is what was asked for
        nc.flush().then(then, (e: unknown) => {
          logger.warn({ err: e }, 'fault order reply not flushed; acting on it all the same');
          then();
        });
      }
    },
  });
  return { close: () => sub.unsubscribe() };
}
