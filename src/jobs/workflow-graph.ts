import { assign, setup } from 'xstate';
import { slot } from '../machines/machine-event.js';
import type { WorkflowRunEvent } from './workflow-events.js';
import type { When, Workflow, WorkflowNode } from './workflow-file.js';

/** Where a node is in a run. `pending` covers "not started yet" and "waiting for its next attempt". */
export type NodeStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped';

/** One node's part of a run's context. */
export interface NodeState {
  status: NodeStatus;
  /** The attempt `startNode` asks for (1, then 2 after a failure with retries left, ...). */
  attempt: number;
  /** `startNode` was issued for this attempt (not logged: a rehydrate clears it through `recover`). */
  asked: boolean;
  /** The ended attempt's result (what a dependent's `when` reads); absent until it succeeded. */
  result?: unknown;
  /** Why the latest failed attempt failed. */
  error?: string;
}

/** Context of a workflow run's machine: every node's state, by ID. */
export interface WorkflowRunContext {
  workflow: string;
  nodes: Record<string, NodeState>;
  /** A cancel was committed: no node starts any more, and the run ends `cancelled` once every node ended. */
  cancelled?: boolean;
}

/** Params of the `startNode` effect: run this attempt of this node (as a job, or a subagent). */
export interface StartNodeParams {
  node: string;
  attempt: number;
}

const ENDED: ReadonlySet<NodeStatus> = new Set(['succeeded', 'failed', 'skipped']);

/** Whether a node's status is final: an ended node is never started again. */
export function isEnded(status: NodeStatus): boolean {
  return ENDED.has(status);
}

/** The nodes in an order where each comes after every node it needs; ties keep file order. */
export function topologicalOrder(wf: Workflow): string[] {
  const left = new Map(wf.nodes.map((n) => [n.id, new Set(n.needs)]));
  const order: string[] = [];
  while (left.size > 0) {
    const ready = [...left].find(([, needs]) => [...needs].every((n) => !left.has(n)));
    // a validated workflow has no cycle; this guards a hand-built one
    if (!ready) throw new Error(`workflow ${wf.name}: the needs of ${[...left.keys()].join(', ')} form a cycle`);
    order.push(ready[0]);
    left.delete(ready[0]);
  }
  return order;
}

/** The value at a `when` path in a node's result (undefined where the path leads nowhere). */
function valueAt(result: unknown, path: string | undefined): unknown {
  let v = result;
  for (const key of path === undefined ? [] : path.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/** Whether a `when` holds for the results so far: `===` with its literal (a missing value equals nothing). */
export function whenHolds(when: When | undefined, nodes: Record<string, NodeState>): boolean {
  if (!when) return true;
  const v = valueAt(nodes[when.node]?.result, when.path);
  return 'equals' in when ? v === when.equals : v !== when.not_equals;
}

/** A workflow compiled for running: its order and its machine. */
export interface CompiledWorkflow {
  workflow: Workflow;
  order: string[];
  machine: ReturnType<typeof workflowMachine>;
}

/** Compiles a validated workflow (`parseWorkflow`) into its topological order and run machine. */
export function compileWorkflow(wf: Workflow): CompiledWorkflow {
  return { workflow: wf, order: topologicalOrder(wf), machine: workflowMachine(wf) };
}

/**
 * The machine of one workflow run: `running` → `succeeded | failed`. Branches run side by side,
 * and the compiled engine runs no parallel states, so the nodes are not states: the context holds
 * each node's status (the page lights the nodes from it), and eventless transitions of `running`,
 * one pair per node in topological order, decide: skip a node whose need failed or was skipped, or
 * whose `when` is false; start (`startNode`) a node whose needs all succeeded and whose `when`
 * holds. A failed attempt with retries left goes back to pending with the next attempt number.
 * The run ends when every node has: `failed` if one failed, else `succeeded` (an independent
 * branch still runs to its end after another fails).
 *
 * Recovery: `startNode` itself is not logged, so after a rehydrate `recover` clears every unended
 * node's `asked` and the eventless transitions ask again, for nodes started and not ended (same
 * attempt: the host finds or ends that attempt's job) and nodes ready but never started. An ended
 * node is never asked again: the run continues from the log and never re-runs a completed node.
 * Events for an unknown node, an ended node or another attempt are ignored (a late duplicate).
 */
export function workflowMachine(wf: Workflow) {
  const order = topologicalOrder(wf);
  const byId = new Map(wf.nodes.map((n) => [n.id, n]));
  const nodeOf = (id: string): WorkflowNode => byId.get(id)!;
  const update = (ctx: WorkflowRunContext, id: string, patch: Partial<NodeState>): Pick<WorkflowRunContext, 'nodes'> => ({
    nodes: { ...ctx.nodes, [id]: { ...ctx.nodes[id]!, ...patch } },
  });
  const current = (ctx: WorkflowRunContext, e: { node: string; attempt: number }): boolean => {
    const n = Object.hasOwn(ctx.nodes, e.node) ? ctx.nodes[e.node]! : undefined;
    return n !== undefined && !isEnded(n.status) && n.attempt === e.attempt;
  };
  const waiting = (ctx: WorkflowRunContext, id: string): boolean => {
    const n = ctx.nodes[id]!;
    return !isEnded(n.status) && !n.asked;
  };
  const needsMet = (ctx: WorkflowRunContext, id: string): boolean => nodeOf(id).needs.every((d) => ctx.nodes[d]!.status === 'succeeded');
  const needLost = (ctx: WorkflowRunContext, id: string): boolean =>
    nodeOf(id).needs.some((d) => ctx.nodes[d]!.status === 'failed' || ctx.nodes[d]!.status === 'skipped');
  const allEnded = (ctx: WorkflowRunContext): boolean => order.every((id) => isEnded(ctx.nodes[id]!.status));

  // typed here: built outside `createMachine`, an assign cannot infer the machine's events
  const setNode = (id: string, patch: Partial<NodeState>) =>
    assign<WorkflowRunContext, WorkflowRunEvent, undefined, WorkflowRunEvent, never>(({ context }) => update(context, id, patch));
  const decide = order.flatMap((id) => [
    {
      // cancelled: what has not started is skipped (a running node ends as its cancelled job does)
      guard: ({ context }: { context: WorkflowRunContext }) => context.cancelled === true && context.nodes[id]!.status === 'pending',
      actions: setNode(id, { status: 'skipped' }),
    },
    {
      guard: ({ context }: { context: WorkflowRunContext }) =>
        waiting(context, id) && context.nodes[id]!.status === 'pending' && (needLost(context, id) || (needsMet(context, id) && !whenHolds(nodeOf(id).when, context.nodes))),
      actions: setNode(id, { status: 'skipped' }),
    },
    {
      guard: ({ context }: { context: WorkflowRunContext }) => waiting(context, id) && needsMet(context, id) && whenHolds(nodeOf(id).when, context.nodes),
      actions: [
        setNode(id, { asked: true }),
        { type: 'startNode' as const, params: ({ context }: { context: WorkflowRunContext }) => ({ node: id, attempt: context.nodes[id]!.attempt }) },
      ],
    },
  ]);

  return setup({
    types: {} as { context: WorkflowRunContext; events: WorkflowRunEvent },
    actions: { startNode: slot<StartNodeParams>() },
  }).createMachine({
    id: 'workflow',
    initial: 'running',
    context: () => ({
      workflow: wf.name,
      nodes: Object.fromEntries(order.map((id) => [id, { status: 'pending', attempt: 1, asked: false } satisfies NodeState])),
    }),
    states: {
      running: {
        on: {
          'node/started': {
            guard: ({ context, event }) => current(context, event.data),
            actions: assign(({ context, event }) => update(context, event.data.node, { status: 'running' })),
          },
          'node/ended': {
            guard: ({ context, event }) => current(context, event.data),
            actions: assign(({ context, event }) => {
              const { node, attempt, outcome, result, error } = event.data;
              if (outcome === 'succeeded') return update(context, node, { status: 'succeeded', ...(result === undefined ? {} : { result }) });
              const why = error === undefined ? {} : { error };
              // attempt 1 is the first run; `retries` more may follow it
              if (attempt <= nodeOf(node).retries) return update(context, node, { status: 'pending', attempt: attempt + 1, asked: false, ...why });
              return update(context, node, { status: 'failed', ...why });
            }),
          },
          'workflow/cancel_requested': { actions: assign({ cancelled: true }) },
          recover: {
            actions: assign(({ context }) => ({
              nodes: Object.fromEntries(Object.entries(context.nodes).map(([id, n]) => [id, isEnded(n.status) ? n : { ...n, asked: false }])),
            })),
          },
        },
        always: [
          ...decide,
          { guard: ({ context }) => allEnded(context) && context.cancelled === true, target: 'cancelled' },
          { guard: ({ context }) => allEnded(context) && order.some((id) => context.nodes[id]!.status === 'failed'), target: 'failed' },
          { guard: ({ context }) => allEnded(context), target: 'succeeded' },
        ],
      },
      succeeded: { type: 'final' },
      failed: { type: 'final' },
      cancelled: { type: 'final' },
    },
  });
}
