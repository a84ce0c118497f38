import type { TurnRequest, TurnSettings } from '../../protocol/events.js';
import type { ExecutionSemantics } from '../../tools/tool.js';
import { inPlanMode } from './plan-mode.js';
import { CHILD_TOOLS } from '../../tools/builtins/subagent-tools.js';
import { GOAL_TOOLS } from '../../tools/builtins/goal-tools.js';

/** Instructions a turn runs with when its request names none. */
export const DEFAULT_INSTRUCTIONS =
  'You are an agent working in a workspace through tools. Read before you change anything, ' +
  'make the smallest change that solves the task, and end with a short final answer.';

/** Defaults of a turn's budgets and retries. */
export const TURN_DEFAULTS = { maxSteps: 100, maxAttempts: 4 } as const;

/**
 * Resolves a client's turn request into the settings `turn/start` records. Without a request the
 * last turn's settings carry on, plan mode included (a resume keeps what its turn recorded).
 */
export function resolveSettings(req: TurnRequest | null, last: TurnSettings | null, nowMs: number, allTools: string[]): TurnSettings {
  if (!req) {
    if (!last) throw new Error('a turn needs a request with a model and a workspace');
    return { ...last, budgets: { ...last.budgets, deadlineAt: null } };
  }
  const s: TurnSettings = {
    ...(req.outputSchema ? { outputSchema: req.outputSchema } : {}),
    ...(req.effort ? { effort: req.effort } : {}),
    ...(req.maxOutputTokens ? { maxOutputTokens: req.maxOutputTokens } : {}),
    ...(req.config ? { config: req.config } : {}),
    ...(req.approvalMode ? { approvalMode: req.approvalMode } : {}),
    ...(req.agentName ? { agentName: req.agentName } : {}),
    ...(req.readOnly ? { readOnly: true } : {}),
    ...(req.treeLimits ? { treeLimits: req.treeLimits } : {}),
    ...(req.context && Object.keys(req.context).length > 0 ? { context: req.context } : {}),
    ...completionOf(req),
    model: req.model,
    baseUrl: req.baseUrl,
    workspace: req.workspace,
    tools: toolsOf(req, allTools),
    instructions: req.instructions ?? DEFAULT_INSTRUCTIONS,
    budgets: {
      maxSteps: req.maxSteps ?? TURN_DEFAULTS.maxSteps,
      maxToolCalls: req.maxToolCalls,
      deadlineAt: req.deadlineSeconds === null ? null : Math.round(nowMs + req.deadlineSeconds * 1000),
      // only when asked for: a turn without them records the budgets it always did
      ...(req.maxTokens != null ? { maxTokens: req.maxTokens } : {}),
      ...(req.maxCostUsd != null ? { maxCostUsd: req.maxCostUsd } : {}),
    },
    maxAttempts: req.maxAttempts ?? TURN_DEFAULTS.maxAttempts,
  };
  return req.planMode === true ? inPlanMode(s, allTools) : s;
}

/**
 * The tools a turn sees: the request's, or all. The goal tools only when the request starts a goal
 * (so other turns' requests stay as they were), and then even when `--tools` leaves them out: a
 * goal the model cannot read or complete would only end blocked.
 */
function toolsOf(req: TurnRequest, allTools: string[]): string[] {
  // `report` is a child's alone: a child's request names it, a person's default leaves it out
  const all = allTools.filter((t) => !CHILD_TOOLS.has(t));
  if (!req.goal) return req.tools ?? all.filter((t) => !GOAL_TOOLS.has(t));
  return req.tools ? [...new Set([...req.tools, ...all.filter((t) => GOAL_TOOLS.has(t))])] : all;
}

/** How a started call is recovered, from the tool's execution semantics (design §7). */
export function recoveryOf(s: ExecutionSemantics): 'rerun' | 'idempotent' | 'reconcile' | 'manual' {
  if (s.effects === 'none') return s.retry === 'auto' ? 'rerun' : 'manual';
  return s.recovery.kind;
}

/** The completion settings a request names (absent ones stay absent: `answer`, none, the default). */
function completionOf(req: TurnRequest): Pick<TurnSettings, 'completeWhen' | 'verifyCommands' | 'maxCompletionRejections' | 'onCompletionExhausted'> {
  return {
    ...(req.completeWhen ? { completeWhen: req.completeWhen } : {}),
    ...(req.verifyCommands && req.verifyCommands.length > 0 ? { verifyCommands: req.verifyCommands } : {}),
    ...(req.maxCompletionRejections ? { maxCompletionRejections: req.maxCompletionRejections } : {}),
    ...(req.onCompletionExhausted ? { onCompletionExhausted: req.onCompletionExhausted } : {}),
  };
}
