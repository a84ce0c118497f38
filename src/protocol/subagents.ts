import { z } from 'zod';
import { jobNoticeText } from './job-events.js';
import { UsageSchema } from './history.js';
import { ApprovalModeSchema, TreeLimitsSchema, TurnOutcomeSchema, type TreeLimits } from './turn-settings.js';
import { derivedId } from './ids.js';

/** The stable request ID of a spawn call, which is also its task message's ID. */
export function spawnRequestId(callId: string): string {
  return derivedId('message', 'spawn', callId);
}

/** The reservation of a child's carve in its parent's log: derived from the request, so a task delivered twice is carved once. */
export function carveReservationId(requestId: string): string {
  return derivedId('reservation', 'subagent', requestId);
}

/** The child a spawn request names: derived from it, so a retry names the same child. */
export function childIdOf(requestId: string): string {
  return derivedId('agent', 'child', requestId);
}

// Subagents (design §6b): what a parent asks for when it spawns a child, what the child's task
// message carries, and what a child says back (a report, the completion notice of a turn).

/** How a parent delegates: the spawn call waits for the answer, returns at once, or returns once the child's first turn is accepted. */
export const SpawnModeSchema = z.enum(['foreground', 'background', 'continuable']);
export type SpawnMode = z.infer<typeof SpawnModeSchema>;

/** What a child starts from: its instructions and task alone, or the parent's history through its last closed step. */
export const SpawnContextSchema = z.enum(['blank', 'fork']);
export type SpawnContext = z.infer<typeof SpawnContextSchema>;

/** Where a child works: the parent's workspace (writes serialized by resource leases), a git worktree of its own, or read-only. */
export const WorkspaceModeSchema = z.enum(['shared', 'worktree', 'readonly']);
export type WorkspaceMode = z.infer<typeof WorkspaceModeSchema>;

/** What a child may spend; a key left out takes what the parent has left of it. */
export const ChildBudgetSchema = z.strictObject({
  steps: z.number().int().positive().optional(),
  toolCalls: z.number().int().nonnegative().optional(),
  tokens: z.number().int().positive().optional(),
  costUsd: z.number().positive().optional(),
  seconds: z.number().positive().optional(),
});
export type ChildBudget = z.infer<typeof ChildBudgetSchema>;

/** A child's name: what its parent, the tree and the scripted model (`agents.<name>`) call it. */
export const ChildNameSchema = z.string().trim().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, 'letters, digits, "_", "." and "-", starting with a letter or digit');

/**
 * The permissions a child runs with, fixed by its parent when it asks for the child and recorded
 * in `subagent/spawn_requested`: never wider than the parent's (design §6b).
 */
export const ChildPermissionsSchema = z.object({
  tools: z.array(z.string()),
  approvalMode: ApprovalModeSchema,
  /** Every call with possible effects is denied (workspace `readonly`, or a parent in plan mode). */
  readOnly: z.boolean(),
  workspace: z.string(),
  workspaceMode: WorkspaceModeSchema,
});
export type ChildPermissions = z.infer<typeof ChildPermissionsSchema>;

/** The budget carved out of the parent's for one child: absolute limits of the child's turns (null: none). */
export const CarvedBudgetSchema = z.object({
  maxSteps: z.number().int().positive(),
  maxToolCalls: z.number().int().nonnegative().nullable(),
  maxTokens: z.number().int().positive().nullable(),
  maxCostUsd: z.number().positive().nullable(),
  /** Absolute deadline of the child's work, ms since epoch (null: none). */
  deadlineAt: z.number().int().nullable(),
});
export type CarvedBudget = z.infer<typeof CarvedBudgetSchema>;

/**
 * The content of a `subagent_task` message: everything the child needs for its first turn. Its
 * message ID is derived from the spawn request, so a retried spawn sends the same message.
 */
export const ChildTaskSchema = z.object({
  requestId: z.string(),
  parentId: z.string(),
  rootId: z.string(),
  name: z.string(),
  depth: z.number().int().positive(),
  task: z.string().min(1),
  mode: SpawnModeSchema,
  context: SpawnContextSchema,
  /** `fork`: the parent's model-visible history through its last closed step, as a transcript the child reads first. */
  forkTranscript: z.string().nullable(),
  permissions: ChildPermissionsSchema,
  budget: CarvedBudgetSchema,
  model: z.string(),
  baseUrl: z.string().nullable(),
  instructions: z.string().nullable(),
  /** The tree's limits its parent ran under (the stricter of its turn's and its host's): the child's turns run under them too. */
  treeLimits: TreeLimitsSchema.optional(),
});
export type ChildTask = z.infer<typeof ChildTaskSchema>;

/** What a child's completion notice tells its parent when one of its turns ends. */
export const SubagentNoticeSchema = z.object({
  childId: z.string(),
  name: z.string(),
  turn: z.string(),
  outcome: TurnOutcomeSchema,
  reason: z.string().nullable(),
  answer: z.string().nullable(),
  /** Artifacts the parent may read (`artifact_read`) or apply: the worktree child's diff. */
  artifacts: z.array(z.object({
    id: z.string(), digest: z.string(), bytes: z.number().int().nonnegative(), what: z.string(),
    /** The artifact itself, carried to the parent, whose host may not share the child's blob store. */
    text: z.string().optional(),
  })),
  usage: UsageSchema,
  costUsd: z.number().nonnegative().nullable(),
  /** Steps and tool calls the turn took: what its carve of its parent's is settled with (absent from older children). */
  steps: z.number().int().nonnegative().optional(),
  toolCalls: z.number().int().nonnegative().optional(),
});
export type SubagentNotice = z.infer<typeof SubagentNoticeSchema>;

/** What a child's `report` tells its parent mid-turn. */
export const SubagentReportSchema = z.object({ childId: z.string(), name: z.string(), content: z.string() });
export type SubagentReport = z.infer<typeof SubagentReportSchema>;

/** Limits of a tree (design §6b), from the config. */
export interface SubagentLimits {
  maxDepth: number;
  maxChildrenPerParent: number;
  maxChildrenPerTree: number;
  onParentEnd: 'cancel' | 'detach';
}

/** The stricter of a host's limits and those a turn recorded (absent: the host's). */
export function stricterLimits(host: SubagentLimits, recorded: TreeLimits | undefined): SubagentLimits {
  if (!recorded) return host;
  return {
    ...host,
    maxDepth: Math.min(host.maxDepth, recorded.maxDepth),
    maxChildrenPerParent: Math.min(host.maxChildrenPerParent, recorded.maxChildrenPerParent),
    maxChildrenPerTree: Math.min(host.maxChildrenPerTree, recorded.maxChildrenPerTree),
  };
}

/** The limits when the config names none. */
export const DEFAULT_SUBAGENT_LIMITS: SubagentLimits = { maxDepth: 3, maxChildrenPerParent: 8, maxChildrenPerTree: 64, onParentEnd: 'cancel' };

/** Inbox kinds a child speaks to its parent with. */
export const NOTICE_KINDS: ReadonlySet<string> = new Set(['subagent_report', 'subagent_completed']);

/** The text a parent's model reads of a child's notice or report. */
export function noticeText(kind: string, content: string): string {
  try {
    if (kind === 'subagent_completed') {
      const n = SubagentNoticeSchema.parse(JSON.parse(content));
      const head = `Subagent ${n.name} (${n.childId}) ended its turn: ${n.outcome}${n.reason ? ` (${n.reason})` : ''}.`;
      const arts = n.artifacts.map((a) => `\nArtifact ${a.id} (${a.what}, ${a.bytes} bytes): read it with artifact_read.`).join('');
      return `${head}${n.answer !== null ? `\nIts answer:\n${n.answer}` : ''}${arts}`;
    }
    if (kind === 'job_notice') return jobNoticeText(content);
    if (kind === 'subagent_report') {
      const r = SubagentReportSchema.parse(JSON.parse(content));
      return `Subagent ${r.name} (${r.childId}) reports:\n${r.content}`;
    }
  } catch {
    // a malformed notice is shown as it came: the model still reads something true
  }
  return content;
}
