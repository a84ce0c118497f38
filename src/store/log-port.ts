import type { Logger } from 'pino';
import type { ActorEvent, EventDraft } from '../protocol/events.js';

/** Where a log position is: the actor's own gapless `seq` and the JetStream stream sequence. */
export interface LogPosition {
  /** Last event seq of this actor's log (0 when empty). */
  seq: number;
  /** Stream sequence of the last message on this actor's subject (0 when empty): the fence. */
  streamSeq: number;
}

/** A committed event with the stream sequence of the commit that holds it. */
export interface StoredEvent {
  event: ActorEvent;
  streamSeq: number;
}

/** A committed event of one actor of a tree, as a read over the whole tree gives it. */
export interface TreeEvent extends StoredEvent {
  /** The actor whose log holds the event (its subject's). */
  actorId: string;
}

/**
 * Where a read over a tree starts: after a stream sequence, the client's resume cursor (design
 * §4). A commit is one stream sequence, so a cursor resumes after a whole commit.
 */
export interface TreeCursor {
  /** Commits with a stream sequence above this are read (default 0: the whole run). */
  afterStreamSeq?: number;
}

/**
 * The writer of one actor's log (design §4). One commit is one JetStream message holding ≥1
 * events, fenced by `expect.lastSubjectSequence` and deduped by `Nats-Msg-Id`.
 */
export interface ActorLogWriter {
  readonly actorId: string;
  readonly rootId: string;
  /** Position after the last commit this writer made or saw. */
  position(): LogPosition;
  /** The epoch stamped on every event this writer commits. */
  epoch: number;
  /**
   * Stamps v, seq, id, at, epoch, actor on each draft, validates, and publishes them as one
   * message. A draft that already carries the v, seq, epoch, actor and at this writer would
   * give it (an actor's staged event) is not copied: its `id` is filled in place. Throws StoreError `store.fenced` when another writer appended since (10071), after
   * which this writer refuses every further commit.
   */
  commit(drafts: EventDraft[]): Promise<ActorEvent[]>;
}

/** Reads actor logs. */
export interface LogReader {
  /**
   * Events of one actor with `seq > afterSeq`, in order, to the end as of the call (or `end`, when
   * the caller just read it); `fromStreamSeq` is a hint to start there.
   */
  read(rootId: string, actorId: string, opts?: { afterSeq?: number; fromStreamSeq?: number; end?: LogPosition }): AsyncIterable<StoredEvent>;
  /** Like `read`, then keeps following live commits until `signal` aborts. */
  follow(rootId: string, actorId: string, opts: { afterSeq?: number; signal: AbortSignal }): AsyncIterable<StoredEvent>;
  /** Position of the end of an actor's log right now. */
  end(rootId: string, actorId: string): Promise<LogPosition>;
  /**
   * Events of every actor under `rootId` (its log and its descendants'), in stream order across
   * actors, after the cursor, to the end as of the call.
   */
  readTree(rootId: string, opts?: TreeCursor): AsyncIterable<TreeEvent>;
  /** Like `readTree`, then keeps following live commits of the tree until `signal` aborts. */
  followTree(rootId: string, opts: TreeCursor & { signal: AbortSignal }): AsyncIterable<TreeEvent>;
}

/** What a writer of one incarnation of an actor starts from. */
export interface LogWriterOptions {
  rootId: string;
  actorId: string;
  /** Where the log ended when this incarnation read it: the fence of the first commit. */
  position: LogPosition;
  epoch: number;
  logger?: Logger;
  /** The writer's life: once aborted, a commit whose outcome is unknown stops being retried. */
  signal?: AbortSignal;
}

/** Every actor's log: a fenced writer per incarnation and one reader (`JetStreamLogs`, `MemoryLogs`). */
export interface ActorLogs {
  readonly reader: LogReader;
  writer(opts: LogWriterOptions): ActorLogWriter;
}

/**
 * A writer's commits, one at a time: two in flight would stamp the same seqs and fence each
 * other. A failed commit does not block the next (the writer itself decides whether it is fenced).
 */
export function serialCommits(commitNow: (drafts: EventDraft[]) => Promise<ActorEvent[]>): ActorLogWriter['commit'] {
  let queue: Promise<unknown> = Promise.resolve();
  return (drafts) => {
    const run = queue.then(() => commitNow(drafts));
    queue = run.catch(() => {});
    return run;
  };
}
