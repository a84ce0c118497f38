import type { ActorEvent } from '../../src/protocol/events.js';

/** One event of the tree's stream: the event (its `actor` names whose log) and its stream sequence. */
export interface StreamEvent {
  streamSeq: number;
  event: ActorEvent;
}
