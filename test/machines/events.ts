import { transition, type AnyStateMachine, type EventFromLogic, type SnapshotFrom } from 'xstate';
import { parseEvent, type EventData, type EventOf, type EventType } from '../../src/protocol/events.js';
import type { Usage } from '../../src/protocol/history.js';

/** Commit time of every test event unless one is given. */
export const T0 = '2026-01-01T00:00:00.000Z';
/** `T0` in milliseconds since epoch. */
export const T0_MS = Date.parse(T0);

/** ISO time `offsetMs` after `T0`. */
export function at(offsetMs: number): string {
  return new Date(T0_MS + offsetMs).toISOString();
}

/** Envelope fields a test may set; the rest are filled in. */
export interface EventOptions {
  at?: string;
  seq?: number;
  actor?: string;
  turn?: string;
  step?: string;
  attempt?: string;
  call?: string;
}

let nextSeq = 1;

/**
 * A committed event as the log would hand it to a machine: the full envelope (v, seq, id, at,
 * epoch, actor, scope) around typed data, parsed by the real schema so a fixture can't drift.
 */
export function ev<T extends EventType>(type: T, data: EventData<T>, opts: EventOptions = {}): EventOf<T> {
  const seq = opts.seq ?? nextSeq++;
  const { at: time = T0, actor = 'agent-1', seq: _seq, ...scope } = opts;
  return parseEvent({ v: 1, seq, id: `evt-${seq}`, at: time, epoch: 0, actor, ...scope, type, data }) as EventOf<T>;
}

/** Usage of one attempt. */
export function usage(inputTokens: number, outputTokens: number, estimated = false): Usage {
  return { inputTokens, outputTokens, estimated };
}

/** An effect as a test compares it: the slot's name and its resolved params. */
export interface Effect {
  type: string;
  params: unknown;
}

/** Strips executable actions down to `{type, params}` (assign never appears: xstate applies it). */
export function effects(actions: readonly { type: string; params?: unknown }[]): Effect[] {
  return actions.map((a) => ({ type: a.type, params: a.params }));
}

/** Sends one event; returns the next snapshot and the effects it asked for. */
export function send<M extends AnyStateMachine>(
  machine: M,
  snapshot: SnapshotFrom<M>,
  event: EventFromLogic<M>,
): [SnapshotFrom<M>, Effect[]] {
  const [next, actions] = transition(machine, snapshot, event);
  return [next, effects(actions)];
}

/** Folds events into a snapshot, as a rehydrate folds the log; the effects are dropped. */
export function feed<M extends AnyStateMachine>(
  machine: M,
  snapshot: SnapshotFrom<M>,
  events: EventFromLogic<M>[],
): SnapshotFrom<M> {
  let s = snapshot;
  for (const e of events) s = transition(machine, s, e)[0];
  return s;
}
