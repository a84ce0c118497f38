import type { Logger } from 'pino';
import type { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { InboxMessageSchema, type InboxMessage } from '../protocol/inbox.js';
import type { InboxChannel } from './subjects.js';

/** An inbox message as a sender writes it (defaults not yet applied). */
export type InboxMessageInput = z.input<typeof InboxMessageSchema>;

/** Result of publishing to an inbox: the inbox's sequence and whether the ID was seen before. */
export interface InboxPublishResult {
  seq: number;
  duplicate: boolean;
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

/** Validates a message before it is published (an edge); throws BusError `bus.invalid_message`. */
export function parseInboxInput(msg: InboxMessageInput): InboxMessage {
  const parsed = InboxMessageSchema.safeParse(msg);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BusError('bus.invalid_message',
      `invalid inbox message: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`);
  }
  return parsed.data;
}

const DEFAULT_BACKOFF_MS = [1_000, 5_000, 15_000, 30_000, 60_000];

/** The settings `opts` ask for, defaults applied; throws `bus.invalid_consumer` for more backoff steps than deliveries. */
export function inboxDeliverySettings(opts: InboxConsumerOptions = {}): { maxDeliver: number; backoffMs: number[]; ackWaitMs?: number } {
  const maxDeliver = opts.maxDeliver ?? 10;
  const backoffMs = opts.backoffMs ?? DEFAULT_BACKOFF_MS.filter((_, i) => i < maxDeliver - 1);
  if (backoffMs.length >= maxDeliver && maxDeliver !== -1) {
    throw new BusError('bus.invalid_consumer', `backoff has ${backoffMs.length} steps but maxDeliver is ${maxDeliver}`,
      { hint: 'give fewer backoff steps than maxDeliver' });
  }
  return { maxDeliver, backoffMs, ...(opts.ackWaitMs !== undefined ? { ackWaitMs: opts.ackWaitMs } : {}) };
}

/** How a delivery that could not be taken was settled. */
export type FailedTake = 'retry' | 'dead_letter';

/** One delivery of an inbox message; settle it with exactly one of ack, nak, term, fail. */
export interface InboxDelivery {
  message: InboxMessage;
  /** Who the message speaks for, from where it came in (never from the message itself). */
  channel: InboxChannel;
  /** 1 on first delivery. 2.9 can lose acks in a crash: dedupe by message ID, never by count. */
  deliveryCount: number;
  /** The consumer gives up after this delivery: a failure now makes it a dead letter. */
  lastDelivery: boolean;
  /** Messages the consumer had not delivered yet when it delivered this one. */
  undeliveredAfter: number;
  /** Messages the pull that got this one found undecodable and settled first (they may come again). */
  settledBefore: number;
  /** Acknowledges and waits for the inbox to confirm. */
  ack(): Promise<void>;
  /**
   * Removes the message from the inbox's store, its stored bytes overwritten (a message whose
   * content held a secret, once the log holds its receipt); the delivery is still to be settled.
   * Throws BusError `bus.erase_failed` (retryable unless the server refused it).
   */
  erase(): Promise<void>;
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

/** A subscription to inbox signals; `close` ends it. */
export interface InboxWatch {
  close(): void;
}

/** What a host hears about inboxes it does not read yet. */
export interface InboxSignals {
  /** Mail was published to `actorId`'s inbox (on any channel). */
  mail(actorId: string): void;
  /** The inbox may have lost a signal (a reconnect): every reader should look again. */
  resync(): void;
}

/**
 * The durable inboxes of every actor (design §6): publish with dedupe by message ID, one durable
 * consumer per actor, and the signals that tell a host which inbox to read, so a parked actor
 * holds no pull. `createJetStreamInboxes` (INBOX stream) and `createMemoryInboxes` implement it.
 */
export interface InboxPort {
  /**
   * Publishes to `msg.to`'s inbox on `channel` (who it speaks for). The result means the inbox
   * accepted it; a resend with the same ID is stored once. Throws BusError `bus.invalid_message`,
   * `bus.inbox_refused` (final) or `bus.publish_unknown` (retry with the same ID).
   */
  publish(msg: InboxMessageInput, channel: InboxChannel): Promise<InboxPublishResult>;
  /** Creates (or updates) the actor's durable consumer; mail published before it is delivered too. */
  ensure(actorId: string, opts?: InboxConsumerOptions): Promise<void>;
  /** A reader of an actor's inbox, whose consumer `ensure` made; `logger` hears of takes that failed. */
  open(actorId: string, opts?: { logger?: Logger }): Promise<Inbox>;
  /** Hears of mail to any inbox from the moment the promise resolves (no publish falls between). */
  watch(signals: InboxSignals): Promise<InboxWatch>;
  /** Asks the live hosts to claim an actor handed over with no new mail (each tries its lease). */
  requestClaim(actorId: string): void;
  /** Hears claim requests: `onClaim(actorId)` for each. */
  watchClaims(onClaim: (actorId: string) => void): InboxWatch;
}
