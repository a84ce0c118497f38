import { z } from 'zod';

// The named fault points are protocol: a client (the gateway's `fault.kill`) names one in a fault
// order a host arms, and both sides must read the same list. The injector (src/actors/faults/faults.ts)
// re-exports them.

/**
 * Named places in the code where a fault can be injected (design §7), each reached by a clean
 * run of a scenario (chaos sweeps them). Points only a recovery reaches besides
 * `during:recovery` are not listed but can be named: `during:reconcile` (a reconciling tool has
 * answered, its verdict not yet staged); nor is `before:inbox-erase`, which only a message that
 * held a secret reaches (received, not yet erased from the inbox's store). Points only a tree of
 * agents reaches are in `TREE_FAULT_POINTS`.
 */
export const FAULT_POINTS = [
  'after:turn/start',
  'after:step/start',
  'mid:model-stream',
  'after:assistant/accepted',
  'after:tool/start',
  'before:tool/result',
  'before:inbox-ack',
  'after:inbox-reserved',
  'after:interrupt/requested',
  'after:ask/asked',
  // an attempt's budget reservation is committed and nothing is sent yet (a run with a token or cost budget)
  'after:budget-reserved',
  'after:goal/updated',
  'during:recovery',
] as const;

/**
 * Points only a run with subagents reaches: a parent's spawn between its two commits (`after:` of
 * the first fires before the child exists; of the second, once it does), and a parent that has
 * taken a child's completion notice or report into its log but not acked it yet.
 */
export const TREE_FAULT_POINTS = [
  'after:subagent/spawn_requested',
  'after:subagent/spawned',
  'before:notice-ack',
] as const;

/**
 * Points only a step that compacts reaches: the compaction is committed and its summary's
 * attempt not started, and the summary is back and neither its checkpoint nor its rejection is
 * committed.
 */
export const COMPACTION_FAULT_POINTS = [
  'after:compaction/started',
  'before:checkpoint/committed',
] as const;

/**
 * Points of a job's own log (its host hits them, with the job's ID): its execution is committed
 * as started and its process not yet spawned, and its notice is in its owner's inbox but
 * `job/notified` not committed.
 */
export const JOB_FAULT_POINTS = [
  'after:job/started',
  'before:job/notified',
] as const;

/** A point of a workflow run's log: a node's result is committed and its dependents not yet started. */
export const WORKFLOW_FAULT_POINTS = ['after:node/ended'] as const;

/** A fault order's "point" that is no point: the host kills itself as soon as it has replied. */
export const FAULT_NOW = 'now';

/** Every point a fault order may name: the listed points, and `now`. */
export const ORDERABLE_FAULT_POINTS = [...FAULT_POINTS, ...TREE_FAULT_POINTS, ...COMPACTION_FAULT_POINTS, ...JOB_FAULT_POINTS, ...WORKFLOW_FAULT_POINTS, FAULT_NOW] as const;

/** A point of a fault order; a bad name fails with the list of points. */
export const FaultOrderPointSchema = z.enum(ORDERABLE_FAULT_POINTS, {
  error: () => `not a fault point; one of: ${ORDERABLE_FAULT_POINTS.join(', ')}`,
});
/** One point of a fault order. */
export type FaultOrderPoint = z.infer<typeof FaultOrderPointSchema>;
