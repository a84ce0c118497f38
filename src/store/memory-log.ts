import { StoreError, STORE_CODES } from '../protocol/errors.js';
import type { ActorEvent, EventDraft } from '../protocol/events.js';
import { commitMsgId, logSubject, parseLogSubject } from '../bus/subjects.js';
import { decodeCommit, encodeCommit } from './commit-codec.js';
import { stampDrafts } from './stamp-drafts.js';
import { serialCommits, type ActorLogs, type ActorLogWriter, type LogPosition, type LogReader, type LogWriterOptions, type StoredEvent, type TreeEvent } from './log-port.js';

/** Options of `createMemoryLogs`. */
export interface MemoryLogsOptions {
  /** The largest commit stored, in bytes (default 1 MiB, NATS' default max_payload). */
  maxPayloadBytes?: number;
  now?: () => Date;
}

/** One stored commit: its bytes, as the LOGS stream holds them. */
interface StoredCommit {
  streamSeq: number;
  subject: string;
  payload: Buffer;
}

/** In-memory logs, with what tests look at besides the port. */
export interface MemoryLogs extends ActorLogs {
  /** Commits stored so far, on every actor's log (a stream's last sequence). */
  lastStreamSeq(): number;
}

/**
 * Every actor's log in this process's memory, with the JetStream log's semantics: one stream
 * sequence over all actors, a commit fenced by the last stream sequence of its actor's subject
 * and deduped by `<actor>:<first seq>`, events stamped, validated and encoded as on JetStream,
 * read back by decoding the stored bytes. For tests and embedders that need no NATS.
 */
export function createMemoryLogs(opts: MemoryLogsOptions = {}): MemoryLogs {
  const maxPayload = opts.maxPayloadBytes ?? 1024 * 1024;
  const now = opts.now ?? (() => new Date());
  const bySubject = new Map<string, StoredCommit[]>();
  const byMsgId = new Map<string, StoredCommit>();
  const waiting = new Set<() => void>();
  let lastSeq = 0;

  const commitsOf = (subject: string): StoredCommit[] => bySubject.get(subject) ?? [];

  const store = (subject: string, payload: Buffer, msgId: string): StoredCommit => {
    const c: StoredCommit = { streamSeq: ++lastSeq, subject, payload };
    const list = bySubject.get(subject);
    if (list) list.push(c);
    else bySubject.set(subject, [c]);
    byMsgId.set(msgId, c);
    for (const w of [...waiting]) w();
    return c;
  };

  const writer = (o: LogWriterOptions): ActorLogWriter => {
    const { rootId, actorId, epoch } = o;
    const subject = logSubject(rootId, actorId);
    let position: LogPosition = { ...o.position };
    let fenced: StoreError | undefined;

    const fence = (why: string): StoreError => {
      fenced = new StoreError(STORE_CODES.fenced,
        `log of ${actorId} was appended by another writer (${why}); this writer (epoch ${epoch}) stopped`,
        { retryable: false });
      o.logger?.warn({ actorId, epoch, position }, 'log writer fenced');
      return fenced;
    };

    const commitNow = async (drafts: EventDraft[]): Promise<ActorEvent[]> => {
      if (fenced) throw fenced;
      if (drafts.length === 0) return [];
      const events = stampDrafts(drafts, { firstSeq: position.seq + 1, epoch, actorId }, now);
      const payload = Buffer.from(encodeCommit(events), 'utf8');
      if (payload.length > maxPayload) {
        throw new StoreError(STORE_CODES.commitTooLarge,
          `commit of ${payload.length} bytes (${events.map((e) => e.type).join(', ')}) to the log of ${actorId} ` +
            `is larger than the log takes in one message (${maxPayload} bytes); it was not stored`,
          { retryable: false, hint: 'this is a bug: content this large belongs in the blob store; report it with `actorloop events` of this agent' });
      }
      // a PubAck is never synchronous: neither is this one
      await Promise.resolve();
      const msgId = commitMsgId(actorId, events[0]!.seq);
      // as on JetStream, dedupe is checked before the sequence: the same ID with other bytes is
      // another writer's commit of the same seq
      const dup = byMsgId.get(msgId);
      if (dup) throw fence('duplicate msg id');
      const list = commitsOf(subject);
      const last = list.length > 0 ? list[list.length - 1]!.streamSeq : 0;
      if (last !== position.streamSeq) throw fence(`expected last stream seq ${position.streamSeq}`);
      const c = store(subject, payload, msgId);
      position = { seq: events[events.length - 1]!.seq, streamSeq: c.streamSeq };
      return events;
    };

    return { actorId, rootId, epoch, position: () => ({ ...position }), commit: serialCommits(commitNow) };
  };

  const endOf = (rootId: string, actorId: string): LogPosition => {
    const list = commitsOf(logSubject(rootId, actorId));
    const last = list[list.length - 1];
    if (!last) return { seq: 0, streamSeq: 0 };
    const events = decodeCommit(last.payload, last.streamSeq, actorId);
    return { seq: events[events.length - 1]!.seq, streamSeq: last.streamSeq };
  };

  function* eventsOf(c: StoredCommit, actorId: string, afterSeq: number): Generator<StoredEvent> {
    for (const event of decodeCommit(c.payload, c.streamSeq, actorId)) {
      if (event.seq > afterSeq) yield { event, streamSeq: c.streamSeq };
    }
  }

  /** Commits of every actor under `rootId` with a stream seq above `after`, in stream order. */
  const treeCommitsAfter = (rootId: string, after: number): { actorId: string; commit: StoredCommit }[] => {
    const out: { actorId: string; commit: StoredCommit }[] = [];
    for (const [subject, list] of bySubject) {
      const place = parseLogSubject(subject);
      if (place?.rootId !== rootId) continue;
      // a subject's commits are in stream order: only its tail past the cursor is wanted
      for (let i = list.length - 1; i >= 0 && list[i]!.streamSeq > after; i--) out.push({ actorId: place.actorId, commit: list[i]! });
    }
    return out.sort((a, b) => a.commit.streamSeq - b.commit.streamSeq);
  };

  /** The events of one commit in a tree, each with its actor. */
  function* treeEventsOf(actorId: string, c: StoredCommit): Generator<TreeEvent> {
    for (const s of eventsOf(c, actorId, 0)) yield { actorId, ...s };
  }

  /** Resolves at the next commit to any log, or when `signal` aborts. */
  const nextCommit = (signal: AbortSignal): Promise<void> => new Promise<void>((resolve) => {
    const done = (): void => {
      waiting.delete(done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    waiting.add(done);
    signal.addEventListener('abort', done, { once: true });
  });

  const reader: LogReader = {
    async *read(rootId, actorId, o = {}) {
      const afterSeq = o.afterSeq ?? 0;
      // "to the end as of the call": the end is fixed first
      const end = o.end ?? endOf(rootId, actorId);
      const from = o.fromStreamSeq ?? 1;
      for (const c of [...commitsOf(logSubject(rootId, actorId))]) {
        if (c.streamSeq > end.streamSeq) return;
        if (c.streamSeq >= from) yield* eventsOf(c, actorId, afterSeq);
      }
    },
    async *follow(rootId, actorId, o) {
      const subject = logSubject(rootId, actorId);
      const afterSeq = o.afterSeq ?? 0;
      let next = 0;
      while (!o.signal.aborted) {
        const list = commitsOf(subject);
        if (next < list.length) {
          yield* eventsOf(list[next++]!, actorId, afterSeq);
          continue;
        }
        await nextCommit(o.signal);
      }
    },
    async *readTree(rootId, o = {}) {
      // "to the end as of the call": the commits are taken first
      for (const { actorId, commit } of treeCommitsAfter(rootId, o.afterStreamSeq ?? 0)) yield* treeEventsOf(actorId, commit);
    },
    async *followTree(rootId, o) {
      let after = o.afterStreamSeq ?? 0;
      while (!o.signal.aborted) {
        const batch = treeCommitsAfter(rootId, after);
        for (const { actorId, commit } of batch) {
          if (o.signal.aborted) return;
          yield* treeEventsOf(actorId, commit);
          after = commit.streamSeq;
        }
        if (batch.length === 0) await nextCommit(o.signal);
      }
    },
    async end(rootId, actorId) {
      return endOf(rootId, actorId);
    },
  };

  return { reader, writer, lastStreamSeq: () => lastSeq };
}
