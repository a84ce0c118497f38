import type { TurnRequest, TurnSettings } from '../../protocol/events.js';
import type { PolicyDecision } from '../../tools/policy.js';
import { formatPlan, type Plan } from '../../tools/builtins/update-plan.js';

// Plan mode (`actorloop run --plan-mode`): the turn runs read-only, the agent explores and writes
// its plan with update_plan, and a person accepts it (`actorloop plan <agent> --accept`), which
// starts the next turn in normal mode with the plan as its message.

/** The tool a plan-mode turn writes its plan with: always offered to it. */
export const PLAN_TOOL = 'update_plan';

/** What a plan-mode turn's instructions end with: the model is told where it is and what to do. */
export const PLAN_MODE_INSTRUCTIONS =
  '\n\nYou are in plan mode: this turn is read-only. Every tool call that could change the workspace ' +
  'or run a command is denied. Explore with tools that change nothing (read_file, list_dir, search), ' +
  `then write your plan with ${PLAN_TOOL}: concrete steps, in order, all pending. End the turn with a ` +
  'short summary of the plan. A person reviews it and, once they accept it, you carry it out in a new turn.';

/**
 * The settings of a plan-mode turn, from those the request resolved to: marked, told in their
 * instructions, and offered the plan tool even when the request's tool list left it out.
 */
export function inPlanMode(s: TurnSettings, allTools: readonly string[]): TurnSettings {
  const tools = s.tools.includes(PLAN_TOOL) || !allTools.includes(PLAN_TOOL) ? s.tools : [...s.tools, PLAN_TOOL];
  return { ...s, planMode: true, tools, instructions: s.instructions + PLAN_MODE_INSTRUCTIONS };
}

/**
 * The policy's answer in plan mode to a call whose effects are possible: denied, whatever a rule,
 * the run mode or an earlier "always" says. Null for a call that changes nothing, or outside plan mode.
 */
export function planModeDenial(s: TurnSettings, effects: 'none' | 'possible'): PolicyDecision | null {
  if (effects === 'none') return null;
  if (s.readOnly === true && s.planMode !== true) {
    return {
      decision: 'deny',
      rule: 'mode:readonly',
      reason: 'this agent works read-only (its parent spawned it with workspace "readonly"): no call that may change the world runs; read, search and report what you find',
      network: false,
      envAllow: [],
    };
  }
  if (s.planMode !== true) return null;
  return {
    decision: 'deny',
    rule: 'mode:plan',
    reason: `plan mode: the turn is read-only and this call may change the world; explore with tools that change nothing and write your plan with ${PLAN_TOOL}`,
    network: false,
    envAllow: [],
  };
}

/**
 * The request of the turn that carries an accepted plan out: the settings of the plan-mode turn
 * (model, workspace, tools, run mode, budgets, recorded config) in normal mode. A deadline is an
 * absolute time in the settings, so it is not carried over: the new turn runs without one.
 */
export function requestAfterPlan(last: TurnSettings): TurnRequest {
  return { ...requestFromSettings(last), planMode: false };
}

/**
 * A request that starts a turn with the settings `last` recorded, plan mode kept (a continued
 * conversation keeps its mode): its instructions without the text plan mode appended (a plan-mode
 * turn appends it again), no deadline (an absolute time of the earlier turn).
 */
export function requestFromSettings(last: TurnSettings): TurnRequest {
  const instructions = last.instructions.endsWith(PLAN_MODE_INSTRUCTIONS)
    ? last.instructions.slice(0, -PLAN_MODE_INSTRUCTIONS.length)
    : last.instructions;
  return {
    ...(last.outputSchema ? { outputSchema: last.outputSchema } : {}),
    ...(last.effort ? { effort: last.effort } : {}),
    ...(last.maxOutputTokens ? { maxOutputTokens: last.maxOutputTokens } : {}),
    ...(last.config ? { config: last.config } : {}),
    ...(last.approvalMode ? { approvalMode: last.approvalMode } : {}),
    ...(last.completeWhen ? { completeWhen: last.completeWhen } : {}),
    ...(last.verifyCommands ? { verifyCommands: last.verifyCommands } : {}),
    ...(last.maxCompletionRejections ? { maxCompletionRejections: last.maxCompletionRejections } : {}),
    ...(last.onCompletionExhausted ? { onCompletionExhausted: last.onCompletionExhausted } : {}),
    ...(last.agentName ? { agentName: last.agentName } : {}),
    ...(last.readOnly ? { readOnly: true } : {}),
    planMode: last.planMode === true,
    model: last.model,
    baseUrl: last.baseUrl,
    workspace: last.workspace,
    tools: last.tools,
    instructions,
    maxSteps: last.budgets.maxSteps,
    maxToolCalls: last.budgets.maxToolCalls,
    // per-turn budgets carry on as limits of the next turn (its own spend starts at zero)
    ...(last.budgets.maxTokens != null ? { maxTokens: last.budgets.maxTokens } : {}),
    ...(last.budgets.maxCostUsd != null ? { maxCostUsd: last.budgets.maxCostUsd } : {}),
    deadlineSeconds: null,
    maxAttempts: last.maxAttempts,
  };
}

/**
 * The message that starts the turn carrying an accepted plan out: the plan pinned as the turn's
 * user message, so it is in the log and in every request of the turn.
 */
export function acceptedPlanText(plan: Plan): string {
  return [
    `The plan you wrote (version ${plan.version}) was accepted. You are no longer in plan mode: carry it out now, step by step,`,
    `and keep it current with ${PLAN_TOOL} as you go (expected_version ${plan.version}).`,
    '',
    formatPlan(plan),
  ].join('\n');
}
