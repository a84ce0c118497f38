import { z } from 'zod';
import type { EventData } from '../../protocol/events.js';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';

/** Steps one plan may hold, and characters one step (or the explanation) may have: a plan is a summary, and its commit stays small. */
export const MAX_PLAN_ITEMS = 50;
export const MAX_PLAN_TEXT = 500;

const PlanItem = z.strictObject({
  content: z.string().trim().min(1).max(MAX_PLAN_TEXT).describe('What the step does, in a short sentence'),
  status: z.enum(['pending', 'in_progress', 'completed']).describe('pending, in_progress (at most one step), or completed'),
});

// As Codex's update_plan: the whole plan each time, at most one step in progress. An empty list is
// refused too: it would leave a plan that says nothing, and a version a person cannot act on.
const UpdatePlanInput = z.strictObject({
  items: z
    .array(PlanItem)
    .min(1)
    .max(MAX_PLAN_ITEMS)
    .refine((items) => items.filter((i) => i.status === 'in_progress').length <= 1, 'at most one step may be in_progress')
    .describe('The whole plan, in order: it replaces the plan you wrote before'),
  explanation: z.string().trim().max(MAX_PLAN_TEXT).optional().describe('Why the plan is what it is, or what changed since the last one'),
  expected_version: z
    .number().int().nonnegative().optional()
    .describe('The version this update replaces (0: no plan yet); when the plan is at another version the update is refused'),
});
/** Input of `update_plan`. */
export type UpdatePlanInput = z.infer<typeof UpdatePlanInput>;

/** A plan with its version, as `plan/replaced` records it. */
export type Plan = EventData<'plan/replaced'>;

const MARKERS: Record<Plan['items'][number]['status'], string> = { completed: '[x]', in_progress: '[>]', pending: '[ ]' };

/** A plan as the model and a person read it: one line a step with its status marker, then the explanation. */
export function formatPlan(plan: Plan): string {
  const lines = plan.items.map((i) => `${MARKERS[i.status]} ${i.content}`);
  if (plan.explanation) lines.push(`Explanation: ${plan.explanation}`);
  return lines.join('\n');
}

/**
 * `update_plan {items, explanation?, expected_version?}`: replaces the agent's plan. It changes
 * only the agent's own log, so it is a read-level tool with no effects, and it is run by the
 * runtime (src/actors/runtime-tools/update-plan.ts), which commits `plan/replaced` with the next version.
 */
export const updatePlanTool: ToolDefinition<UpdatePlanInput> = {
  name: 'update_plan',
  version: '1',
  description:
    'Write your plan: the whole list of steps, each pending, in_progress (at most one) or completed. ' +
    'Each call replaces the plan and returns it with its new version; pass expected_version to have ' +
    'the update refused if the plan changed since you read it. Keep it current as you work.',
  input: UpdatePlanInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  // one plan per agent: two updates in one step run in model order, so each sees the version before it
  resources: () => [{ key: 'plan', mode: 'write' }],
  async execute() {
    throw new ToolError('tool.runtime_only', 'update_plan is carried out by the agent runtime, not executed as a tool');
  },
};
