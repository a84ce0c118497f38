import { z } from 'zod';
import { CompleteWhenSchema, OnCompletionExhaustedSchema } from './completion.js';

// What a Turn runs with (its settings, recorded in `turn/start`) and what a client asks for (its
// request, resolved into settings): the run modes, budgets and goal requests they are made of.

/** Outcomes a Turn ends with. */
export const TurnOutcomeSchema = z.enum(['completed', 'stopped', 'failed', 'cancelled']);
export type TurnOutcome = z.infer<typeof TurnOutcomeSchema>;

/** Budgets of a Turn; the deadline is an absolute time (ms since epoch) so it re-arms on rehydrate. */
export const BudgetsSchema = z.object({
  maxSteps: z.number().int().positive().nullable(),
  maxToolCalls: z.number().int().nonnegative().nullable(),
  deadlineAt: z.number().int().nullable(),
  /** Tokens (input + output) the turn's attempts may use; absent (older logs) or null: no limit. */
  maxTokens: z.number().int().positive().nullable().optional(),
  /** US dollars the turn's attempts may cost; absent or null: no limit. */
  maxCostUsd: z.number().positive().nullable().optional(),
});
export type Budgets = z.infer<typeof BudgetsSchema>;

/** Reasoning effort a step asks of models that take one. */
export const ReasoningEffortSchema = z.enum(['minimal', 'low', 'medium', 'high']);
export type ReasoningEffort = z.infer<typeof ReasoningEffortSchema>;

/**
 * How much a turn may do without asking (the policy's run mode): `ask` asks for writes and
 * shell; `auto-edit` allows workspace writes; `full-auto` allows writes and sandboxed shell;
 * `deny-all` denies whatever would ask. Explicit policy rules win over the mode.
 */
export const ApprovalModeSchema = z.enum(['ask', 'auto-edit', 'full-auto', 'deny-all']);
export type ApprovalMode = z.infer<typeof ApprovalModeSchema>;

/** Run modes from the loosest to the strictest. */
const STRICTNESS: Record<ApprovalMode, number> = { 'full-auto': 0, 'auto-edit': 1, ask: 2, 'deny-all': 3 };

/** The stricter of two run modes. */
export function stricterMode(a: ApprovalMode, b: ApprovalMode): ApprovalMode {
  return STRICTNESS[a] >= STRICTNESS[b] ? a : b;
}

/** Phases of a goal (design §5): `active ⇄ paused`, `blocked`, and the ends `complete | failed | cancelled`. */
export const GoalPhaseSchema = z.enum(['active', 'paused', 'blocked', 'complete', 'failed', 'cancelled']);
export type GoalPhase = z.infer<typeof GoalPhaseSchema>;

/** What a goal may spend over all its turns; a key left out is no limit. */
export const GoalBudgetSchema = z.object({
  tokens: z.number().int().positive().optional(),
  seconds: z.number().positive().optional(),
  costUsd: z.number().positive().optional(),
});
export type GoalBudget = z.infer<typeof GoalBudgetSchema>;

/** What a goal has spent: input + output tokens, seconds of turns while it was active, USD (null: a price was unknown). */
export const GoalUsageSchema = z.object({
  tokens: z.number().int().nonnegative(),
  seconds: z.number().nonnegative(),
  costUsd: z.number().nonnegative().nullable(),
});
export type GoalUsage = z.infer<typeof GoalUsageSchema>;

/** A goal a run asks for (`run --goal`): created with the turn the request starts. */
export const GoalRequestSchema = z.object({
  objective: z.string().min(1),
  budget: GoalBudgetSchema,
  /** Turns in a row without progress before the goal is `blocked` (`max_idle_turns`). */
  maxIdleTurns: z.number().int().positive(),
});
export type GoalRequest = z.infer<typeof GoalRequestSchema>;

/**
 * The completion policy's settings, the same in a request and in the settings it resolves to
 * (`run --complete-when`, `complete_when` and the keys beside it in the config).
 */
const CompletionFields = {
  /** When a final answer completes the turn (the completion policy); absent (older logs): `answer`. */
  completeWhen: CompleteWhenSchema.optional(),
  /** Command prefixes whose passing run is a verification (`code-change`), e.g. `npm test`; absent: none. */
  verifyCommands: z.array(z.string()).optional(),
  /** Answers the completion policy may refuse in a turn before the turn fails; absent: the default (3). */
  maxCompletionRejections: z.number().int().positive().optional(),
  /** What the refusal at that limit does: `fail` the turn, or `block` its active goal; absent: `fail`. */
  onCompletionExhausted: OnCompletionExhaustedSchema.optional(),
};

/**
 * The limits of the tree a turn spawns into (`max_subagent_depth`, `max_children_per_parent`,
 * `max_children_per_tree`), recorded so they travel with the turn to whichever host runs it and
 * on to its children: a host applies the stricter of these and its own.
 */
export const TreeLimitsSchema = z.object({
  maxDepth: z.number().int().positive(),
  maxChildrenPerParent: z.number().int().positive(),
  maxChildrenPerTree: z.number().int().positive(),
});
export type TreeLimits = z.infer<typeof TreeLimitsSchema>;

/** What a subagent's turns run with besides the rest: its name, and whether it may change anything. */
const ChildFields = {
  /** The tree's limits the run was started with; absent (older logs, embedders): the host's alone. */
  treeLimits: TreeLimitsSchema.optional(),
  /** The agent's name in its tree (a child's `spawn_agent` name); the scripted model plays `agents.<name>`. Absent: `main`. */
  agentName: z.string().optional(),
  /** Every call with possible effects is denied (a `readonly` child); absent: false. */
  readOnly: z.boolean().optional(),
};

/** What a turn's requests are assembled within (design §10): absent fields take the defaults. */
export const ContextSettingsSchema = z.object({
  /** The context window requests must fit (tokens), over the model's known one. */
  window: z.number().int().positive().optional(),
  /** Bytes the project docs may take together. */
  docsMaxBytes: z.number().int().nonnegative().optional(),
  /** Bytes of a memory file given whole; past it, its index. */
  memoryMaxBytes: z.number().int().nonnegative().optional(),
  /** Tokens of excerpts retrieved for the turn's task (0 or absent: none). */
  retrievalTokens: z.number().int().nonnegative().optional(),
  /** Tokens a checkpoint must save over the steps it replaces (`compaction_min_gain_tokens`). */
  compactionMinGainTokens: z.number().int().nonnegative().optional(),
  /** The newest closed steps a compaction keeps verbatim (`compaction_keep_steps`). */
  compactionKeepSteps: z.number().int().positive().optional(),
});
export type ContextSettings = z.infer<typeof ContextSettingsSchema>;

/** What a Turn runs with, recorded in `turn/start` so a resume needs nothing else. */
export const TurnSettingsSchema = z.object({
  model: z.string(),
  /** An OpenAI-compatible endpoint for `openai:` models; null: the provider's default. */
  baseUrl: z.string().nullable().default(null),
  workspace: z.string(),
  tools: z.array(z.string()),
  instructions: z.string(),
  budgets: BudgetsSchema,
  maxAttempts: z.number().int().positive(),
  /** A JSON Schema the final answer must match (structured output); absent: free text. */
  outputSchema: z.record(z.string(), z.unknown()).nullable().optional(),
  /** Reasoning effort for models that take one; absent: the provider's default. */
  effort: ReasoningEffortSchema.nullable().optional(),
  /** The most tokens one model answer may have; absent: the provider's default. */
  maxOutputTokens: z.number().int().positive().nullable().optional(),
  /** The EffectiveConfig the run was started with (no secrets: keys are named, never stored). */
  config: z.record(z.string(), z.unknown()).optional(),
  /** The policy's run mode; absent (older logs): `ask`. */
  approvalMode: ApprovalModeSchema.optional(),
  /** Plan mode: the turn is read-only (every call with possible effects is denied) and writes a plan; absent: false. */
  planMode: z.boolean().optional(),
  /** Context assembly limits from the config (absent: the defaults). */
  context: ContextSettingsSchema.optional(),
  ...CompletionFields,
  ...ChildFields,
});
export type TurnSettings = z.infer<typeof TurnSettingsSchema>;

/** What a client asks a Turn to run with; `turn/start` resolves it into TurnSettings. */
export const TurnRequestSchema = z.object({
  model: z.string(),
  baseUrl: z.string().nullable().default(null),
  workspace: z.string(),
  tools: z.array(z.string()).nullable(),
  instructions: z.string().nullable(),
  maxSteps: z.number().int().positive().nullable(),
  maxToolCalls: z.number().int().nonnegative().nullable(),
  deadlineSeconds: z.number().positive().nullable(),
  /** `--max-tokens`: tokens the turn's attempts may use. */
  maxTokens: z.number().int().positive().nullable().optional(),
  /** `--max-cost`: US dollars the turn's attempts may cost. */
  maxCostUsd: z.number().positive().nullable().optional(),
  maxAttempts: z.number().int().positive().nullable(),
  outputSchema: z.record(z.string(), z.unknown()).nullable().optional(),
  effort: ReasoningEffortSchema.nullable().optional(),
  maxOutputTokens: z.number().int().positive().nullable().optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  approvalMode: ApprovalModeSchema.optional(),
  /** Run the turn in plan mode (`actorloop run --plan-mode`). */
  planMode: z.boolean().optional(),
  context: ContextSettingsSchema.optional(),
  ...CompletionFields,
  ...ChildFields,
  /** A goal the turn starts (`run --goal`): `goal/created` is committed with its `turn/start`. */
  goal: GoalRequestSchema.optional(),
});
export type TurnRequest = z.infer<typeof TurnRequestSchema>;
