import {
  DeliverPolicy, JetStreamApiCodes, JetStreamApiError,
  type JetStreamClient, type JetStreamManager, type JsMsg, type MsgRequest,
} from '@nats-io/jetstream';
import { ClosedConnectionError, DrainingConnectionError, InvalidArgumentError } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { canonicalJson } from '../protocol/canonical-json.js';
import { StoreError, STORE_CODES } from '../protocol/errors.js';
import type { ActorEvent, EventDraft } from '../protocol/events.js';
import { decodeCommit, encodeCommit } from './commit-codec.js';
import { stampDrafts } from './stamp-drafts.js';
import { sleep } from '../protocol/sleep.js';
import { commitMsgId, logSubject, parseLogSubject, runLogFilter, STREAMS } from '../bus/subjects.js';
import type { LogPublisher } from '../bus/log-publisher.js';
import { serialCommits, type ActorLogs, type ActorLogWriter, type LogPosition, type LogReader, type StoredEvent, type TreeEvent } from './log-port.js';

export { decodeCommit } from './commit-codec.js';
export { stampDrafts, type CommitPlace } from './stamp-drafts.js';

/** Options of `createJetStreamLog`. */
export interface JetStreamLogOptions {
  /** `bus.logJs` on a host (or any JetStream client: the writer uses `publish` and `jetstreamManager`). */
  js: LogPublisher;
  rootId: string;
  actorId: string;
  /** Where the log ended when this incarnation read it: the fence of the first commit. */
  position: LogPosition;
  epoch: number;
  now?: () => Date;
  logger?: Logger;
  /**
   * The writer's life (the actor's): once aborted, a commit whose outcome is unknown stops being
   * retried and throws `store.publish_unknown`. Until then it is retried for as long as it takes.
   */
  signal?: AbortSignal;
  /** Publish attempts before a commit is reported unknown; default unbounded (only `signal` ends them). */
  maxAttempts?: number;
  /** Timeout of one publish (default 5000 ms). */
  publishTimeoutMs?: number;
}

interface PendingCommit {
  events: ActorEvent[];
  payload: string;
  msgId: string;
  /** The fence: stream seq of the last message on the subject before this commit. */
  expect: number;
  drafts: EventDraft[];
  /** canonicalJson of the drafts, to recognise a retry of the same commit (made only when unknown). */
  key?: string;
  attempts: number;
}

type Outcome = { kind: 'stored'; streamSeq: number } | { kind: 'fenced'; cause: unknown }
  | { kind: 'rejected'; cause: unknown } | { kind: 'too_large'; cause: unknown } | { kind: 'unknown'; cause: unknown; final: boolean };

/** Pauses between attempts: short at first (a lost ack), then about once a second (NATS restarting). */
const BACKOFF_MS = [100, 200, 400, 800, 1_000];

/** The connection is closed or draining: no retry can reach the server, the host is going away. */
function connectionGone(err: unknown): boolean {
  return err instanceof ClosedConnectionError || err instanceof DrainingConnectionError;
}

/**
 * A refusal the server may not repeat: JetStream answered, but with a 503 (temporarily
 * unavailable, e.g. while it recovers its streams after a restart). Anything else it answers is final.
 */
function transientApiError(err: JetStreamApiError): boolean {
  return err.status === 503;
}


/**
 * The JetStream writer of one actor's log: one message per commit, fenced by
 * `expect.lastSubjectSequence`, deduped by `Nats-Msg-Id = <actor>:<first seq>` (design §4).
 */
export function createJetStreamLog(opts: JetStreamLogOptions): ActorLogWriter {
  const { js, rootId, actorId, epoch } = opts;
  const now = opts.now ?? (() => new Date());
  // Bound by the caller when it wants (a child per writer would cost every hosted actor memory).
  const logger = opts.logger ?? pino({ level: 'silent' });
  const subject = logSubject(rootId, actorId);
  const maxAttempts = opts.maxAttempts ?? Infinity;
  const signal = opts.signal;
  const timeout = opts.publishTimeoutMs ?? 5_000;
  let position: LogPosition = { ...opts.position };
  let fenced: StoreError | undefined;
  let pending: PendingCommit | undefined;
  let jsm: Promise<JetStreamManager> | undefined;

  const fence = (cause: unknown, why: string): StoreError => {
    fenced = new StoreError(STORE_CODES.fenced,
      `log of ${actorId} was appended by another writer (${why}); this writer (epoch ${epoch}) stopped`,
      { cause, retryable: false });
    logger.warn({ actorId, epoch, position }, 'log writer fenced');
    return fenced;
  };

  const stamp = (drafts: EventDraft[]): ActorEvent[] => stampDrafts(drafts, { firstSeq: position.seq + 1, epoch, actorId }, now);

  // Is the message at `seq` this very commit? Bytes are unique: every event has a fresh ID.
  const storedIsOurs = async (seq: number, p: PendingCommit): Promise<boolean> => {
    jsm ??= js.jetstreamManager(false);
    const m = await (await jsm).streams.getMessage(STREAMS.logs, { seq });
    return m !== null && m.subject === subject && Buffer.from(m.data).toString('utf8') === p.payload;
  };

  const publishOnce = async (p: PendingCommit): Promise<Outcome> => {
    p.attempts++;
    try {
      const ack = await js.publish(subject, p.payload, { msgID: p.msgId, expect: { lastSubjectSequence: p.expect }, timeout });
      // On 2.9.10 dedupe is checked before the sequence (verified, also after a kill -9 and
      // restart: the server rebuilds its dedupe window from the stored messages): a duplicate is
      // either an earlier attempt of ours that landed or another writer's commit of the same seq.
      // A failed look is unknown, not fenced: it throws, and the caller retries.
      if (ack.duplicate && !(await storedIsOurs(ack.seq, p))) return { kind: 'fenced', cause: 'duplicate msg id' };
      return { kind: 'stored', streamSeq: ack.seq };
    } catch (err) {
      // nats.js refuses a message over the server's max_payload before sending a byte: nothing was
      // stored, and the same bytes would be refused again, so this is final, never retried
      if (err instanceof InvalidArgumentError) return { kind: 'too_large', cause: err };
      if (err instanceof JetStreamApiError) {
        if (transientApiError(err)) return { kind: 'unknown', cause: err, final: false };
        if (err.code !== JetStreamApiCodes.StreamWrongLastSequence) return { kind: 'rejected', cause: err };
        // After the duplicate window a retry of a commit that did land meets the sequence
        // check instead: the last message on the subject tells whether it was ours.
        const last = /wrong last sequence: (\d+)/.exec(err.message)?.[1];
        if (p.attempts > 1 && last) {
          // the look may fail too (NATS going away again): then the outcome is still unknown
          const ours = await storedIsOurs(Number(last), p).catch((cause: unknown) => ({ cause }));
          if (ours === true) return { kind: 'stored', streamSeq: Number(last) };
          if (ours !== false) return { kind: 'unknown', cause: ours.cause, final: connectionGone(ours.cause) };
        }
        return { kind: 'fenced', cause: err };
      }
      return { kind: 'unknown', cause: err, final: connectionGone(err) };
    }
  };

  const attempt = (p: PendingCommit): Promise<Outcome> =>
    publishOnce(p).catch((cause: unknown): Outcome => ({ kind: 'unknown', cause, final: connectionGone(cause) }));

  const settle = async (p: PendingCommit): Promise<ActorEvent[]> => {
    let last = await attempt(p);
    // Retried with the same ID and bytes for as long as the writer lives: while NATS is
    // unreachable the actor waits here, and no effect starts, since each waits for its intent.
    for (let i = 1; last.kind === 'unknown' && !last.final && i < maxAttempts && !signal?.aborted; i++) {
      const waitMs = BACKOFF_MS[Math.min(i - 1, BACKOFF_MS.length - 1)]!;
      logger.warn({ actorId, msgId: p.msgId, attempt: p.attempts, waitMs, err: last.cause },
        'commit outcome unknown (NATS unreachable?); retrying with the same ID');
      await sleep(waitMs, signal);
      if (!signal?.aborted) last = await attempt(p);
    }
    switch (last.kind) {
      case 'stored':
        pending = undefined;
        position = { seq: p.events[p.events.length - 1]!.seq, streamSeq: last.streamSeq };
        return p.events;
      case 'fenced':
        pending = undefined;
        throw fence(last.cause, `expected last stream seq ${p.expect}`);
      case 'rejected':
        // the server refused it for good: nothing was stored and the position stands
        pending = undefined;
        throw new StoreError(STORE_CODES.publishRejected, `log of ${actorId} refused a commit: ${(last.cause as Error).message}`,
          { cause: last.cause });
      case 'too_large':
        pending = undefined;
        throw new StoreError(STORE_CODES.commitTooLarge,
          `commit of ${Buffer.byteLength(p.payload)} bytes (${p.events.map((e) => e.type).join(', ')}) to the log of ${actorId} ` +
            `is larger than the NATS server takes in one message (max_payload: ${(last.cause as Error).message}); it was not stored`,
          { cause: last.cause, retryable: false, hint: 'this is a bug: content this large belongs in the blob store; report it with `actorloop events` of this agent' });
      case 'unknown':
        // only a closed connection, a stopped writer or an explicit attempt bound gets here
        p.key ??= canonicalJson(p.drafts);
        throw new StoreError(STORE_CODES.publishUnknown,
          `commit ${p.msgId} to the log of ${actorId} may or may not be stored`,
          { cause: last.cause, retryable: true, hint: 'retry commit with the same drafts; it republishes the same message' });
    }
  };

  const commitNow = async (drafts: EventDraft[]): Promise<ActorEvent[]> => {
    if (fenced) throw fenced;
    if (drafts.length === 0) return [];
    if (pending) {
      // an unknown commit must settle first, with the same ID and bytes, never a new one
      if (canonicalJson(drafts) !== pending.key) {
        throw new StoreError(STORE_CODES.publishUnknown,
          `commit ${pending.msgId} of ${actorId} is still unknown; retry it before committing anything else`,
          { retryable: true });
      }
      return settle(pending);
    }
    const events = stamp(drafts);
    pending = {
      events,
      payload: encodeCommit(events),
      msgId: commitMsgId(actorId, events[0]!.seq),
      expect: position.streamSeq,
      drafts,
      attempts: 0,
    };
    return settle(pending);
  };

  return { actorId, rootId, epoch, position: () => ({ ...position }), commit: serialCommits(commitNow) };
}

/** Options of `createLogReader`. */
export interface LogReaderOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  logger?: Logger;
}

/** How long one pull of a log consumer waits, and its idle heartbeat (two missed: the consumer is remade). */
const FOLLOW_PULL_MS = 10_000;
const FOLLOW_HEARTBEAT_MS = 1_500;

/** Commits a read takes by direct get before it makes a consumer for the rest. */
const DIRECT_READS = 8;

/** Where a consumer's messages end: at the end a read fixed, or live until the signal aborts. */
interface ConsumeUntil {
  /** The stream seq of the last message on the filter that the read wants (fixed before the consumer is made). */
  streamSeq?: number;
  /**
   * Also end when the consumer says nothing is pending. Not for a tree: nats-server 2.9.10 counts
   * one message too many for a wildcard filter that starts on another subject's message.
   */
  endWhenCaughtUp?: boolean;
  signal?: AbortSignal;
}

/** A reader of actor logs on the LOGS stream, through ordered consumers. */
export function createLogReader(opts: LogReaderOptions): LogReader {
  const { js, jsm } = opts;

  /**
   * Messages on `filter` (one actor's subject, or a tree's) from stream seq `start`, in stream
   * order, through an ordered consumer that is made again when the server loses it.
   */
  async function* logMessages(filter: string, start: number, until: ConsumeUntil): AsyncGenerator<JsMsg> {
    const { signal } = until;
    /** The next stream seq wanted: where a consumer made again starts. */
    let next = Math.max(1, start);
    for (;;) {
      const consumer = await js.consumers.get(STREAMS.logs, {
        filter_subjects: filter,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: next,
      });
      // Short pulls and heartbeats: on a cluster an ordered consumer lives on one server, and
      // when that server dies two missed heartbeats make nats.js remake it (below: from `next`).
      // With nats.js's default pulls and heartbeats a follower would stall for a whole pull.
      const messages = await consumer.consume({ max_messages: 256, expires: FOLLOW_PULL_MS, idle_heartbeat: FOLLOW_HEARTBEAT_MS });
      // nats.js 3.4 remakes an ordered consumer that a nats-server restart lost, but asks the new
      // one for only as many messages as the old one had delivered (its pending count is never
      // reset): a follower then stalls until two heartbeats are missed, 30 s. Start over from here.
      let remade = false;
      void (async () => {
        for await (const s of messages.status()) {
          if (s.type !== 'ordered_consumer_recreated') continue;
          remade = true;
          messages.stop();
          return;
        }
      })().catch(() => {});
      const stop = () => messages.stop();
      signal?.addEventListener('abort', stop, { once: true });
      try {
        for await (const m of messages) {
          // already yielded by the consumer before this one
          if (m.seq < next) continue;
          next = m.seq + 1;
          yield m;
          if (until.streamSeq !== undefined && (m.seq >= until.streamSeq || (until.endWhenCaughtUp && m.info.pending === 0))) return;
        }
      } finally {
        signal?.removeEventListener('abort', stop);
        messages.stop();
        void consumer.delete().catch(() => {});
      }
      if (!remade || signal?.aborted) return;
    }
  }

  /** The events of one actor's commit with a seq after `afterSeq`. */
  function* actorEvents(m: { data: Uint8Array; seq: number }, actorId: string, afterSeq: number): Generator<StoredEvent> {
    for (const event of decodeCommit(m.data, m.seq, actorId)) {
      if (event.seq > afterSeq) yield { event, streamSeq: m.seq };
    }
  }

  /** The events of a commit in a tree, each with its actor: the subject's (a commit there of another actor's events is refused). */
  function* treeEvents(rootId: string, m: JsMsg): Generator<TreeEvent> {
    const place = parseLogSubject(m.subject);
    if (!place || place.rootId !== rootId) {
      throw new StoreError(STORE_CODES.invalidEvent,
        `log message at stream seq ${m.seq} is on ${m.subject}, not the log of an actor under ${rootId}`);
    }
    for (const event of decodeCommit(m.data, m.seq, place.actorId)) yield { actorId: place.actorId, event, streamSeq: m.seq };
  }

  /** One actor's events after `afterSeq`, from `startStreamSeq`. */
  async function* consume(
    rootId: string, actorId: string, afterSeq: number, startStreamSeq: number, until: ConsumeUntil,
  ): AsyncGenerator<StoredEvent> {
    for await (const m of logMessages(logSubject(rootId, actorId), startStreamSeq, until)) yield* actorEvents(m, actorId, afterSeq);
  }

  const reader: LogReader = {
    async *read(rootId, actorId, o = {}) {
      const afterSeq = o.afterSeq ?? 0;
      // "to the end as of the call": the end is fixed first, and an empty tail costs no consumer
      const end = o.end ?? (await reader.end(rootId, actorId));
      let start = o.fromStreamSeq ?? 1;
      if (end.seq <= afterSeq || start > end.streamSeq) return;
      // A short tail (a rehydrate after a snapshot) is a few commits: one direct get each costs
      // less than making, pulling and deleting a consumer. A longer one goes on with a consumer.
      const subject = logSubject(rootId, actorId);
      for (let i = 0; i < DIRECT_READS; i++) {
        // `next_by_subj` is in the server's MSG.GET since 2.9 (nats.js types it for direct gets only)
        const m = await jsm.streams.getMessage(STREAMS.logs, { next_by_subj: subject, seq: start } as unknown as MsgRequest);
        if (!m || m.seq > end.streamSeq) return;
        yield* actorEvents(m, actorId, afterSeq);
        if (m.seq >= end.streamSeq) return;
        start = m.seq + 1;
      }
      yield* consume(rootId, actorId, afterSeq, start, { streamSeq: end.streamSeq, endWhenCaughtUp: true });
    },
    async *follow(rootId, actorId, o) {
      if (o.signal.aborted) return;
      yield* consume(rootId, actorId, o.afterSeq ?? 0, 1, { signal: o.signal });
    },
    async *readTree(rootId, o = {}) {
      const filter = runLogFilter(rootId);
      const start = (o.afterStreamSeq ?? 0) + 1;
      // "to the end as of the call": the tree's last message first (nats-server 2.9.10 answers a
      // wildcard `last_by_subj`), and an empty tail costs no consumer
      const last = await jsm.streams.getMessage(STREAMS.logs, { last_by_subj: filter });
      if (!last || last.seq < start) return;
      for await (const m of logMessages(filter, start, { streamSeq: last.seq })) yield* treeEvents(rootId, m);
    },
    async *followTree(rootId, o) {
      if (o.signal.aborted) return;
      const start = (o.afterStreamSeq ?? 0) + 1;
      for await (const m of logMessages(runLogFilter(rootId), start, { signal: o.signal })) yield* treeEvents(rootId, m);
    },
    async end(rootId, actorId) {
      const m = await jsm.streams.getMessage(STREAMS.logs, { last_by_subj: logSubject(rootId, actorId) });
      if (!m) return { seq: 0, streamSeq: 0 };
      const events = decodeCommit(m.data, m.seq, actorId);
      return { seq: events[events.length - 1]!.seq, streamSeq: m.seq };
    },
  };
  return reader;
}

/** Options of `createJetStreamLogs`. */
export interface JetStreamLogsOptions {
  /** The writers' publisher (`bus.logJs` on a host). */
  publisher: LogPublisher;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** Every actor's log on the LOGS stream: a `createJetStreamLog` writer per incarnation, one reader. */
export function createJetStreamLogs(opts: JetStreamLogsOptions): ActorLogs {
  const reader = createLogReader({ js: opts.js, jsm: opts.jsm });
  return {
    reader,
    writer: (o) => createJetStreamLog({ js: opts.publisher, ...o }),
  };
}
