import { CompiledMachine, type CompiledSnapshot } from '../machines/compiled-machine.js';
import type { ActorEvent, EventData, EventOf } from '../protocol/events.js';
import { checkWorkflow, WorkflowSchema, type Workflow } from './workflow-file.js';
import { compileWorkflow, type NodeStatus, type WorkflowRunContext } from './workflow-graph.js';

// A workflow run as its log shows it: the run's machine, rebuilt from the file its
// `workflow/created` holds and fed the node events in order. The machine's context is the nodes'
// state (what `actorloop workflow <runId>` prints and a host resumes from); the log adds each
// attempt's job ID and the run's end.

/** One node of a run, as its log has it. */
export interface RunNodeView {
  id: string;
  run: 'shell' | 'model' | 'agent';
  status: NodeStatus;
  attempt: number;
  /** The job of its latest started attempt (null: none started). */
  jobId: string | null;
  /** Why its latest failed attempt failed. */
  error: string | null;
  result: unknown;
}

/** A run folded from its log. */
export interface WorkflowRunState {
  created: EventData<'workflow/created'>;
  workflow: Workflow;
  /** The machine's snapshot after the events folded (its context holds each node's state). */
  snap: CompiledSnapshot;
  engine: CompiledMachine;
  /** The job of each started attempt, by job ID. */
  jobs: Map<string, { node: string; attempt: number }>;
  /** The `node/started` of each node's latest attempt. */
  started: Map<string, number>;
  /** Its `workflow/ended`, once committed. */
  ended: EventData<'workflow/ended'> | null;
  createdAt: number;
  endedAt: number | null;
}

/** The workflow a `workflow/created` holds, validated again (a log written by hand, or by another version). */
export function workflowOf(data: EventData<'workflow/created'>): Workflow {
  const wf = WorkflowSchema.parse(data.workflow);
  const problems = checkWorkflow(wf);
  if (problems.length > 0) throw new Error(`the workflow of run ${data.runId} is not valid: ${problems.join('; ')}`);
  return wf;
}

/** The state of a run from its `workflow/created` (its machine in its initial state, effects not asked for). */
export function createRunState(e: EventOf<'workflow/created'>, sink: Parameters<CompiledMachine['initial']>[1] = null): WorkflowRunState {
  const workflow = workflowOf(e.data);
  const engine = new CompiledMachine(compileWorkflow(workflow).machine);
  return {
    created: e.data, workflow, engine, snap: engine.initial(undefined, sink),
    jobs: new Map(), started: new Map(), ended: null, createdAt: Date.parse(e.at), endedAt: null,
  };
}

/** Folds one event of the run's log (the machine's transition with `sink` taking its effects). */
export function foldRunEvent(s: WorkflowRunState, e: ActorEvent, sink: Parameters<CompiledMachine['transition']>[2] = null): void {
  switch (e.type) {
    case 'node/started':
      s.jobs.set(e.data.jobId, { node: e.data.node, attempt: e.data.attempt });
      s.started.set(e.data.node, e.data.attempt);
      s.snap = s.engine.transition(s.snap, e, sink);
      break;
    case 'node/ended':
    case 'workflow/cancel_requested':
      s.snap = s.engine.transition(s.snap, e, sink);
      break;
    case 'workflow/ended':
      s.ended = e.data;
      s.endedAt = Date.parse(e.at);
      break;
    default:
      break;
  }
}

/** A run's state from its whole log; null when the log does not start with `workflow/created`. */
export function foldRunLog(events: readonly ActorEvent[]): WorkflowRunState | null {
  const first = events[0];
  if (first?.type !== 'workflow/created') return null;
  const s = createRunState(first);
  for (const e of events.slice(1)) foldRunEvent(s, e);
  return s;
}

/** The machine's context of a run. */
export function contextOf(s: WorkflowRunState): WorkflowRunContext {
  return s.snap.context as WorkflowRunContext;
}

/** Every node of a run in file order, with its status, attempt and job. */
export function runNodes(s: WorkflowRunState): RunNodeView[] {
  const ctx = contextOf(s);
  const jobOf = new Map<string, string>();
  // in log order: a later attempt's job replaces an earlier one's
  for (const [jobId, { node }] of s.jobs) jobOf.set(node, jobId);
  return s.workflow.nodes.map((n) => {
    const st = ctx.nodes[n.id]!;
    return { id: n.id, run: n.run, status: st.status, attempt: st.attempt, jobId: jobOf.get(n.id) ?? null, error: st.error ?? null, result: st.result ?? null };
  });
}

/** The run's outcome once its machine is done (null while a node has not ended). */
export function machineOutcome(s: WorkflowRunState): EventData<'workflow/ended'> | null {
  if (s.snap.status !== 'done') return null;
  const failed = runNodes(s).filter((n) => n.status === 'failed').map((n) => n.id);
  return { outcome: s.snap.value === 'succeeded' ? 'succeeded' : s.snap.value === 'cancelled' ? 'cancelled' : 'failed', failed };
}
