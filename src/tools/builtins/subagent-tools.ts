import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import { ChildBudgetSchema, ChildNameSchema, SpawnContextSchema, SpawnModeSchema, WorkspaceModeSchema } from '../../protocol/subagents.js';
import type { ToolDefinition } from '../tool.js';

// The tools a parent and its children talk with (design §6b). Each is run by the runtime
// (src/actors/tree/spawn-agent.ts, subagent-messages.ts, child-waits.ts): they commit facts to the
// agent's log and write to inboxes, never act on the world themselves, so they are read-level with
// no effects; the children they make have at most the parent's permissions.

const runtimeOnly = (name: string) => async (): Promise<never> => {
  throw new ToolError('tool.runtime_only', `${name} is carried out by the agent runtime, not executed as a tool`);
};

const SpawnAgentInput = z.strictObject({
  task: z.string().trim().min(1).max(32_000).describe('What the subagent should do, complete in itself: it sees nothing else unless context is "fork"'),
  name: ChildNameSchema.optional().describe('A short name for it (e.g. "log-reader"); default: "agent-<n>"'),
  tools: z.array(z.string()).optional().describe('The tools it may use: a subset of yours (default: all of yours but memory, which a subagent reads and changes only when given it)'),
  context: SpawnContextSchema.default('blank').describe('"blank": only its task; "fork": your history so far, then its task'),
  mode: SpawnModeSchema.default('background').describe(
    '"foreground": wait for its final answer as this call\'s result; "background": return its ID now, its notice comes as a message; ' +
    '"continuable": return once it started, then give it more work with send_message follow_up',
  ),
  budget: ChildBudgetSchema.optional().describe('Limits of its work (steps, toolCalls, tokens, costUsd, seconds), carved out of what you have left'),
  workspace: WorkspaceModeSchema.default('shared').describe('"shared": your workspace; "worktree": a git worktree of its own (its diff comes back as an artifact); "readonly": it may change nothing'),
  timeout_seconds: z.number().positive().max(86_400).optional().describe('foreground only: how long to wait for its answer (default: the seconds of its budget, else no limit)'),
});
/** Input of `spawn_agent`. */
export type SpawnAgentInput = z.infer<typeof SpawnAgentInput>;

/** `spawn_agent`: starts a subagent, an agent of its own with its own log, inbox and budget. */
export const spawnAgentTool: ToolDefinition<SpawnAgentInput> = {
  name: 'spawn_agent',
  version: '1',
  description:
    'Start a subagent: an agent of its own that works on a task in parallel with you, with at most your tools and ' +
    'permissions. Split independent parts of your work among subagents, then merge what they find. ' +
    'Its final answer comes back to you (as this call\'s result in foreground mode, else as a message).',
  input: SpawnAgentInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('spawn_agent'),
};

const SendMessageInput = z.strictObject({
  agent: z.string().min(1).describe('One of your subagents: its ID or the name you spawned it with'),
  content: z.string().trim().min(1).max(32_000).describe('What to tell it'),
  follow_up: z.boolean().default(false).describe('true: more work, a new turn once its current one ends; false: read at its next step'),
});
/** Input of `send_message`. */
export type SendMessageInput = z.infer<typeof SendMessageInput>;

/** `send_message`: says something to one of the agent's children through its inbox. */
export const sendMessageTool: ToolDefinition<SendMessageInput> = {
  name: 'send_message',
  version: '1',
  description: 'Send one of your subagents a message: guidance it reads at its next step, or (follow_up) more work for a new turn.',
  input: SendMessageInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('send_message'),
};

const ReportInput = z.strictObject({
  content: z.string().trim().min(1).max(32_000).describe('What your parent should know now'),
});
/** Input of `report`. */
export type ReportInput = z.infer<typeof ReportInput>;

/** `report`: a child tells its parent something before its turn ends (no recipient: always the parent). */
export const reportTool: ToolDefinition<ReportInput> = {
  name: 'report',
  version: '1',
  description: 'Tell the agent that spawned you (your parent) something now, before your final answer: a finding it cannot wait for.',
  input: ReportInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('report'),
};

const WaitAgentsInput = z.strictObject({
  ids: z.array(z.string().min(1)).min(1).optional().describe('The subagents to wait for, by ID or name (default: all your running ones)'),
  timeout_seconds: z.number().positive().max(86_400).default(600).describe('How long to wait at most'),
});
/** Input of `wait_agents`. */
export type WaitAgentsInput = z.infer<typeof WaitAgentsInput>;

/** `wait_agents`: parks the call until one of the children reports or ends, or the timeout (a deadline in the log). */
export const waitAgentsTool: ToolDefinition<WaitAgentsInput> = {
  name: 'wait_agents',
  version: '1',
  description: 'Wait until one of your subagents reports or ends its turn (or the timeout passes); the result is what it said, and what any others said meanwhile. Call it again for the next.',
  input: WaitAgentsInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('wait_agents'),
};

const InterruptAgentInput = z.strictObject({ id: z.string().min(1).describe('One of your subagents: its ID or the name you spawned it with') });
/** Input of `interrupt_agent`. */
export type InterruptAgentInput = z.infer<typeof InterruptAgentInput>;

/** `interrupt_agent`: stops a child's running turn (it ends cancelled, and its notice says so). */
export const interruptAgentTool: ToolDefinition<InterruptAgentInput> = {
  name: 'interrupt_agent',
  version: '1',
  description: "Stop one of your subagents' running turn: it ends cancelled, and its notice tells you so.",
  input: InterruptAgentInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('interrupt_agent'),
};

/** The tools a parent uses with its children (a child at the depth limit does not get them). */
export const PARENT_TOOLS: ReadonlySet<string> = new Set(['spawn_agent', 'send_message', 'wait_agents', 'interrupt_agent']);
/** The tools only a child has. */
export const CHILD_TOOLS: ReadonlySet<string> = new Set(['report']);
