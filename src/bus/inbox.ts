import {
  AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError,
  type ConsumerConfig, type Consumer, type NextOptions, type JetStreamClient, type JetStreamManager, type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { sleep } from '../protocol/sleep.js';
import { transientBusError } from './log-publisher.js';
import { deadLetterErrorOf, decodeInboxMessage, messageIdOf, recordDeadLetter, type DeadLetterError } from './dead-letters.js';
import type {
  FailedTake, Inbox, InboxConsumerOptions, InboxDelivery, InboxMessageInput, InboxPort, InboxPublishResult,
} from './inbox-port.js';
import { inboxDeliverySettings, parseInboxInput } from './inbox-port.js';
import { claimSubject, inboxConsumerName, inboxFilter, inboxSubject, parseInboxSubject, STREAMS, type InboxChannel } from './subjects.js';

export type {
  FailedTake, Inbox, InboxConsumerOptions, InboxDelivery, InboxMessageInput, InboxPort, InboxPublishResult,
} from './inbox-port.js';

/**
 * Publishes a message to its recipient's durable inbox with `Nats-Msg-Id = id`: the PubAck
 * means the inbox accepted it, and a resend with the same ID is stored once. `channel` is who it
 * speaks for; the server refuses a channel the connection's user may not publish on.
 */
export async function publishInbox(js: JetStreamClient, msg: InboxMessageInput, channel: InboxChannel): Promise<InboxPublishResult> {
  const parsed = parseInboxInput(msg);
  try {
    const ack = await js.publish(inboxSubject(msg.to, channel), JSON.stringify(parsed), { msgID: msg.id });
    return { seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    // a server's refusal is final; anything else (timeout, disconnect) may be retried with the same ID
    const refused = err instanceof JetStreamApiError;
    throw new BusError(refused ? 'bus.inbox_refused' : 'bus.publish_unknown',
      `inbox of ${msg.to} did not accept ${msg.id}: ${(err as Error).message}`,
      { cause: err, retryable: !refused });
  }
}

/** Creates (or updates) the durable pull consumer of one actor's inbox. */
export async function ensureInboxConsumer(
  jsm: JetStreamManager, actorId: string, opts: InboxConsumerOptions = {},
): Promise<void> {
  const { maxDeliver, backoffMs } = inboxDeliverySettings(opts);
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
  // A timeout or a 503 (a cluster's meta leader busy with many consumers at once, an election) is
  // tried again for a while: each try looks first, so a consumer an unanswered add made is found.
  const deadline = Date.now() + CONSUMER_RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      await ensureOnce();
      return;
    } catch (err) {
      if (!transientBusError(err) || Date.now() >= deadline) {
        throw new BusError('bus.consumer_failed', `cannot set up the inbox consumer of ${actorId}: ${(err as Error).message}`,
          { cause: err, retryable: true });
      }
      await sleep(Math.min(250 * 2 ** attempt, 4_000));
    }
  }

  async function ensureOnce(): Promise<void> {
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
  }
}

/** How long setting up an inbox consumer is tried again through timeouts and 503s. */
export const CONSUMER_RETRY_MS = 20_000;

/** The idle heartbeat of an inbox pull: a dead server is noticed after two of them are missed. */
export const INBOX_HEARTBEAT_MS = 1_000;

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
  jsm: JetStreamManager;
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
  const ctx: InboxContext = { js, jsm, actorId, maxDeliver: (await consumer.info(true)).config.max_deliver ?? -1, logger };
  return {
    async next({ expiresMs }) {
      // the client refuses pulls shorter than 1 s
      const deadline = Date.now() + Math.max(1_000, expiresMs);
      let settled = 0;
      while (true) {
        const left = deadline - Date.now();
        if (left <= 0) return null;
        // Short heartbeats whatever the wait: a pull on a consumer whose server died (its leader
        // on a cluster) ends after two missed ones, and the caller pulls again from the new leader,
        // instead of waiting out the pull (a long one would stall the inbox for its whole length).
        const expires = Math.max(1_000, left);
        // nats.js 3.4 hands `next`'s options to its fetch, which takes a heartbeat; its type omits it
        const m = await consumer.next({ expires, idle_heartbeat: Math.min(INBOX_HEARTBEAT_MS, expires / 2) } as NextOptions);
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
    async erase() {
      try {
        // erase (not no_erase): the server overwrites the message's bytes in its file store
        await ctx.jsm.streams.deleteMessage(STREAMS.inbox, m.seq, true);
      } catch (err) {
        const refused = err instanceof JetStreamApiError;
        throw new BusError('bus.erase_failed', `inbox message ${message.id} (seq ${m.seq}) was not erased: ${(err as Error).message}`,
          { cause: err, retryable: !refused });
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

/** Options of `createJetStreamInboxes`. */
export interface JetStreamInboxesOptions {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** JetStream of the login that may publish on the person channel (`bus.person`). */
  person(): Promise<JetStreamClient>;
  logger?: Logger;
}

/**
 * The inboxes on the INBOX stream. Signals are core NATS: inbox publishes are plain NATS messages
 * too, so one subscription on every inbox subject tells a host which actor has mail, and a claim
 * request is a core message on `claim.<actorId>`.
 */
export function createJetStreamInboxes(o: JetStreamInboxesOptions): InboxPort {
  const logger = o.logger ?? pino({ level: 'silent' });
  return {
    async publish(msg, channel) {
      return publishInbox(channel === 'person' ? await o.person() : o.js, msg, channel);
    },
    ensure: (actorId, opts) => ensureInboxConsumer(o.jsm, actorId, opts),
    open: (actorId, opts) => openInbox(o.js, o.jsm, actorId, { logger: opts?.logger ?? logger, ensured: true }),
    async watch(signals) {
      let closed = false;
      const sub = o.nc.subscribe(inboxFilter('*'), {
        callback: (_err, msg) => {
          const to = parseInboxSubject(msg.subject);
          if (to) signals.mail(to.actorId);
        },
      });
      // registered with the server before any actor looks at its inbox: no publish falls between
      await o.nc.flush();
      // A server killed and restarted can lose a recent delivery or ack (2.9 saves consumer state
      // asynchronously), and no new publish would signal it: after a reconnect every reader looks again.
      void (async () => {
        for await (const s of o.nc.status()) {
          if (closed) return;
          if (s.type === 'reconnect') signals.resync();
        }
      })().catch(() => {});
      return {
        close() {
          closed = true;
          sub.unsubscribe();
        },
      };
    },
    requestClaim(actorId) {
      o.nc.publish(claimSubject(actorId));
    },
    watchClaims(onClaim) {
      const prefix = claimSubject('');
      const sub = o.nc.subscribe(claimSubject('>'), {
        callback: (_err, msg) => onClaim(msg.subject.slice(prefix.length)),
      });
      return { close: () => sub.unsubscribe() };
    },
  };
}
