import type { Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { deadLetterErrorOf, type DeadLetterError } from './dead-letters.js';
import {
  inboxDeliverySettings, parseInboxInput,
  type Inbox, type InboxConsumerOptions, type InboxDelivery, type InboxPort, type InboxSignals,
} from './inbox-port.js';
import type { InboxChannel } from './subjects.js';

/** A message given up on after its last delivery, as the memory inboxes keep it. */
export interface MemoryDeadLetter {
  actorId: string;
  messageId: string;
  inboxSeq: number;
  deliveries: number;
  error: DeadLetterError;
}

/** In-memory inboxes, with what tests look at besides the port. */
export interface MemoryInboxes extends InboxPort {
  /** Messages given up on, oldest first. */
  deadLetters(): MemoryDeadLetter[];
}

/** One stored message and its consumer state. */
interface Stored {
  seq: number;
  message: InboxMessage;
  channel: InboxChannel;
  /** Deliveries so far (0: not yet delivered). */
  deliveries: number;
  /** Acked, terminated or dead-lettered: never delivered again. */
  done: boolean;
  /** When a delivered, unsettled message comes again. */
  dueAtMs: number;
}

interface ActorInbox {
  items: Stored[];
  consumer: { maxDeliver: number; backoffMs: number[]; ackWaitMs: number } | null;
  wakers: Set<() => void>;
}

/** The redelivery wait of an unacked delivery with no backoff, as JetStream's default ack_wait. */
const DEFAULT_ACK_WAIT_MS = 30_000;

/**
 * Inboxes in this process's memory, with the JetStream inbox's semantics: dedupe by message ID,
 * delivery in publish order, explicit ack, redelivery after the backoff of an unsettled delivery,
 * `max_deliver` and dead letters, the channel a message came in on, and mail signals to a host.
 * For tests and embedders that need no NATS; nothing survives the process.
 */
export function createMemoryInboxes(opts: { now?: () => number } = {}): MemoryInboxes {
  const now = opts.now ?? (() => Date.now());
  const inboxes = new Map<string, ActorInbox>();
  // one dedupe table for all inboxes, as the INBOX stream's duplicate window is per stream
  const seen = new Map<string, number>();
  const watchers = new Set<InboxSignals>();
  const claimers = new Set<(actorId: string) => void>();
  const dead: MemoryDeadLetter[] = [];
  let lastSeq = 0;

  const inboxOf = (actorId: string): ActorInbox => {
    let box = inboxes.get(actorId);
    if (!box) inboxes.set(actorId, (box = { items: [], consumer: null, wakers: new Set() }));
    return box;
  };

  const wakeReaders = (box: ActorInbox): void => {
    for (const w of [...box.wakers]) w();
  };

  /** The next message to deliver: a redelivery that is due, else the oldest never delivered. */
  const pick = (box: ActorInbox): Stored | undefined => {
    const t = now();
    return box.items.find((m) => !m.done && m.deliveries > 0 && m.dueAtMs <= t) ??
      box.items.find((m) => !m.done && m.deliveries === 0);
  };

  /** Waits until a publish, a due redelivery or `untilMs`, whichever comes first. */
  const waitFor = (box: ActorInbox, untilMs: number): Promise<void> =>
    new Promise((resolve) => {
      const t = now();
      const due = box.items.filter((m) => !m.done && m.deliveries > 0).map((m) => m.dueAtMs);
      const at = Math.min(untilMs, ...due);
      const done = (): void => {
        clearTimeout(timer);
        box.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, at - t));
      timer.unref?.();
      box.wakers.add(done);
    });

  const deliver = (actorId: string, box: ActorInbox, m: Stored, logger?: Logger): InboxDelivery => {
    const consumer = box.consumer!;
    m.deliveries += 1;
    const count = m.deliveries;
    const backoff = consumer.backoffMs;
    // left unsettled, it comes again after its backoff step (the last step repeats), as on JetStream
    m.dueAtMs = now() + (backoff.length > 0 ? backoff[Math.min(count - 1, backoff.length - 1)]! : consumer.ackWaitMs);
    const last = consumer.maxDeliver > 0 && count >= consumer.maxDeliver;
    let settled = false;
    // Each delivery settles once, and a message once acked, terminated or dead-lettered stays so:
    // a later settle changes nothing. As on the server, an ack of an earlier delivery still acks.
    const settle = (fn: () => void): void => {
      if (settled || m.done) return;
      settled = true;
      fn();
    };
    const finish = (): void => {
      m.done = true;
    };
    return {
      message: m.message,
      channel: m.channel,
      deliveryCount: count,
      lastDelivery: last,
      undeliveredAfter: box.items.filter((x) => !x.done && x.deliveries === 0).length,
      settledBefore: 0,
      async ack() {
        settle(finish);
        await Promise.resolve();
      },
      async erase() {
        const at = box.items.indexOf(m);
        if (at !== -1) box.items.splice(at, 1);
        m.done = true;
        await Promise.resolve();
      },
      nak(delayMs) {
        settle(() => {
          m.dueAtMs = now() + (delayMs ?? 0);
          wakeReaders(box);
        });
      },
      term() {
        settle(finish);
      },
      async fail(err) {
        const error = deadLetterErrorOf(err);
        const fields = { messageId: m.message.id, inboxSeq: m.seq, deliveries: count, maxDeliver: consumer.maxDeliver, error };
        if (!last) {
          logger?.warn(fields, 'inbox message not taken; it is redelivered after its backoff');
          return 'retry';
        }
        settle(() => {
          dead.push({ actorId, messageId: m.message.id, inboxSeq: m.seq, deliveries: count, error });
          finish();
          logger?.warn(fields, 'inbox message given up on and dead-lettered');
        });
        return 'dead_letter';
      },
    };
  };

  const signal = (fn: () => void): void => queueMicrotask(fn);

  return {
    async publish(msg, channel) {
      const message = parseInboxInput(msg);
      const earlier = seen.get(message.id);
      // every publish is a signal, a duplicate too (a core subscription sees each one)
      signal(() => {
        for (const w of watchers) w.mail(message.to);
      });
      if (earlier !== undefined) return { seq: earlier, duplicate: true };
      const seq = ++lastSeq;
      seen.set(message.id, seq);
      const box = inboxOf(message.to);
      box.items.push({ seq, message, channel, deliveries: 0, done: false, dueAtMs: 0 });
      wakeReaders(box);
      return { seq, duplicate: false };
    },
    async ensure(actorId, o?: InboxConsumerOptions) {
      const s = inboxDeliverySettings(o);
      inboxOf(actorId).consumer = { maxDeliver: s.maxDeliver, backoffMs: s.backoffMs, ackWaitMs: s.ackWaitMs ?? DEFAULT_ACK_WAIT_MS };
    },
    async open(actorId, o): Promise<Inbox> {
      const box = inboxOf(actorId);
      const logger = o?.logger?.child({ actorId });
      if (!box.consumer) {
        throw new BusError('bus.consumer_failed', `the inbox of ${actorId} has no consumer`,
          { hint: 'ensure the inbox before opening it', retryable: true });
      }
      const counts = () => ({
        undelivered: box.items.filter((m) => !m.done && m.deliveries === 0).length,
        unacked: box.items.filter((m) => !m.done && m.deliveries > 0).length,
      });
      return {
        async next({ expiresMs }) {
          // the same floor as a JetStream pull, so a caller sees the same timing on both
          const until = now() + Math.max(1_000, expiresMs);
          for (;;) {
            const m = pick(box);
            if (m) return deliver(actorId, box, m, logger);
            if (now() >= until) return null;
            await waitFor(box, until);
          }
        },
        async pending() {
          const c = counts();
          return c.undelivered + c.unacked;
        },
        async counts() {
          return counts();
        },
      };
    },
    async watch(signals) {
      watchers.add(signals);
      return { close: () => void watchers.delete(signals) };
    },
    requestClaim(actorId) {
      signal(() => {
        for (const c of claimers) c(actorId);
      });
    },
    watchClaims(onClaim) {
      claimers.add(onClaim);
      return { close: () => void claimers.delete(onClaim) };
    },
    deadLetters: () => [...dead],
  };
}
