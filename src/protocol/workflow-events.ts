import { z } from 'zod';
import { derivedId } from './ids.js';

// Workflow runs (design §11b): a declared graph of nodes run as an actor with its own log. The
// log starts with `workflow/created`, which holds the parsed workflow file whole, so a host that
// takes the run over needs nothing else; each node's attempt is a `node/started` (its job's ID)
// and a `node/ended` (its outcome and result), committed before a dependent is started; the run's
// end is `workflow/ended`. The run's machine (`src/jobs/workflow-graph.ts`) is rebuilt from the
// file and replays these events: a node with `node/ended` is never run again.

/** The job that runs one attempt of one node: derived, so a start retried after a crash names the same job. */
export function nodeJobIdOf(runId: string, node: string, attempt: number): string {
  return derivedId('job', 'workflow', runId, node, String(attempt));
}

/** The run a `start_workflow` call starts: derived from the call, so a retried start names the same run. */
export function workflowRunIdOf(callId: string): string {
  return derivedId('workflow', 'start', callId);
}

/** How a node's attempt, or a run, ended. */
export const NodeOutcomeSchema = z.enum(['succeeded', 'failed']);
export type NodeOutcome = z.infer<typeof NodeOutcomeSchema>;

/** The data schemas of a workflow run's own log, spread into the event catalogue. Extend, never rename. */
export const WORKFLOW_EVENT_DATA = {
  /**
   * The run's first event: the workflow as parsed and validated (`parseWorkflow`, defaults
   * filled in), who started it and where its shell nodes run. Validated again by the host that
   * runs it (the file format is `src/jobs`'s, which this room may not import).
   */
  'workflow/created': z.object({
    runId: z.string(),
    name: z.string(),
    workflow: z.looseObject({ name: z.string(), nodes: z.array(z.looseObject({ id: z.string() })).min(1) }),
    /** The agent whose `start_workflow` started it (its end comes back to it as a `job_notice`); null: a person did. */
    ownerId: z.string().nullable(),
    rootId: z.string(),
    /** Absolute working directory of its shell nodes. */
    cwd: z.string(),
    /** The workspace root the sandbox shows writable. */
    workspace: z.string(),
    /** The model its model nodes ask (`--model`, the default model, the owner's); null or absent: none was given, and model nodes fail saying so. */
    model: z.object({ spec: z.string(), baseUrl: z.string().nullable() }).nullable().optional(),
  }),
  /** A node's attempt was started: its job (`nodeJobIdOf`; a model node's: the ID of its request, `att_…`) and the attempt the run's `startNode` asked for. */
  'node/started': z.object({
    node: z.string(),
    attempt: z.number().int().positive(),
    jobId: z.string(),
  }),
  /**
   * A node's attempt ended, committed before any dependent starts. `result` is what a dependent's
   * `when` reads (a model node's validated JSON output; a shell node's `{exitCode, output}`);
   * `error` says why a failed attempt failed.
   */
  'node/ended': z.object({
    node: z.string(),
    attempt: z.number().int().positive(),
    outcome: NodeOutcomeSchema,
    result: z.unknown().optional(),
    error: z.string().optional(),
  }),
  /**
   * A stop was asked for (a person's `interrupt`: `actorloop workflow <runId> --cancel`; or its
   * owner's): no node starts after it, and the jobs of the nodes running are cancelled.
   */
  'workflow/cancel_requested': z.object({ by: z.string(), messageId: z.string() }),
  /**
   * Every node ended (succeeded, failed or skipped): `failed` lists the nodes that failed (empty
   * when it succeeded). `cancelled`: a cancel was asked for, and what had not run was skipped.
   */
  'workflow/ended': z.object({
    outcome: z.enum(['succeeded', 'failed', 'cancelled']),
    failed: z.array(z.string()),
  }),
} as const;
