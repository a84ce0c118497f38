import type { Budgets, GoalBudget } from '../protocol/events.js';
import type { Check, Report } from './violations.js';

interface Open {
  seq: number;
  turn: string | undefined;
  /** The goal it counts against (scope `goal`); undefined for the turn's own. */
  goal: string | undefined;
  tokens: number;
  costUsd: number;
  calls: number;
  steps: number;
}

interface TurnLedger {
  budgets: Budgets;
  /** What settled reservations charged. */
  charged: { tokens: number; costUsd: number; calls: number; steps: number };
  /** Tool calls started (reruns excepted), reserved or not. */
  started: number;
  /** Steps the turn started itself. */
  steps: number;
}

interface GoalLedger {
  budget: GoalBudget;
  /** What its settled reservations charged, across its turns. */
  charged: { tokens: number; costUsd: number };
}

// Costs are whole micro-dollars; a sum compared with a limit allows for float rounding alone.
const EPSILON_USD = 1e-9;

/**
 * Budgets (design §6a): every reservation is settled exactly once (never twice, never a
 * settlement of nothing, none left open when its turn ends), and no turn's spend passes its
 * limits. Spend is what was charged plus what is reserved in flight: a reservation is made only
 * when its worst case fits, so the only overshoot of actual spend over a limit is a reservation's
 * own worst case, and charged plus reserved never passes the limit. A goal's reservations (scope
 * `goal`) obey the same rules against its token and cost budget, summed across its turns.
 */
export function createBudgetCheck(report: Report): Check {
  const open = new Map<string, Open>();
  const settled = new Map<string, number>();
  const turns = new Map<string, TurnLedger>();
  const goals = new Map<string, GoalLedger>();

  function checkGoal(goal: string | undefined, seq: number): void {
    const g = goal === undefined ? undefined : goals.get(goal);
    if (!g) return;
    const reserved = { tokens: 0, costUsd: 0 };
    for (const o of open.values()) {
      if (o.goal !== goal) continue;
      reserved.tokens += o.tokens;
      reserved.costUsd += o.costUsd;
    }
    const { tokens, costUsd } = g.budget;
    if (tokens !== undefined && g.charged.tokens + reserved.tokens > tokens) {
      report('budget.over_limit', seq, `goal ${goal} has ${g.charged.tokens} tokens charged and ${reserved.tokens} reserved, past its budget of ${tokens}`);
    }
    if (costUsd !== undefined && g.charged.costUsd + reserved.costUsd > costUsd + EPSILON_USD) {
      report('budget.over_limit', seq, `goal ${goal} has $${g.charged.costUsd} charged and $${reserved.costUsd} reserved, past its budget of $${costUsd}`);
    }
  }

  function check(turn: string | undefined, seq: number): void {
    const t = turn === undefined ? undefined : turns.get(turn);
    if (!t) return;
    const reserved = { tokens: 0, costUsd: 0, calls: 0, steps: 0 };
    for (const o of open.values()) {
      if (o.turn !== turn || o.goal !== undefined) continue;
      reserved.tokens += o.tokens;
      reserved.costUsd += o.costUsd;
      reserved.calls += o.calls;
      reserved.steps += o.steps;
    }
    const { maxTokens, maxCostUsd, maxToolCalls, maxSteps } = t.budgets;
    // a child's carve of the turn's steps counts with the turn's own (design §6b)
    if (maxSteps !== null && reserved.steps + t.charged.steps > 0 && t.steps + t.charged.steps + reserved.steps > maxSteps) {
      report('budget.over_limit', seq, `turn ${turn} has ${t.steps} steps of its own, ${t.charged.steps} charged to its subagents and ${reserved.steps} reserved for them, past its limit of ${maxSteps}`);
    }
    const tokens = t.charged.tokens + reserved.tokens;
    const cost = t.charged.costUsd + reserved.costUsd;
    const calls = t.charged.calls + reserved.calls;
    if (maxTokens != null && tokens > maxTokens) {
      report('budget.over_limit', seq, `turn ${turn} has ${t.charged.tokens} tokens charged and ${reserved.tokens} reserved, past its limit of ${maxTokens}`);
    }
    if (maxCostUsd != null && cost > maxCostUsd + EPSILON_USD) {
      report('budget.over_limit', seq, `turn ${turn} has $${t.charged.costUsd} charged and $${reserved.costUsd} reserved, past its limit of $${maxCostUsd}`);
    }
    if (maxToolCalls != null && calls > maxToolCalls) {
      report('budget.over_limit', seq, `turn ${turn} has ${t.charged.calls} tool calls charged and ${reserved.calls} reserved, past its limit of ${maxToolCalls}`);
    }
  }

  return {
    event(e) {
      switch (e.type) {
        case 'goal/created':
          goals.set(e.data.goalId, { budget: e.data.budget, charged: { tokens: 0, costUsd: 0 } });
          return;
        case 'turn/start':
          if (e.turn) turns.set(e.turn, { budgets: e.data.settings.budgets, charged: { tokens: 0, costUsd: 0, calls: 0, steps: 0 }, started: 0, steps: 0 });
          return;
        case 'step/start': {
          const t = e.turn === undefined ? undefined : turns.get(e.turn);
          if (!t) return;
          t.steps += 1;
          check(e.turn, e.seq);
          return;
        }
        case 'tool/start': {
          const t = e.turn === undefined ? undefined : turns.get(e.turn);
          if (!t || e.data.rerun) return;
          t.started += 1;
          if (t.budgets.maxToolCalls !== null && t.started > t.budgets.maxToolCalls) {
            report('budget.over_limit', e.seq, `turn ${e.turn} starts its tool call number ${t.started}, past its limit of ${t.budgets.maxToolCalls}`);
          }
          return;
        }
        case 'budget/reserved': {
          const id = e.data.reservationId;
          if (open.has(id) || settled.has(id)) {
            report('budget.reserved_twice', e.seq, `reservation ${id} was already made`);
            return;
          }
          const goal = e.data.scope === 'goal' ? (e.data.goalId ?? '') : undefined;
          if (goal !== undefined && !goals.has(goal)) report('budget.unknown_goal', e.seq, `reservation ${id} counts against goal ${goal || '(none named)'}, which was never created before it`);
          open.set(id, { seq: e.seq, turn: e.turn, goal, tokens: e.data.tokens, costUsd: e.data.costUsd ?? 0, calls: e.data.calls ?? 0, steps: e.data.steps ?? 0 });
          if (goal !== undefined) checkGoal(goal, e.seq);
          else check(e.turn, e.seq);
          return;
        }
        case 'budget/settled': {
          const id = e.data.reservationId;
          const r = open.get(id);
          if (!r) {
            const first = settled.get(id);
            if (first !== undefined) report('budget.settled_twice', e.seq, `reservation ${id} was already settled at seq ${first}: its spend would count twice`);
            else report('budget.settle_unknown', e.seq, `budget/settled for reservation ${id}, which was never reserved before it`);
            return;
          }
          open.delete(id);
          settled.set(id, e.seq);
          if (r.goal !== undefined) {
            const g = goals.get(r.goal);
            if (g && e.data.outcome === 'charged') {
              g.charged.tokens += e.data.tokens;
              g.charged.costUsd += e.data.costUsd ?? 0;
            }
            checkGoal(r.goal, e.seq);
            return;
          }
          const t = r.turn === undefined ? undefined : turns.get(r.turn);
          if (t && e.data.outcome === 'charged') {
            t.charged.tokens += e.data.tokens;
            t.charged.costUsd += e.data.costUsd ?? 0;
            t.charged.calls += e.data.calls ?? 0;
            t.charged.steps += e.data.steps ?? 0;
          }
          check(r.turn, e.seq);
          return;
        }
        case 'turn/end':
          for (const [id, r] of open) {
            if (r.turn !== e.turn) continue;
            report('budget.unsettled', r.seq, `reservation ${id} is still open when turn ${e.turn} ends at seq ${e.seq}: it is never settled`);
            open.delete(id);
          }
          if (e.turn) turns.delete(e.turn);
          return;
        default:
          return;
      }
    },
    end(complete) {
      if (!complete) return;
      for (const [id, r] of open) report('budget.unsettled', r.seq, `reservation ${id} is never settled (the log is complete)`);
    },
  };
}
