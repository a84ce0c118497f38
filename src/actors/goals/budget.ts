import { derivedId } from '../../protocol/ids.js';
import type { Usage } from '../../protocol/history.js';
import type { PreparedRequest } from '../../model/model-port.js';
import { costOf, type Price } from '../../model/pricing.js';
import { promptTokens } from '../../model/tokens.js';
import type { Projection, ReservationRecord } from '../../store/projection.js';
import { scope, settings, type EffectContext } from '../agent/effect-context.js';
import { costFor, ensureModel } from '../agent/model-request.js';
import { modelName } from '../../model/model-spec.js';

// Budgets that cannot be overspent (design §6a): spend is reserved as a committed fact before it
// is allocated, and each reservation is settled exactly once, by the event that ends what it
// reserved for (the attempt's `attempt/end`, the step's `step/end`), or by recovery.

/** A budget that a reservation did not fit: the turn stops with it as its reason. */
export type BudgetStop = 'token_budget' | 'cost_budget' | 'goal_token_budget' | 'goal_cost_budget';

/** The reasons a turn stops with when its goal's budget did not fit: the goal is then `blocked` on it. */
export const GOAL_BUDGET_STOPS: Readonly<Record<string, 'tokens' | 'cost'>> = { goal_token_budget: 'tokens', goal_cost_budget: 'cost' };

/** The ID of the turn-scope reservation of an attempt: derived, so a retried commit names the same one. */
export function attemptReservationId(attemptId: string): string {
  return derivedId('reservation', 'turn', 'attempt', attemptId);
}

/** The ID of the goal-scope reservation of an attempt: derived from the goal and the attempt. */
export function goalReservationId(goalId: string, attemptId: string): string {
  return derivedId('reservation', 'goal', goalId, 'attempt', attemptId);
}

/** The ID of the turn-scope reservation of a step's tool calls. */
export function toolReservationId(stepId: string): string {
  return derivedId('reservation', 'turn', 'tool_calls', stepId);
}

/** What a scope may still spend; null where it has no limit. */
export interface Room {
  tokens: number | null;
  costUsd: number | null;
}

function roundUsd(n: number): number {
  return Math.round(n * 1_000_000) / 1_000_000;
}

/** What the open turn may still spend: its limits less what was charged and what is reserved. */
export function turnRoom(p: Projection): Room {
  const turn = p.openTurn!;
  const { maxTokens, maxCostUsd } = turn.settings.budgets;
  let tokens = turn.spend?.tokens ?? 0;
  let cost = turn.spend?.costUsd ?? 0;
  for (const r of Object.values(p.reservations ?? {})) {
    if (r.turn !== turn.id || r.scope !== 'turn') continue;
    tokens += r.tokens;
    cost += r.costUsd ?? 0;
  }
  return {
    tokens: maxTokens == null ? null : maxTokens - tokens,
    costUsd: maxCostUsd == null ? null : roundUsd(maxCostUsd - cost),
  };
}

/** What the open turn may still start of its counted budgets; null where it has no limit. */
export interface CountRoom {
  steps: number | null;
  calls: number | null;
}

/**
 * Steps and tool calls the open turn may still start: its limits less its own steps, less the
 * calls and steps settled reservations charged (its own calls, its children's spend) and those
 * reserved in flight (a step's calls, a running child's carve).
 */
export function turnCountRoom(p: Projection): CountRoom {
  const turn = p.openTurn!;
  const { maxSteps, maxToolCalls } = turn.settings.budgets;
  let steps = turn.steps + (turn.spend?.steps ?? 0);
  let calls = turn.spend?.calls ?? 0;
  for (const r of Object.values(p.reservations ?? {})) {
    if (r.turn !== turn.id || r.scope !== 'turn') continue;
    steps += r.steps ?? 0;
    calls += r.calls ?? 0;
  }
  return { steps: maxSteps === null ? null : maxSteps - steps, calls: maxToolCalls === null ? null : maxToolCalls - calls };
}

/**
 * What the agent's goal may still spend: its budget less its usage (every attempt's, across its
 * turns) less its reservations in flight. Null when there is no active goal with a token or cost
 * budget: nothing is reserved against it.
 */
export function goalRoom(p: Projection): Room | null {
  const g = p.goal;
  if (!g || g.phase !== 'active' || (g.budget.tokens === undefined && g.budget.costUsd === undefined)) return null;
  let tokens = g.usage.tokens;
  let cost = g.usage.costUsd ?? 0;
  for (const r of Object.values(p.reservations ?? {})) {
    if (r.scope !== 'goal' || r.goalId !== g.id) continue;
    tokens += r.tokens;
    cost += r.costUsd ?? 0;
  }
  return {
    tokens: g.budget.tokens === undefined ? null : g.budget.tokens - tokens,
    costUsd: g.budget.costUsd === undefined ? null : roundUsd(g.budget.costUsd - cost),
  };
}

/** Whether an attempt reserves anything: its turn has a token or cost budget, or its goal has. */
export function reservesAttempt(p: Projection): boolean {
  const { maxTokens, maxCostUsd } = p.openTurn!.settings.budgets;
  return maxTokens != null || maxCostUsd != null || goalRoom(p) !== null;
}

/** The output tokens an attempt's reservation leaves room for, and the budget that bounds them, while it streams. */
export interface OutputRoom {
  tokens: number;
  budget: BudgetStop;
}

/** The output tokens a scope's room leaves after the input, by its token and by its cost limit; a stop when it cannot take the cap. */
function outputFit(
  room: Room,
  input: number,
  price: Price | null,
  cap: number | null,
  stops: { tokens: BudgetStop; cost: BudgetStop },
): { stop: BudgetStop } | { bounds: Array<{ tokens: number; budget: BudgetStop }> } {
  // a cost limit with no price: `run` refuses this before it starts; a turn that got here anyway
  // (an embedder's) spends nothing it cannot count, rather than passing silently
  if (room.costUsd !== null && !price) return { stop: stops.cost };
  const byTokens = room.tokens === null ? Infinity : room.tokens - input;
  const inputCost = costOf({ inputTokens: input, outputTokens: 0, estimated: true }, price) ?? 0;
  const costRoom = room.costUsd === null || !price ? Infinity : room.costUsd - inputCost;
  if (costRoom < 0) return { stop: stops.cost };
  // free output (a zero output price) is bounded by the token budget alone
  const byCost = !Number.isFinite(costRoom) || price!.outputPerMTok === 0 ? Infinity : Math.floor((costRoom * 1_000_000) / price!.outputPerMTok);
  if (byTokens < (cap ?? 1)) return { stop: stops.tokens };
  if (byCost < (cap ?? 1)) return { stop: stops.cost };
  return { bounds: [{ tokens: byTokens, budget: stops.tokens }, { tokens: byCost, budget: stops.cost }] };
}

/**
 * Reserves the worst case of the attempt about to start, staged before its `attempt/start` (one
 * commit): the prepared input's tokens plus the output cap (`--max-output-tokens`, else the
 * model's), at the model's price, against the turn's budgets and, while the agent has an active
 * goal with a token or cost budget, against the goal's too (a second reservation). With no known
 * cap the output gets what room is left in both, and the stream is cut past it. Returns the
 * budget that does not fit, staging nothing; else the output room the stream is counted against
 * (null when nothing is reserved).
 */
export async function reserveAttempt(a: EffectContext, attemptId: string, prepared: PreparedRequest): Promise<{ stop: BudgetStop } | { room: OutputRoom | null }> {
  const s = settings(a);
  const { maxTokens, maxCostUsd } = s.budgets;
  const turn = maxTokens == null && maxCostUsd == null ? null : turnRoom(a.projection);
  const goal = goalRoom(a.projection);
  if (!turn && !goal) return { room: null };
  const model = modelName(s.model);
  const price = a.ports.pricing?.(model) ?? null;
  const input = promptTokens(prepared.request);
  const cap = s.maxOutputTokens ?? (await ensureModel(a)).capabilities(model).maxOutputTokens;
  const bounds: Array<{ tokens: number; budget: BudgetStop }> = [];
  // the turn's budgets first: a turn that cannot go on stops on its own budget, and the goal stays active
  if (turn) {
    const fit = outputFit(turn, input, price, cap, { tokens: 'token_budget', cost: 'cost_budget' });
    if ('stop' in fit) return fit;
    bounds.push(...fit.bounds);
  }
  if (goal) {
    const fit = outputFit(goal, input, price, cap, { tokens: 'goal_token_budget', cost: 'goal_cost_budget' });
    if ('stop' in fit) return fit;
    bounds.push(...fit.bounds);
  }
  const tightest = bounds.reduce((m, b) => (b.tokens < m.tokens ? b : m));
  // no known cap and nothing that bounds the output (free output, no token budget): only the input is reserved
  const share = cap ?? tightest.tokens;
  const output = Number.isFinite(share) ? share : 0;
  const usage: Usage = { inputTokens: input, outputTokens: output, estimated: true };
  const worst = { kind: 'attempt' as const, attemptId, tokens: input + output, costUsd: costOf(usage, price), outputTokens: output };
  // in the step, not the attempt: each is committed with the attempt/start that opens the attempt
  if (turn) a.stage({ type: 'budget/reserved', ...scope(a), data: { reservationId: attemptReservationId(attemptId), scope: 'turn', ...worst } });
  if (goal) {
    const goalId = a.projection.goal!.id;
    a.stage({ type: 'budget/reserved', ...scope(a), data: { reservationId: goalReservationId(goalId, attemptId), scope: 'goal', goalId, ...worst } });
  }
  // the stream is counted against its share: a model may pass the cap it was sent, or have none
  return { room: { tokens: share, budget: tightest.budget } };
}

/**
 * Settles the reservations of an attempt, staged right after its `attempt/end` (one commit):
 * charged with the attempt's usage, or released when it used nothing. Only open ones: a
 * reservation is settled exactly once.
 */
export function settleAttempt(a: EffectContext, attemptId: string, usage: Usage): void {
  const reservations = a.projection.reservations;
  if (!reservations) return;
  for (const [reservationId, r] of Object.entries(reservations)) {
    if (r.kind !== 'attempt' || r.attemptId !== attemptId) continue;
    const tokens = usage.inputTokens + usage.outputTokens;
    a.stage({
      type: 'budget/settled',
      ...scope(a),
      data: { reservationId, tokens, costUsd: costFor(a, usage), outcome: tokens > 0 ? 'charged' : 'released' },
    });
  }
}

/**
 * Reserves the calls of a step that may run against the turn's tool budget, staged before the
 * step's `tool/call` events (one commit, before any call is dispatched). Calls past it are
 * cancelled by their machines (`withinBudget: false`). Once per step: a re-dispatch after a
 * crash finds the reservation.
 */
export function reserveToolCalls(a: EffectContext, calls: number): void {
  const { step, turn } = scope(a);
  const reservationId = toolReservationId(step);
  if (a.projection.reservations?.[reservationId] || calls === 0) return;
  a.stage({
    type: 'budget/reserved',
    turn,
    step,
    data: { reservationId, scope: 'turn', kind: 'tool_calls', tokens: 0, costUsd: null, calls },
  });
}

/** The open reservation of the step's tool calls, if it has one. */
export function toolReservation(a: EffectContext): ReservationRecord | undefined {
  return a.projection.reservations?.[toolReservationId(scope(a).step)];
}

/**
 * Settles the step's tool-call reservation, staged before its `step/end`: the calls that
 * started are charged, the rest released.
 */
export function settleToolCalls(a: EffectContext): void {
  // most turns have no tool budget: no reservation, and no ID to derive
  if (!a.projection.reservations) return;
  const { step, turn } = scope(a);
  const reservationId = toolReservationId(step);
  if (!a.projection.reservations?.[reservationId]) return;
  const started = a.projection.pending.calls.filter((c) => c.started).length;
  a.stage({
    type: 'budget/settled',
    turn,
    step,
    data: { reservationId, tokens: 0, costUsd: null, calls: started, outcome: started > 0 ? 'charged' : 'released' },
  });
}

/**
 * Recovery: settles reservations nothing open will settle any more (their attempt is closed, or
 * their turn is over), as released. An open attempt's reservation is settled by the attempt's
 * own end (`interruptAttempt`), charged with what it may have used.
 */
export function settleOrphans(a: Pick<EffectContext, 'projection' | 'stage'>, opts: { turnEnd?: boolean } = {}): number {
  const p = a.projection;
  let settled = 0;
  for (const [reservationId, r] of Object.entries(p.reservations ?? {})) {
    const attemptOpen = r.kind === 'attempt' && p.openAttempt?.id === r.attemptId;
    const stepOpen = r.kind === 'tool_calls' && p.openStep?.id === r.step;
    if (attemptOpen || stepOpen) continue;
    if (r.kind === 'subagent') {
      // a child's carve outlives a crash of its parent; at the parent's turn end the child may
      // still be spending it, so the turn is charged all of it (a notice after settles nothing)
      if (!opts.turnEnd && p.openTurn?.id === r.turn) continue;
      a.stage({
        type: 'budget/settled',
        ...(p.openTurn?.id === r.turn ? { turn: r.turn } : {}),
        data: {
          reservationId, tokens: r.tokens, costUsd: r.costUsd, outcome: 'charged',
          ...(r.calls !== undefined ? { calls: r.calls } : {}), ...(r.steps !== undefined ? { steps: r.steps } : {}),
        },
      });
      settled += 1;
      continue;
    }
    a.stage({
      type: 'budget/settled',
      ...(p.openTurn?.id === r.turn ? { turn: r.turn } : {}),
      data: { reservationId, tokens: 0, costUsd: r.kind === 'attempt' ? 0 : null, ...(r.kind === 'tool_calls' ? { calls: 0 } : {}), outcome: 'released' },
    });
    settled += 1;
  }
  return settled;
}
