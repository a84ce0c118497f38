import { formatPlan, type Plan, type UpdatePlanInput } from '../../tools/builtins/update-plan.js';
import type { EffectContext } from '../agent/effect-context.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';

/** Why a write with a stale `expected_version` was refused, and the plan it would have replaced. */
function staleMessage(expected: number, plan: Plan | undefined): string {
  const now = plan ? `the plan is at version ${plan.version}` : 'there is no plan yet (version 0)';
  return `update_plan refused: expected_version ${expected}, but ${now}; nothing was changed. `
    + 'Read the current plan below, then call update_plan again with it in mind'
    + (plan ? ` (expected_version ${plan.version}).` : ' (expected_version 0).');
}

function stageResult(a: EffectContext, r: RuntimeToolRun, ok: boolean, output: string, error: { code: string; message: string } | null): void {
  a.stage({
    type: 'tool/result',
    ...r.ids,
    data: {
      ok,
      output,
      error: error ? { ...error, retryable: false } : null,
      durationMs: 0,
      artifact: null,
      source: 'tool:update_plan',
      // the model's own plan, carried out by the runtime: nothing from outside the agent
      trust: 'trusted',
    },
  });
}

function shown(plan: Plan): string {
  return `Plan version ${plan.version}:\n${formatPlan(plan)}`;
}

/**
 * `update_plan` as the runtime carries it out: `plan/replaced` with the whole plan at the next
 * version, then the call's result showing it. Both are staged in one tick, so they are one commit:
 * a crash leaves either both or neither in the log. A rerun of a call whose plan is in the log
 * (the projection names the call that wrote it) only stages the result again.
 */
export const updatePlanRuntime: RuntimeTool = {
  name: 'update_plan',
  async run(a, r) {
    const input = r.input as UpdatePlanInput;
    const current = a.projection.plan;
    if (current && current.callId === r.ids.call) {
      stageResult(a, r, true, `${shown(current)}\n(recorded before the restart)`, null);
      return;
    }
    const version = current?.version ?? 0;
    if (input.expected_version !== undefined && input.expected_version !== version) {
      const message = staleMessage(input.expected_version, current);
      stageResult(a, r, false, current ? `${message}\n\n${shown(current)}` : message, { code: 'plan.stale_version', message });
      return;
    }
    const plan: Plan = { version: version + 1, items: input.items, explanation: input.explanation ?? null };
    a.stage({ type: 'plan/replaced', ...r.ids, data: plan });
    stageResult(a, r, true, shown(plan), null);
  },
};
