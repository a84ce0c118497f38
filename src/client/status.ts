import type { TurnOutcome } from '../protocol/events.js';
import type { Projection } from '../store/projection.js';

/**
 * What an agent is doing, as its log says (design §11: clients never guess): `running` with a
 * turn open or a task received and not yet started, `waiting` once it committed `actor/parked`
 * (a person must answer), the outcome of its last turn once that ended, `idle` before any.
 */
export type ClientStatus = 'idle' | 'running' | 'waiting' | TurnOutcome;

/** The status of an agent whose log folds to `p`. */
export function statusOf(p: Projection): ClientStatus {
  if (p.parked) return 'waiting';
  if (p.openTurn) return 'running';
  const startsTurn = Object.values(p.inbox).some((i) => i.state === 'pending' && (i.kind === 'user_message' || i.kind === 'follow_up'));
  if (startsTurn && !p.stopped) return 'running';
  return p.lastTurn?.outcome ?? 'idle';
}
