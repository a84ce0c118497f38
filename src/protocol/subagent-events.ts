import { z } from 'zod';
import { TurnOutcomeSchema } from './turn-settings.js';
import { CarvedBudgetSchema, ChildPermissionsSchema, SpawnContextSchema, SpawnModeSchema } from './subagents.js';

/**
 * The `data` schemas of the events a tree of agents commits (design §6b), spread into the event
 * catalogue (`EventDataSchemas` in events.ts). Extend, never rename.
 */
export const SUBAGENT_EVENT_DATA = {
  /**
   * A parent asked for a child (design §6b), before anything of the child exists: the stable
   * request ID (derived from the spawn call), the child's ID (derived from the request), its task,
   * the permissions and budget it gets. Committed in the spawn call's scope; a kill after it finds
   * the same child.
   */
  'subagent/spawn_requested': z.object({
    requestId: z.string(),
    childId: z.string(),
    name: z.string(),
    task: z.string(),
    mode: SpawnModeSchema,
    context: SpawnContextSchema,
    depth: z.number().int().positive(),
    permissions: ChildPermissionsSchema,
    budget: CarvedBudgetSchema,
    /** What the spawn asked for, when it asked for more than the parent had left (it got `budget`). */
    clamped: z.array(z.string()).optional(),
  }),
  /** The child exists: its directory entry, inbox and task message (`messageId`, derived from the request). */
  'subagent/spawned': z.object({ requestId: z.string(), childId: z.string(), messageId: z.string(), worktree: z.string().nullable().optional() }),
  /** The parent sent a child a message (`send_message`, an interrupt, or the cancel when the parent's turn ended). */
  'subagent/message_sent': z.object({
    childId: z.string(),
    messageId: z.string(),
    kind: z.enum(['steer', 'follow_up', 'interrupt']),
    /** Why the runtime sent it on its own (the parent's turn ended); absent: the model asked. */
    reason: z.string().optional(),
  }),
  /** A child sent its parent a report (`report`). */
  'subagent/reported': z.object({ parentId: z.string(), messageId: z.string() }),
  /**
   * A parent took a child's notice or report into a waiting call (a foreground spawn,
   * `wait_agents`): committed with that call's result, it is the message's inclusion.
   */
  'subagent/completed': z.object({
    childId: z.string(),
    messageId: z.string(),
    /** `job_notice`: a job's end taken into `wait_jobs` (`childId` is then the job's ID). */
    kind: z.enum(['subagent_completed', 'subagent_report', 'job_notice']),
    outcome: TurnOutcomeSchema.nullable(),
  }),
  /** A child's completion notice reached its parent's inbox (the PubAck): nothing is owed any more. */
  'subagent/notified': z.object({ parentId: z.string(), messageId: z.string(), turn: z.string(), outcome: TurnOutcomeSchema }),
  /** A call waits for children (a foreground spawn, `wait_agents`) until an absolute deadline (null: none). */
  'subagent/waiting': z.object({ childIds: z.array(z.string()), deadlineAt: z.number().int().nullable(), any: z.boolean() }),
  /** A parent let a running child go on alone when its turn ended (`on_parent_end = "detach"`). */
  'subagent/detached': z.object({ childId: z.string(), reason: z.string() }),
} as const;
