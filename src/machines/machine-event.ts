import type { ActorEvent } from '../protocol/events.js';

/**
 * What every machine receives: committed (or staged, about to be committed) log events, plus
 * three runtime signals that are never logged: `recover` after a rehydrate (re-emit the effect
 * the machine is waiting on, or close what a crash left open), `tick` carrying the time, and
 * `abort` carrying why in-flight work must stop.
 */
export type MachineEvent =
  | ActorEvent
  | { type: 'recover' }
  | { type: 'tick'; nowMs: number }
  | { type: 'abort'; reason: string };

/** Milliseconds since epoch of an event's commit time; pure (the time arrives on the event). */
export function eventTimeMs(e: { at: string }): number {
  return Date.parse(e.at);
}

/** Declares an effect slot: a named action with typed params and no behaviour of its own. */
export function slot<P>() {
  return (_: unknown, _params: P): void => {};
}
