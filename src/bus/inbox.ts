import {
  AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError,
  type ConsumerConfig, type Consumer, type JetStreamClient, type JetStreamManager, type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import type { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { InboxMessageSchema, type InboxMessage } from '../protocol/inbox.js';
import { deadLetterErrorOf, decodeInboxMessage, messageIdOf, recordDeadLetter, type DeadLetterError } from './dead-letters.js';
import { inboxConsumerName, inboxFilter, inboxSubject, parseInboxSubject, STREAMS, type InboxChannel } from './subjects.js';

/** An inbox message as a sender writes it (defaults not yet applied). */
export type InboxMessageInput = z.input<typeof InboxMessageSchema>;

/** Result of publishing to an inbox: the stream sequence and whether the ID was seen before. */
export interface InboxPublishResult {
  seq: number;
  duplicate: boolean;
}

/**
 * Publishes a message to its recipient's durable inbox with `Nats-Msg-Id = id`: the PubAck
 * means the inbox accepted it, and a resend with the same ID is stored once. `channel` is who it
 * speaks for; the server refuses a channel the connection's user may not publish on.
 */
export async function publishInbox(js: JetStreamClient, msg: InboxMessageInput, channel: InboxChannel): Promise<InboxPublishResult> {
  const parsed = InboxMessageSchema.safeParse(msg);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BusError('bus.invalid_message',
      `invalid inbox message: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`);
  }
  try {
    const ack = await js.publish(inboxSubject(msg.to, channel), JSON.stringify(parsed.data), { msgID: msg.id });
    return { seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    // a server's refusal is final; anything else (timeout, disconnect) may be retried with the same ID
    const refused = err instanceof JetStreamApiError;
    throw new BusError(refused ? 'bus.inbox_refused' : 'bus.publish_unknown',
      `inbox of ${msg.to} did not accept ${msg.id}: ${(err as Error).message}`,
      { cause: err, retryable: !refused });
  }
}

/** Delivery settings of an actor's inbox consumer. */
export interface InboxConsumerOptions {
  /** Deliveries before a message is given up on (default 10). */
  maxDeliver?: number;
  /** Redelivery delays; must be shorter than maxDeliver (default 1 s, 5 s, 15 s, 30 s, 60 s). */
  backoffMs?: number[];
  /** How long a delivery may stay unacked before redelivery when no backoff applies. */
  ackWaitMs?: number;
}

const DEFAULT_BACKOFF_MS = [1_000, 5_000, 15_000, 30_000, 60_000];

/** Creates (or updates) the durable pull consumer of one actor's inbox. */
export async function ensureInboxConsumer(
  jsm: JetStreamManager, actorId: string, opts: InboxConsumerOptions = {},
): Promise<void> {
  const maxDeliver = opts.maxDeliver ?? 10;
  const backoffMs = opts.backoffMs ?? DEFAULT_BACKOFF_MS.filter((_, i) => i < maxDeliver - 1);
  if (backoffMs.length >= maxDeliver && maxDeliver !== -1) {
    throw new BusError('bus.invalid_consumer', `backoff has ${backoffMs.length} steps but maxDeliver is ${maxDeliver}`,
      { hint: 'give fewer backoff steps than maxDeliver' });
  }
  const name = inboxConsumerName(actorId);
  const wanted: Partial<ConsumerConfig> = {
    durable_name: name,
    filter_subject: inboxFilter(actorId),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: maxDeliver,
    ...(backoffMs.length > 0 ? { backoff: backoffMs.map((ms) => nanos(ms)) } : {}),
    ...(opts.ackWaitMs !== undefined ? { ack_wait: nanos(opts.ackWaitMs) } : {}),
  };
  try {
    const info = await jsm.consumers.info(STREAMS.inbox, name).catch((err: unknown) => {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound) return undefined;
      throw err;
    });
    if (info && info.config.filter_subject !== wanted.filter_subject) {
      // A consumer of an older version read `inbox.<actorId>`, before messages carried their
      // channel in the subject. Its filter cannot be changed in place on 2.9; what it had not
      // delivered was on the old subject, which no channel-aware host takes anyway.
      await jsm.consumers.delete(STREAMS.inbox, name);
      await jsm.consumers.add(STREAMS.inbox, wanted);
      return;
    }
    if (!info) {
      await jsm.consumers.add(STREAMS.inbox, wanted);
      return;
    }
    const changed = (['max_deliver', 'backoff', 'ack_wait'] as const).filter(
      (k) => wanted[k] !== undefined && JSON.stringify(info.config[k]) !== JSON.stringify(wanted[k]),
    );
    if (changed.length > 0) {
      await jsm.consumers.update(STREAMS.inbox, name, {
        max_deliver: maxDeliver,
        ...(wanted.backoff ? { backoff: wanted.backoff } : {}),
        ...(wanted.ack_wait ? { ack_wait: wanted.ack_wait } : {}),
      });
    }
  } catch (err) {
    throw new BusError('bus.consumer_failed', `cannot set up the inbox consumer of ${actorId}: ${(err as Error).message}`,
      { cause: err, retryable: true });
  }
}

/** How a delivery that could not be taken was settled. */
export type FailedTake = 'retry' | 'dead_letter';

/** One delivery of an inbox message; settle it with exactly one of ack, nak, term, fail. */
export interface InboxDelivery {
  message: InboxMessage;
  /** Who the message speaks for, from the subject it came in on (never from the message). */
  channel: InboxChannel;
  /** 1 on first delivery. 2.9 can lose acks in a crash: dedupe by message ID, never by count. */
  deliveryCount: number;
  /** The consumer gives up after this delivery: a failure now makes it a dead letter. */
  lastDelivery: boolean;
  /** Messages the consumer had not delivered yet when it delivered this one. */
  undeliveredAfter: number;
  /** Messages the pull that got this one found undecodable and settled first (they may come again). */
  settledBefore: number;
  /** Acknowledges and waits for the server to confirm. */
  ack(): Promise<void>;
  /** Asks for redelivery, after `delayMs` when given (a bare nak ignores the backoff). */
  nak(delayMs?: number): void;
  /** Never deliver this message again. */
  term(): void;
  /**
   * Settles a delivery that could not be taken (never rejects): left for the consumer's backoff to
   * redeliver, or on the last delivery recorded as a dead letter and terminated.
   */
  fail(err: unknown): Promise<FailedTake>;
}

/** An actor's inbox reader. */
export interface Inbox {
  /** The next delivery, or null when nothing arrived within `expiresMs` (at least 1000 ms). */
  next(opts: { expiresMs: number }): Promise<InboxDelivery | null>;
  /** Messages waiting: not yet delivered plus delivered and not yet acked. */
  pending(): Promise<number>;
  /** Messages not yet delivered, and delivered but not yet acked (they come again after their wait). */
  counts(): Promise<{ undelivered: number; unacked: number }>;
}

/** Options of `openInbox`. */
export interface OpenInboxOptions {
  consumer?: InboxConsumerOptions;
  /** The consumer is known to exist with the right settings: skip the check. */
  ensured?: boolean;
  logger?: Logger;
}

/** What settling a failed take needs to know about the inbox. */
interface InboxContext {
  js: JetStreamClient;
  actorId: string;
  /** The consumer's max_deliver; 0 or less: unlimited. */
  maxDeliver: number;
  logger: Logger;
}

/** Ensures the actor's inbox consumer and opens a reader on it. */
export async function openInbox(
  js: JetStreamClient, jsm: JetStreamManager, actorId: string, opts: OpenInboxOptions = {},
): Promise<Inbox> {
  const logger = (opts.logger ?? pino({ level: 'silent' })).child({ actorId });
  if (!opts.ensured) await ensureInboxConsumer(jsm, actorId, opts.consumer);
  const consumer: Consumer = await js.consumers.get(STREAMS.inbox, inboxConsumerName(actorId));
  // `get` fetched the consumer's info: its max_deliver tells which delivery is the last
  const ctx: InboxContext = { js, actorId, maxDeliver: (await consumer.info(true)).config.max_deliver ?? -1, logger };
  return {
    async next({ expiresMs }) {
      // the client refuses pulls shorter than 1 s
      const deadline = Date.now() + Math.max(1_000, expiresMs);
      let settled = 0;
      while (true) {
        const left = deadline - Date.now();
        if (left <= 0) return null;
        const m = await consumer.next({ expires: Math.max(1_000, left) });
        if (!m) return null;
        const delivery = await decodeDelivery(m, ctx);
        if (delivery) return Object.assign(delivery, { settledBefore: settled });
        settled += 1;
      }
    },
    async pending() {
      const info = await consumer.info();
      return info.num_pending + info.num_ack_pending;
    },
    async counts() {
      const info = await consumer.info();
      return { undelivered: info.num_pending, unacked: info.num_ack_pending };
    },
  };
}

/** A delivery as the actor sees it, or null for bytes that are no inbox message (settled here). */
async function decodeDelivery(m: JsMsg, ctx: InboxContext): Promise<InboxDelivery | null> {
  const decoded = decodeInboxMessage(m.data);
  if ('error' in decoded) {
    // Retried like any other failed take rather than dropped: a newer sender's message may parse
    // on an upgraded host within the backoff, and after max_deliver an operator sees its bytes.
    await failTake(m, messageIdOf(m.data, m.headers?.get('Nats-Msg-Id'), m.seq), decoded.error, ctx);
    return null;
  }
  const { message } = decoded;
  return {
    message,
    // a subject without a channel is an older sender's: it speaks for nobody in particular
    channel: parseInboxSubject(m.subject)?.channel ?? 'actor',
    deliveryCount: m.info.deliveryCount,
    lastDelivery: isLast(m, ctx),
    undeliveredAfter: m.info.pending,
    settledBefore: 0,
    async ack() {
      try {
        await m.ackAck();
      } catch (err) {
        // harmless if it is lost: the message comes again and its ID is already in the log
        throw new BusError('bus.ack_unknown', `ack of ${message.id} was not confirmed: ${(err as Error).message}`,
          { cause: err, retryable: true });
      }
    },
    nak(delayMs) {
      m.nak(delayMs);
    },
    term() {
      m.term();
    },
    fail(err) {
      return failTake(m, message.id, deadLetterErrorOf(err), ctx);
    },
  };
}

function isLast(m: JsMsg, ctx: InboxContext): boolean {
  return ctx.maxDeliver > 0 && m.info.deliveryCount >= ctx.maxDeliver;
}

/**
 * Before the last delivery a failed take is left unacked, on purpose: the consumer's backoff then
 * redelivers it on schedule. A nak would not (nats-server 2.9.10, measured): a bare nak redelivers
 * at once, and a nak delay is shifted by the difference between backoff steps.
 * On the last delivery the server would never deliver it again, so it becomes a dead letter,
 * recorded before it is terminated: a crash between the two leaves it unsettled, and the server's
 * max-deliveries advisory (captured by the DLQ stream) lists it anyway.
 */
async function failTake(m: JsMsg, messageId: string, error: DeadLetterError, ctx: InboxContext): Promise<FailedTake> {
  const fields = { messageId, inboxSeq: m.seq, deliveries: m.info.deliveryCount, maxDeliver: ctx.maxDeliver, error };
  if (!isLast(m, ctx)) {
    ctx.logger.warn(fields, 'inbox message not taken; it is redelivered after its backoff');
    return 'retry';
  }
  try {
    await recordDeadLetter(ctx.js, {
      actorId: ctx.actorId, messageId, inboxSeq: m.seq, deliveries: m.info.deliveryCount, error, data: m.data,
    });
  } catch (err) {
    ctx.logger.error({ ...fields, err }, 'dead letter not recorded; the server\'s max-deliveries advisory stands for it in `actorloop dlq list`');
    return 'dead_letter';
  }
  // no reason text: nats-server 2.9 only recognises a bare +TERM (reasons came in 2.10)
  m.term();
  ctx.logger.warn(fields, 'inbox message given up on and dead-lettered: `actorloop dlq list` shows it, `actorloop dlq redrive <id>` sends it again');
  return 'dead_letter';
}
