import { z } from 'zod';

/** A node's job (or subagent) started: the attempt the run's `startNode` asked for. */
export const NodeStartedSchema = z.strictObject({
  type: z.literal('node/started'),
  data: z.strictObject({ node: z.string(), attempt: z.number().int().positive() }),
});

/**
 * A node's attempt ended. `result` is what its dependents' `when` reads: a model node's validated
 * JSON output; for shell and agent nodes whatever their executor records (exit code, artifact).
 * `error` says why a failed attempt failed (a model node's schema error, an exit code).
 */
export const NodeEndedSchema = z.strictObject({
  type: z.literal('node/ended'),
  data: z.strictObject({
    node: z.string(),
    attempt: z.number().int().positive(),
    outcome: z.enum(['succeeded', 'failed']),
    result: z.unknown().optional(),
    error: z.string().optional(),
  }),
});

/** The events a workflow run's log holds about its nodes. */
export const WorkflowNodeEventSchema = z.discriminatedUnion('type', [NodeStartedSchema, NodeEndedSchema]);
/** One node event of a workflow run. */
export type WorkflowNodeEvent = z.infer<typeof WorkflowNodeEventSchema>;

/** What a workflow run's machine receives: its node events, and `recover` after a rehydrate. */
export type WorkflowRunEvent = WorkflowNodeEvent | { type: 'recover' };
