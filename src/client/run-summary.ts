import { COMPLETION_EXHAUSTED_STOP } from '../protocol/completion.js';
import type { Budgets, TurnOutcome } from '../protocol/turn-settings.js';

// What an operator reads first of a run and of a turn that ended badly: the line that names the
// run in a list, and the words that explain a `failed: context_overflow` or `stopped:
// step_budget`. Pure, so the gateway's reads and any client that folds a log say the same.

/** The most characters of a task a runs list shows. */
export const TASK_LINE_MAX = 200;

/** The first non-blank line of a task, trimmed and cut to `max` characters (an ellipsis last when cut). */
export function taskLine(text: string, max = TASK_LINE_MAX): string {
  const line = text.split('\n').find((l) => l.trim() !== '')?.trim() ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** Why a turn ended without its answer: a stable code where one is known, and the words for a person. */
export interface TurnError {
  code?: string;
  message: string;
}

/** What `turnError` reads of the turn. */
export interface EndedTurn {
  outcome: TurnOutcome;
  /** `turn/end`'s reason. */
  reason: string | null;
  /** The error the turn's last model attempt ended with, if it ended with one. */
  attemptError: { class: string; message: string } | null;
  /** The turn's budgets and output limit, as its `turn/start` recorded them (null: unknown). */
  limits: { budgets: Budgets; maxOutputTokens: number | null } | null;
}

/**
 * Why a turn that `failed` or was `stopped` ended so (null for any other outcome, or when nothing
 * says): the model's error when its last attempt failed, else the stop's code with what it means
 * and the budget it ran into, else the reason as the turn recorded it.
 */
export function turnError(t: EndedTurn): TurnError | null {
  if (t.outcome !== 'failed' && t.outcome !== 'stopped') return null;
  if (t.attemptError) return { code: t.attemptError.class, message: t.attemptError.message };
  if (t.reason === null || t.reason === '') return null;
  const known = explainStop(t.reason, t.limits);
  if (known) return { code: t.reason, message: known };
  // `context_overflow: …`, `model server error: …`: a code first, the words after it
  const model = /^model (\w+) error: ([\s\S]+)$/.exec(t.reason);
  if (model) return { code: model[1]!, message: model[2]! };
  const coded = /^([a-z][a-z0-9_]*): ([\s\S]+)$/.exec(t.reason);
  if (coded) return { code: coded[1]!, message: coded[2]! };
  return /^[a-z][a-z0-9_]*$/.test(t.reason) ? { code: t.reason, message: t.reason.replace(/_/g, ' ') } : { message: t.reason };
}

/** The words for a stop reason the runtime names by a bare code; null: not one of them. */
function explainStop(reason: string, limits: EndedTurn['limits']): string | null {
  const b = limits?.budgets;
  switch (reason) {
    case 'step_budget':
      return `the turn reached its step limit${b?.maxSteps != null ? ` (maxSteps ${b.maxSteps})` : ''} without a final answer: give it more steps or a narrower task`;
    case 'tool_budget':
      return `the turn reached its tool call limit${b?.maxToolCalls != null ? ` (maxToolCalls ${b.maxToolCalls})` : ''} without a final answer: give it more tool calls or a narrower task`;
    case 'deadline':
      return `the turn ran out of time${b?.deadlineAt != null ? ` (its deadline was ${new Date(b.deadlineAt).toISOString()})` : ''}`;
    case 'token_budget':
      return `the turn used the tokens it may${b?.maxTokens != null ? ` (maxTokens ${b.maxTokens})` : ''}`;
    case 'cost_budget':
      return `the turn spent the USD it may${b?.maxCostUsd != null ? ` (maxCostUsd ${b.maxCostUsd})` : ''}`;
    case 'goal_token_budget':
      return "the goal used the tokens it may: raise the goal's token budget to go on";
    case 'goal_cost_budget':
      return "the goal spent the USD it may: raise the goal's cost budget to go on";
    case 'max_output_tokens':
      return `the model's answer was cut at the output limit${limits?.maxOutputTokens != null ? ` (maxOutputTokens ${limits.maxOutputTokens})` : ''}`;
    case 'content_filter':
      return "the provider's content filter stopped the answer";
    case 'refusal':
      return 'the model refused to answer';
    case 'empty_answer':
      return 'the model gave an empty answer';
    case 'model_error':
      return 'the model call failed';
    case COMPLETION_EXHAUSTED_STOP:
      return 'the completion policy refused every answer the turn gave';
    default:
      return null;
  }
}
