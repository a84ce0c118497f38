import { z } from 'zod';
import { WORKFLOW_EVENT_DATA } from '../protocol/workflow-events.js';

// The node events of a run's machine are the log's own (`src/protocol/workflow-events.ts`): the
// machine folds the committed events, so the two can never drift.

/** A node's job (or subagent) started: the attempt the run's `startNode` asked for. */
export const NodeStartedSchema = z.object({ type: z.literal('node/started'), data: WORKFLOW_EVENT_DATA['node/started'] });

/**
 * A node's attempt ended. `result` is what its dependents' `when` reads: a model node's validated
 * JSON output; for shell and agent nodes whatever their executor records (exit code, artifact).
 * `error` says why a failed attempt failed (a model node's schema error, an exit code).
 */
export const NodeEndedSchema = z.object({ type: z.literal('node/ended'), data: WORKFLOW_EVENT_DATA['node/ended'] });

/** The events a workflow run's log holds about its nodes. */
export const WorkflowNodeEventSchema = z.discriminatedUnion('type', [NodeStartedSchema, NodeEndedSchema]);
/** One node event of a workflow run. */
export type WorkflowNodeEvent = z.infer<typeof WorkflowNodeEventSchema>;

/** A stop of the run was asked for: no node starts after it. */
export const CancelRequestedSchema = z.object({ type: z.literal('workflow/cancel_requested'), data: WORKFLOW_EVENT_DATA['workflow/cancel_requested'] });
export type CancelRequested = z.infer<typeof CancelRequestedSchema>;

/** What a workflow run's machine receives: its node events, a cancel, and `recover` after a rehydrate. */
export type WorkflowRunEvent = WorkflowNodeEvent | CancelRequested | { type: 'recover' };
