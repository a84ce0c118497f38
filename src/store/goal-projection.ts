import type { ActorEvent, GoalBudget, GoalPhase, GoalUsage } from '../protocol/events.js';
import { addCost } from '../protocol/history.js';

/** The agent's goal as its log has it (design §5): what it is for, where it stands, what it spent. */
export interface GoalRecord {
  id: string;
  objective: string;
  phase: GoalPhase;
  reason: string | null;
  /** 0 at `goal/created`, one more with every `goal/updated`. */
  revision: number;
  budget: GoalBudget;
  usage: GoalUsage;
  maxIdleTurns: number;
  /** Turns in a row that ended without progress. */
  idleTurns: number;
  /** The open turn made progress (files changed, a verification ran, new evidence, plan items completed). */
  progress: boolean;
  /** What the goal has read so far (`<tool> <arguments>`): reading it again is no new evidence. */
  seen: string[];
  /** When the goal's seconds started counting (ISO): a turn running while it is active; null otherwise. */
  activeSince: string | null;
  /** The model asked to complete the goal in the open turn (`update_goal`); the turn's end decides. */
  completionRequested: { turn: string; reason: string | null } | null;
  /** The `update_goal` call of the last update, so a rerun of it after a crash updates no second time. */
  callId?: string;
}

/** The phases a goal never leaves. */
export const FINAL_GOAL_PHASES: ReadonlySet<GoalPhase> = new Set<GoalPhase>(['complete', 'failed', 'cancelled']);

/** Tools whose successful result changes files: progress. */
const CHANGES_FILES = new Set(['write_file', 'apply_patch']);
/** Tools whose result is a verification (a command that ran, passed or not): progress. */
const VERIFIES = new Set(['shell']);
/** Tools whose successful result is evidence read: progress the first time the goal reads it. */
const READS = new Set(['read_file', 'search', 'list_dir', 'artifact_read']);

/** What the goal's open call did, from the call's name and the tool/result: a kind of progress or none. */
function progressOf(name: string, ok: boolean): 'files' | 'verification' | 'evidence' | null {
  if (VERIFIES.has(name)) return 'verification';
  if (!ok) return null;
  if (CHANGES_FILES.has(name)) return 'files';
  return READS.has(name) ? 'evidence' : null;
}

function secondsBetween(fromIso: string, toIso: string): number {
  return Math.max(0, Date.parse(toIso) - Date.parse(fromIso)) / 1000;
}

/** Stops the goal's clock at `at`, adding the time it ran. */
function stopClock(g: GoalRecord, at: string): void {
  if (g.activeSince === null) return;
  g.usage = { ...g.usage, seconds: round3(g.usage.seconds + secondsBetween(g.activeSince, at)) };
  g.activeSince = null;
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}

/** Where the goal fold reads the rest of the projection: the open turn and the open step's calls. */
export interface GoalFoldView {
  goal?: GoalRecord;
  openTurn: { id: string } | null;
  pending: { calls: Array<{ callId: string; name: string; arguments: string }> };
  plan?: { items: Array<{ status: string }> };
}

/**
 * Folds one event into the goal, in place, before the rest of the projection sees it (so the
 * plan it replaces and the calls of the step are still there). Usage counts every attempt's end
 * while the goal is not over (failed, aborted and interrupted attempts too); seconds count while
 * a turn runs and the goal is active.
 */
export function foldGoal(p: GoalFoldView, e: ActorEvent): void {
  if (e.type === 'goal/created') {
    p.goal = {
      id: e.data.goalId,
      objective: e.data.objective,
      phase: 'active',
      reason: null,
      revision: 0,
      budget: e.data.budget,
      usage: { tokens: 0, seconds: 0, costUsd: 0 },
      maxIdleTurns: e.data.maxIdleTurns,
      idleTurns: 0,
      progress: false,
      seen: [],
      // created by the turn that starts it: its time counts from here
      activeSince: p.openTurn ? e.at : null,
      completionRequested: null,
    };
    return;
  }
  const g = p.goal;
  if (!g) return;
  switch (e.type) {
    case 'attempt/end':
      if (FINAL_GOAL_PHASES.has(g.phase)) return;
      g.usage = {
        tokens: g.usage.tokens + e.data.usage.inputTokens + e.data.usage.outputTokens,
        seconds: g.usage.seconds,
        costUsd: addCost(g.usage.costUsd, e.data.costUsd ?? null),
      };
      return;
    case 'turn/start':
      g.progress = false;
      g.completionRequested = null;
      if (g.phase === 'active') g.activeSince = e.at;
      return;
    case 'turn/end':
      stopClock(g, e.at);
      if (g.phase === 'active') g.idleTurns = g.progress ? 0 : g.idleTurns + 1;
      g.completionRequested = null;
      return;
    case 'goal/updated':
      if (e.data.goalId !== g.id) return;
      g.revision = e.data.revision;
      if (e.call) g.callId = e.call;
      else delete g.callId;
      if (e.data.requested === 'complete') {
        g.completionRequested = { turn: e.turn ?? p.openTurn?.id ?? '', reason: e.data.reason };
        return;
      }
      if (g.phase === 'active' && e.data.phase !== 'active') stopClock(g, e.at);
      if (g.phase !== 'active' && e.data.phase === 'active') {
        if (p.openTurn) g.activeSince = e.at;
        // a person resumed it: it gets its idle turns afresh
        g.idleTurns = 0;
      }
      g.phase = e.data.phase;
      g.reason = e.data.reason;
      return;
    case 'tool/result': {
      const call = p.pending.calls.find((c) => c.callId === e.call);
      const kind = call ? progressOf(call.name, e.data.ok) : null;
      if (kind === 'evidence') {
        const key = `${call!.name} ${call!.arguments}`;
        if (g.seen.includes(key)) return;
        g.seen.push(key);
      }
      if (kind !== null) g.progress = true;
      return;
    }
    case 'plan/replaced': {
      const done = (items: ReadonlyArray<{ status: string }>): number => items.filter((i) => i.status === 'completed').length;
      if (done(e.data.items) > done(p.plan?.items ?? [])) g.progress = true;
      return;
    }
    default:
      return;
  }
}

/** The budget the goal has spent all of, if any: `tokens`, `cost` or `seconds`. */
export function exhaustedBudget(g: Pick<GoalRecord, 'budget' | 'usage'>): 'tokens' | 'cost' | 'seconds' | null {
  if (g.budget.tokens !== undefined && g.usage.tokens >= g.budget.tokens) return 'tokens';
  if (g.budget.costUsd !== undefined && g.usage.costUsd !== null && g.usage.costUsd >= g.budget.costUsd) return 'cost';
  if (g.budget.seconds !== undefined && g.usage.seconds >= g.budget.seconds) return 'seconds';
  return null;
}

/** The goal as a tool, a person or a client reads it: no fold bookkeeping. */
export function goalView(g: GoalRecord): {
  id: string; objective: string; phase: GoalPhase; reason: string | null; revision: number; budget: GoalBudget; usage: GoalUsage;
} {
  return { id: g.id, objective: g.objective, phase: g.phase, reason: g.reason, revision: g.revision, budget: g.budget, usage: g.usage };
}
