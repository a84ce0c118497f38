import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';

const GetGoalInput = z.strictObject({});
/** Input of `get_goal` (none). */
export type GetGoalInput = z.infer<typeof GetGoalInput>;

/** Phases the model may ask for: the rest (pause, resume, cancel) are a person's to set. */
export const MODEL_GOAL_PHASES = ['complete', 'blocked', 'failed'] as const;

const UpdateGoalInput = z.strictObject({
  phase: z.enum(MODEL_GOAL_PHASES).describe('complete (asks to complete: decided when your final answer is accepted), blocked, or failed'),
  reason: z.string().trim().min(1).max(500).describe('Why, in a short sentence'),
  expected_revision: z.number().int().nonnegative().describe('The revision get_goal showed; when the goal is at another one the update is refused'),
});
/** Input of `update_goal`. */
export type UpdateGoalInput = z.infer<typeof UpdateGoalInput>;

const runtimeOnly = (name: string) => async (): Promise<never> => {
  throw new ToolError('tool.runtime_only', `${name} is carried out by the agent runtime, not executed as a tool`);
};

/**
 * `get_goal {}`: the agent's goal — objective, phase, revision, budget and what it spent. Run by
 * the runtime (src/actors/goals/goals.ts), which reads it from the agent's log.
 */
export const getGoalTool: ToolDefinition<GetGoalInput> = {
  name: 'get_goal',
  version: '1',
  description: 'Read your goal: its objective, phase, reason, revision, budget and usage so far. Call it before update_goal.',
  input: GetGoalInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [{ key: 'goal', mode: 'read' }],
  execute: runtimeOnly('get_goal'),
};

/**
 * `update_goal {phase, reason, expected_revision}`: changes the agent's goal at the next revision;
 * a stale revision is refused (a tool error the model sees). It changes only the agent's own
 * log, so it is a read-level tool with no effects, run by the runtime (src/actors/goals/goals.ts).
 */
export const updateGoalTool: ToolDefinition<UpdateGoalInput> = {
  name: 'update_goal',
  version: '1',
  description:
    'Change your goal: phase complete (when the work is done; it completes when your final answer is accepted), ' +
    'blocked (you cannot go on without help) or failed (it cannot be done), with the reason. Pass the revision ' +
    'get_goal showed as expected_revision: an update against a stale revision is refused.',
  input: UpdateGoalInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  // one goal per agent: two updates in one step run in model order, so each sees the revision before it
  resources: () => [{ key: 'goal', mode: 'write' }],
  execute: runtimeOnly('update_goal'),
};

/** The goal tools: a turn sees them only when its agent has a goal (design §5). */
export const GOAL_TOOLS: ReadonlySet<string> = new Set(['get_goal', 'update_goal']);
