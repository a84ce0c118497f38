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
