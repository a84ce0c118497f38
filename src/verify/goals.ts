import { addCost } from '../protocol/history.js';
import type { GoalPhase } from '../protocol/events.js';
import type { Check, Report } from './violations.js';

const FINAL: ReadonlySet<GoalPhase> = new Set<GoalPhase>(['complete', 'failed', 'cancelled']);

/**
 * A goal changes one revision at a time: each `goal/updated` names the goal the log created, is
 * at one more than the revision before it and says so (`expected`), and comes before the goal
 * ended. The usage it records is what the goal's attempts spent up to it: the tokens and cost of
 * every `attempt/end` since the goal was created (failed, aborted and interrupted ones too).
 */
export function createGoalCheck(report: Report): Check {
  let goal: { id: string; revision: number; phase: GoalPhase; tokens: number; costUsd: number | null } | null = null;
  return {
    event(e) {
      if (e.type === 'goal/created') {
        goal = { id: e.data.goalId, revision: 0, phase: 'active', tokens: 0, costUsd: 0 };
      } else if (e.type === 'attempt/end') {
        if (goal && !FINAL.has(goal.phase)) {
          goal.tokens += e.data.usage.inputTokens + e.data.usage.outputTokens;
          goal.costUsd = addCost(goal.costUsd, e.data.costUsd ?? null);
        }
      } else if (e.type === 'goal/updated') {
        const d = e.data;
        if (!goal || goal.id !== d.goalId) {
          report('goal.unknown', e.seq, `goal/updated of ${d.goalId}, which the log did not create before it`);
          return;
        }
        if (FINAL.has(goal.phase)) report('goal.updated_after_end', e.seq, `goal ${d.goalId} is updated after it ended ${goal.phase}`);
        if (d.revision !== goal.revision + 1 || d.expected !== goal.revision) {
          report('goal.revision', e.seq, `goal ${d.goalId} goes from revision ${goal.revision} to ${d.revision} (expected ${d.expected}): each update is one revision past the last`);
        }
        if (d.usage.tokens !== goal.tokens || d.usage.costUsd !== goal.costUsd) {
          report('goal.usage', e.seq,
            `goal ${d.goalId} records ${d.usage.tokens} tokens and ${d.usage.costUsd ?? 'unknown'} USD, but its attempts spent ${goal.tokens} tokens and ${goal.costUsd ?? 'unknown'} USD`);
        }
        goal.revision = Math.max(goal.revision, d.revision);
        if (d.requested === undefined) goal.phase = d.phase;
      }
    },
    end() {},
  };
}

/**
 * A continuation is owed once and started once: a `goal_continuation` turn starts only as the
 * next turn after a `turn/end` that said its goal goes on, and (in a finished log) such a
 * `turn/end` is followed by a next turn — a person's message may take it first, never nothing.
 */
export function createContinuationCheck(report: Report): Check {
  let owed: number | null = null;
  return {
    event(e) {
      if (e.type === 'turn/start') {
        if (e.data.source === 'goal_continuation' && owed === null) {
          report('goal.continuation_unowed', e.seq, 'a goal_continuation turn starts, but the turn before it did not end saying its goal goes on');
        }
        owed = null;
      } else if (e.type === 'turn/end' && e.data.goalContinues === true) {
        owed = e.seq;
      }
    },
    end(complete) {
      if (complete && owed !== null) report('goal.continuation_lost', owed, 'the turn ended saying its goal goes on, and no turn followed it');
    },
  };
}
