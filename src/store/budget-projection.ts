import type { EventOf } from '../protocol/events.js';
import type { Projection } from './projection.js';

// Budget reservations (design §6a: spend is reserved before it is allocated, as a committed fact,
// and settled once): what the projection keeps of them, folded from `budget/reserved` and
// `budget/settled`.

/** A budget reservation not settled yet (`budget/reserved` without its `budget/settled`). */
export interface ReservationRecord {
  scope: 'turn' | 'goal';
  /** The goal it counts against (scope `goal`). */
  goalId?: string;
  kind: 'attempt' | 'tool_calls' | 'subagent';
  turn: string;
  attemptId?: string;
  step?: string;
  tokens: number;
  costUsd: number | null;
  calls?: number;
  /** Steps a child's carve holds (kind `subagent`). */
  steps?: number;
  outputTokens?: number;
}

/** What a scope's settled reservations charged. */
export interface BudgetSpend {
  tokens: number;
  costUsd: number;
  calls: number;
  /** Steps its children spent (absent in older snapshots: none). */
  steps?: number;
}

/** `budget/reserved`: the reservation is open until its settlement. */
export function foldReserved(p: Projection, e: EventOf<'budget/reserved'>): void {
  (p.reservations ??= {})[e.data.reservationId] = {
    scope: e.data.scope,
    kind: e.data.kind,
    turn: e.turn ?? p.openTurn?.id ?? '',
    tokens: e.data.tokens,
    costUsd: e.data.costUsd,
    ...(e.data.attemptId ? { attemptId: e.data.attemptId } : {}),
    ...(e.data.goalId ? { goalId: e.data.goalId } : {}),
    ...(e.step ? { step: e.step } : {}),
    ...(e.data.calls !== undefined ? { calls: e.data.calls } : {}),
    ...(e.data.steps !== undefined ? { steps: e.data.steps } : {}),
    ...(e.data.outputTokens !== undefined ? { outputTokens: e.data.outputTokens } : {}),
  };
}

/** `budget/settled`: the reservation closes; what a turn-scope one charged adds to the open turn's spend. */
export function foldSettled(p: Projection, e: EventOf<'budget/settled'>): void {
  const r = p.reservations?.[e.data.reservationId];
  if (!r) return;
  delete p.reservations![e.data.reservationId];
  // a goal's spend is its usage, counted from attempt/end (goal-projection): only the turn's is summed here
  if (e.data.outcome === 'charged' && r.scope === 'turn' && p.openTurn && r.turn === p.openTurn.id) {
    const spend = (p.openTurn.spend ??= { tokens: 0, costUsd: 0, calls: 0 });
    spend.tokens += e.data.tokens;
    spend.costUsd = Math.round((spend.costUsd + (e.data.costUsd ?? 0)) * 1_000_000) / 1_000_000;
    spend.calls += e.data.calls ?? 0;
    if (e.data.steps) spend.steps = (spend.steps ?? 0) + e.data.steps;
  }
}
