import type { ActorEvent } from '../protocol/events.js';
import type { LogReader } from '../store/log-port.js';
import { emptyProjection, foldEvent, type Projection } from '../store/projection.js';
import { statusOf, type ClientStatus } from './status.js';

/** Where a follower reads: one agent's log. */
export interface FollowTarget {
  rootId: string;
  actorId: string;
}

/** Options of `followAgent`. */
export interface FollowOptions extends FollowTarget {
  reader: Pick<LogReader, 'read' | 'follow'>;
  /**
   * The agent's state folded so far (not copied: the follower folds into it); events after its
   * `seq` are read. Absent: the log from its first event.
   */
  from?: Projection;
  /** Ends the following; without it the follower stops at the end of the log as of now. */
  signal?: AbortSignal;
}

/** One committed event as a client sees it: the event, the agent's state after it, and its status. */
export interface ClientEvent {
  event: ActorEvent;
  /** Stream sequence of the commit that holds the event: the cursor to follow on from. */
  streamSeq: number;
  /** The agent's state with this event folded in (the same object each time). */
  projection: Projection;
  status: ClientStatus;
}

/**
 * The one client path (design §11): reads an agent's log after a sequence, then (with a signal)
 * follows it live, folding each event with the projection every other reader uses and yielding it
 * with the status that follows from it. Nothing here is inferred from time or silence: a wait for a
 * person is the `actor/parked` the actor committed. A live follow whose consumer ends without
 * being asked to (the server lost it) goes on from the last event seen.
 */
export async function* followAgent(o: FollowOptions): AsyncGenerator<ClientEvent> {
  const p = o.from ?? emptyProjection(o.actorId);
  const { signal } = o;
  for (;;) {
    const source = signal
      ? o.reader.follow(o.rootId, o.actorId, { afterSeq: p.seq, signal })
      : o.reader.read(o.rootId, o.actorId, { afterSeq: p.seq });
    for await (const { event, streamSeq } of source) {
      // a consumer restarted from a seq may hand an event seen already: each is folded once
      if (event.seq <= p.seq) continue;
      foldEvent(p, event);
      yield { event, streamSeq, projection: p, status: statusOf(p) };
    }
    if (!signal || signal.aborted) return;
  }
}

/** Options of `followTree`. */
export interface FollowTreeOptions {
  reader: Pick<LogReader, 'read' | 'readTree' | 'followTree'>;
  /** The tree: its top agent. */
  rootId: string;
  /** The client's resume cursor: commits after this stream sequence are read (absent: the whole run). */
  afterStreamSeq?: number;
  /**
   * Each actor's state folded so far, by actor ID (not copied: the follower folds into it and adds
   * the actors it meets). An actor it does not hold is caught up from its own log first.
   */
  projections?: Map<string, Projection>;
  /** Ends the following; without it the follower stops at the end of the tree's log as of now. */
  signal?: AbortSignal;
}

/** One committed event of a tree as a client sees it: its actor, the event, that actor's state after it, and its status. */
export interface TreeClientEvent extends ClientEvent {
  actorId: string;
}

/**
 * The client path over a whole run (design §4, §11): every actor's events under one root in
 * stream order from a stream-sequence cursor, then (with a signal) live, each folded into its
 * actor's projection with the same code `followAgent` uses. An actor first met after its first
 * event (a resume from a cursor) has its earlier events folded from its own log, so its state is
 * the log's, never a guess from a partial tail. A live follow whose consumer ends without being
 * asked to goes on from the last commit seen.
 */
export async function* followTree(o: FollowTreeOptions): AsyncGenerator<TreeClientEvent> {
  const { reader, rootId, signal } = o;
  const projections = o.projections ?? new Map<string, Projection>();
  let after = o.afterStreamSeq ?? 0;
  for (;;) {
    const source = signal
      ? reader.followTree(rootId, { afterStreamSeq: after, signal })
      : reader.readTree(rootId, { afterStreamSeq: after });
    for await (const { actorId, event, streamSeq } of source) {
      let p = projections.get(actorId);
      if (!p) {
        p = emptyProjection(actorId);
        projections.set(actorId, p);
        if (event.seq > 1) {
          for await (const earlier of reader.read(rootId, actorId, { end: { seq: event.seq - 1, streamSeq } })) {
            if (earlier.event.seq < event.seq) foldEvent(p, earlier.event);
          }
        }
      }
      // a consumer restarted from a commit may hand an event seen already: each is folded once
      if (event.seq <= p.seq) continue;
      foldEvent(p, event);
      // a commit holds several events: going on after the one before it cannot skip its rest
      after = streamSeq - 1;
      yield { actorId, event, streamSeq, projection: p, status: statusOf(p) };
    }
    if (!signal || signal.aborted) return;
  }
}
