import type { EventData, GoalPhase, GoalUsage, TurnOutcome, TurnRequest } from '../../protocol/events.js';
import { derivedId, newId } from '../../protocol/ids.js';
import { exhaustedBudget, FINAL_GOAL_PHASES, goalView, type GoalRecord } from '../../store/goal-projection.js';
import { pendingApprovals, pendingQuestions, type Projection } from '../../store/projection.js';
import type { UpdateGoalInput } from '../../tools/builtins/goal-tools.js';
import { GOAL_BUDGET_STOPS } from './budget.js';
import type { EffectContext } from '../agent/effect-context.js';
import { stageRuntimeResult, type RuntimeTool } from '../agent/runtime-tool.js';

/** Default of `max_idle_turns`: turns in a row without progress before a goal is `blocked`. */
export const DEFAULT_MAX_IDLE_TURNS = 2;

/** What a person's `actorloop goal <agent> pause|resume|cancel` asks, as its inbox message carries it. */
export interface GoalControl {
  action: 'pause' | 'resume' | 'cancel';
  /** The revision the person saw: the change is refused when the goal moved on since. */
  expectedRevision: number;
}

/** The phases each of a person's actions may change, and the phase it gives. */
const CONTROLS: Record<GoalControl['action'], { from: ReadonlySet<GoalPhase>; to: GoalPhase }> = {
  pause: { from: new Set(['active', 'blocked']), to: 'paused' },
  resume: { from: new Set(['paused', 'blocked']), to: 'active' },
  cancel: { from: new Set(['active', 'paused', 'blocked']), to: 'cancelled' },
};

/** The goal's usage now: its seconds include the turn running while it is active. */
export function usageAt(g: GoalRecord, nowMs: number): GoalUsage {
  if (g.activeSince === null) return g.usage;
  const running = Math.max(0, nowMs - Date.parse(g.activeSince)) / 1000;
  return { ...g.usage, seconds: Math.round((g.usage.seconds + running) * 1000) / 1000 };
}

/** Stages the goal's next revision: the only way a goal changes, so every update names the revision it replaced. */
function stageUpdate(
  a: EffectContext,
  g: GoalRecord,
  change: { phase: GoalPhase; reason: string | null; by: 'model' | 'person' | 'runtime'; messageId?: string; requested?: 'complete' },
  scope: { turn?: string; step?: string; call?: string },
): void {
  const data: EventData<'goal/updated'> = {
    goalId: g.id,
    revision: g.revision + 1,
    expected: g.revision,
    phase: change.phase,
    reason: change.reason,
    by: change.by,
    ...(change.messageId ? { messageId: change.messageId } : {}),
    ...(change.requested ? { requested: change.requested } : {}),
    usage: usageAt(g, a.ports.clock.nowMs()),
  };
  a.stage({ type: 'goal/updated', ...scope, data });
}

/** Stages `goal/created` for a turn whose request asks for a goal (`run --goal`), in the turn's own commit. */
export function createGoal(a: EffectContext, turn: string, request: TurnRequest | null): void {
  if (!request?.goal) return;
  const { objective, budget, maxIdleTurns } = request.goal;
  a.stage({ type: 'goal/created', turn, data: { goalId: newId('goal'), objective, budget, maxIdleTurns } });
}

/** The message a `goal_continuation` turn opens with: what the goal is, and that the work goes on. */
export function continuationText(g: GoalRecord): string {
  return `Continue working toward your goal (${g.id}, revision ${g.revision}): ${g.objective}\n`
    + 'The previous turn ended and the goal is still active. Carry on where you left off; when the goal is met, '
    + 'call update_goal with phase complete and then give your final answer.';
}

/** The `user/message` of a continuation turn: its ID derived from the turn, since no inbox message carries it. */
export function continuationMessage(turn: string, g: GoalRecord): { messageId: string; content: string } {
  return { messageId: derivedId('message', turn, 'goal_continuation'), content: continuationText(g) };
}

/**
 * Whether the model's request to complete its goal is granted: when the turn completed. A turn
 * completes only on a final answer its completion policy accepted (`answer`, `code-change`,
 * `cited`: a refused answer takes another step, and the refusal limit fails the turn), so the
 * policy is what decides a goal's completion too.
 */
export function decideGoalCompletion(turn: { outcome: TurnOutcome }): { complete: boolean; reason: string | null } {
  return turn.outcome === 'completed' ? { complete: true, reason: null } : { complete: false, reason: `the turn ended ${turn.outcome}` };
}

/** What a turn's end does to its goal: the updates to stage before `turn/end`, and whether a continuation turn follows. */
export interface GoalAtTurnEnd {
  updates: Array<{ phase: GoalPhase; reason: string | null }>;
  continues: boolean;
}

/**
 * The goal's side of a turn's end (design §6a): a granted completion completes it; a spent
 * budget or `max_idle_turns` turns without progress block it; a turn that completed with the
 * goal still active, budget left and nothing waiting on a person continues it in a new turn.
 * A turn without progress continues too while it is under the idle limit: the limit is what
 * stops a goal that goes nowhere. `blocked`: the turn's machine decided to block the goal (the
 * completion policy's limit under `on_completion_exhausted = "block"`), with that reason.
 */
export function goalAtTurnEnd(p: Projection, outcome: TurnOutcome, nowMs: number, reason: string | null = null, blocked: string | null = null): GoalAtTurnEnd {
  const g = p.goal;
  const none: GoalAtTurnEnd = { updates: [], continues: false };
  if (!g || FINAL_GOAL_PHASES.has(g.phase)) return none;
  if (g.completionRequested && g.completionRequested.turn === p.openTurn?.id) {
    const decision = decideGoalCompletion({ outcome });
    if (decision.complete) return { updates: [{ phase: 'complete', reason: g.completionRequested.reason }], continues: false };
  }
  if (g.phase !== 'active') return none;
  if (blocked !== null) return { updates: [{ phase: 'blocked', reason: blocked }], continues: false };
  // the next attempt's worst case did not fit what the goal had left: it is blocked before the budget is spent
  const unfit = outcome === 'stopped' && reason !== null ? GOAL_BUDGET_STOPS[reason] : undefined;
  if (unfit !== undefined) return { updates: [{ phase: 'blocked', reason: `budget:${unfit}` }], continues: false };
  const spent = exhaustedBudget({ budget: g.budget, usage: usageAt(g, nowMs) });
  if (spent !== null) return { updates: [{ phase: 'blocked', reason: `budget:${spent}` }], continues: false };
  // a turn that failed, stopped or was cancelled is a person's to look at, not to run on from
  if (outcome !== 'completed') return none;
  // children (subagents) are not hosted yet: approvals and questions are what can be pending
  if (pendingApprovals(p).length > 0 || pendingQuestions(p).length > 0) return none;
  const idle = g.progress ? 0 : g.idleTurns + 1;
  if (idle >= g.maxIdleTurns) return { updates: [{ phase: 'blocked', reason: 'no_progress' }], continues: false };
  return { updates: [], continues: true };
}

/** Stages what `goalAtTurnEnd` decided (before the `turn/end` it goes with); true when the goal continues. */
export function settleGoalAtTurnEnd(a: EffectContext, outcome: TurnOutcome, reason: string | null = null, blocked: string | null = null): boolean {
  const decided = goalAtTurnEnd(a.projection, outcome, a.ports.clock.nowMs(), reason, blocked);
  const turn = a.projection.openTurn!.id;
  for (const u of decided.updates) stageUpdate(a, a.projection.goal!, { ...u, by: 'runtime' }, { turn });
  // a goal's continuation waits for the jobs its agent started: their notices start the next turn
  return decided.continues && !Object.values(a.projection.jobs ?? {}).some((j) => !j.notified);
}

/** Parses a `goal_control` message's content; null when it is not one. */
export function parseGoalControl(content: string): GoalControl | null {
  try {
    const v = JSON.parse(content) as Partial<GoalControl>;
    if ((v.action === 'pause' || v.action === 'resume' || v.action === 'cancel') && Number.isInteger(v.expectedRevision)) {
      return { action: v.action, expectedRevision: v.expectedRevision! };
    }
  } catch {
    // refused below, saying what the message should have been
  }
  return null;
}

/**
 * A person's change of the goal (`goal_control`, person channel only: the inbox door refuses it
 * from anyone else): `goal/updated` by the person, which consumes the message; refused
 * (`inbox/cancelled`, saying why) when the agent has no goal, the revision is stale, or the goal's
 * phase does not allow it.
 */
export function controlGoal(a: EffectContext, messageId: string, content: string): void {
  const refuse = (reason: string) => void a.stage({ type: 'inbox/cancelled', data: { messageId, reason } });
  // a redelivered message the log has taken already
  if (a.projection.inbox[messageId]?.state !== 'pending') return;
  const ask = parseGoalControl(content);
  if (!ask) return refuse('not a goal change: expected {"action": "pause" | "resume" | "cancel", "expectedRevision": n}');
  const g = a.projection.goal;
  if (!g) return refuse('the agent has no goal');
  if (g.revision !== ask.expectedRevision) return refuse(`stale revision: expected ${ask.expectedRevision}, the goal is at revision ${g.revision}`);
  const rule = CONTROLS[ask.action];
  if (!rule.from.has(g.phase)) return refuse(`a ${g.phase} goal cannot be ${ask.action === 'pause' ? 'paused' : ask.action === 'resume' ? 'resumed' : 'cancelled'}`);
  const turn = a.projection.openTurn?.id;
  stageUpdate(a, g, { phase: rule.to, reason: `${ask.action} by a person`, by: 'person', messageId }, turn ? { turn } : {});
}

const stageResult = stageRuntimeResult;

/** The goal as the model reads it. */
function shown(g: GoalRecord, nowMs: number): string {
  return JSON.stringify({ ...goalView(g), usage: usageAt(g, nowMs) });
}

/** `get_goal` as the runtime carries it out: the goal from the log, or a tool error when there is none. */
export const getGoalRuntime: RuntimeTool = {
  name: 'get_goal',
  async run(a, r) {
    const g = a.projection.goal;
    if (!g) return stageResult(a, r, 'get_goal', 'You have no goal.', { code: 'goal.none', message: 'the agent has no goal' });
    stageResult(a, r, 'get_goal', shown(g, a.ports.clock.nowMs()), null);
  },
};

/**
 * `update_goal` as the runtime carries it out: `goal/updated` at the next revision and the call's
 * result, staged in one tick (one commit). `complete` is a request the turn's end decides
 * (`decideGoalCompletion`). A stale revision, or a goal that is not active, is a tool error the
 * model sees, and nothing changes. A rerun of a call whose update is in the log only stages the
 * result again.
 */
export const updateGoalRuntime: RuntimeTool = {
  name: 'update_goal',
  async run(a, r) {
    const input = r.input as UpdateGoalInput;
    const g = a.projection.goal;
    const now = a.ports.clock.nowMs();
    const fail = (code: string, message: string) => stageResult(a, r, 'update_goal', `update_goal refused: ${message}; nothing was changed.`, { code, message });
    if (!g) return fail('goal.none', 'you have no goal');
    if (g.callId === r.ids.call) return stageResult(a, r, 'update_goal', `${shown(g, now)}\n(recorded before the restart)`, null);
    if (input.expected_revision !== g.revision) {
      return fail('goal.stale_revision', `expected_revision ${input.expected_revision}, but the goal is at revision ${g.revision}. Read it with get_goal, then call update_goal again with expected_revision ${g.revision}`);
    }
    if (g.phase !== 'active') return fail('goal.not_active', `the goal is ${g.phase}${g.reason ? ` (${g.reason})` : ''}: only an active goal changes phase by update_goal`);
    const complete = input.phase === 'complete';
    stageUpdate(
      a,
      g,
      complete
        ? { phase: g.phase, reason: input.reason, by: 'model', requested: 'complete' }
        : { phase: input.phase, reason: input.reason, by: 'model' },
      r.ids,
    );
    const after = a.projection.goal!;
    const note = complete ? '\nCompletion requested: the goal completes when your final answer is accepted. Give it now.' : '';
    stageResult(a, r, 'update_goal', `${shown(after, now)}${note}`, null);
  },
};
