import { open, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { shellTool } from '../../tools/builtins/shell.js';
import { decide, type RunMode } from '../../tools/policy.js';
import type { PolicyRule } from '../../tools/policy-rules.js';
import { parseShellCommand } from '../../tools/shell-command.js';
import type { EffectContext } from '../agent/effect-context.js';
import { parseWorkflow, type Workflow } from '../../jobs/workflow-file.js';
import { topologicalOrder } from '../../jobs/workflow-graph.js';
import { ActorloopError } from '../../protocol/errors.js';
import { workflowRunIdOf } from '../../protocol/workflow-events.js';
import type { StartWorkflowInput } from '../../tools/builtins/workflow-tools.js';
import { settings } from '../agent/effect-context.js';
import type { RuntimeTool } from '../agent/runtime-tool.js';
import { callFailed, callSucceeded } from '../tree/child-waits.js';

// The runtime's side of `start_workflow` (design §11b): the file is read from the workspace and
// validated as the CLI does (every problem a line naming node and field), then the run is created
// (ID derived from the call, owner: this agent, in this agent's tree) and the call answers at
// once. The run's end comes back as a `job_notice` whose job ID is the run's.
//
// The file is the agent's to write, so what it runs is checked as the agent's own calls are: each
// shell node's command is decided by the policy (rules, run mode, sandbox) as a `shell` call of
// this step would be, and the run is refused unless every one is allowed without asking: a deny
// rule holds inside a workflow too, and a command that would ask is for a person to run
// (`actorloop workflow run`). The file is read through its real path, inside the workspace, and
// bounded.

/** The largest workflow file an agent may start. */
export const MAX_WORKFLOW_FILE_BYTES = 1024 * 1024;

/**
 * Why a node's command may not run unasked, or null when every one may: each shell node's command
 * decided by `rules` and `mode` as a `shell` call in `workspace` would be. The runtime asks it for
 * an agent's `start_workflow`, and `actorloop workflow run` for a person's run (under `--approve`).
 */
export function workflowRefusal(
  workflow: Workflow, rules: readonly PolicyRule[], mode: RunMode, ctx: { workspace: string; sandboxed: boolean; untrustedContext: boolean },
): string | null {
  for (const node of workflow.nodes) {
    if (node.run !== 'shell' || node.command === undefined) continue;
    const shell = parseShellCommand(node.command);
    const plan = shellTool.plan!({ command: node.command }, { workspace: ctx.workspace });
    if (shell.ok) plan.commands = shell.commands.map((c) => c.argv);
    const d = decide(rules, mode, { tool: 'shell', level: 'execute', effects: 'possible', plan, untrustedContext: ctx.untrustedContext, sandboxed: ctx.sandboxed, shell });
    if (d.decision === 'allow') continue;
    const why = d.reason ?? d.rule;
    return d.decision === 'deny'
      ? `node ${node.id}'s command is denied as a shell call would be: ${why}`
      : `node ${node.id}'s command would ask for approval (${why}); a workflow's commands run only when the policy allows them unasked`;
  }
  return null;
}

function refusedNode(a: EffectContext, workflow: Workflow): string | null {
  const s = settings(a);
  const policy = a.ports.tooling.policy(s);
  const why = workflowRefusal(workflow, policy.rules, policy.mode, {
    workspace: s.workspace, sandboxed: a.ports.tooling.bwrapPath !== null, untrustedContext: a.projection.openStep?.untrusted === true,
  });
  return why === null || !why.includes('would ask') ? why : `${why}: ask a person to run it with actorloop workflow run, or to add an allow rule`;
}

/** The file's text, read through its real path (inside the workspace) and bounded. */
async function readInside(workspace: string, path: string): Promise<string> {
  const [root, real] = await Promise.all([realpath(workspace), realpath(path)]);
  const rel = relative(root, real);
  if (rel.startsWith('..') || isAbsolute(rel)) throw new ActorloopError('workflow.outside_workspace', 'it leads outside the workspace (a link)');
  const f = await open(real, 'r');
  try {
    const buf = Buffer.alloc(MAX_WORKFLOW_FILE_BYTES + 1);
    const { bytesRead } = await f.read(buf, 0, buf.length, 0);
    if (bytesRead > MAX_WORKFLOW_FILE_BYTES) throw new ActorloopError('workflow.too_large', `it is over ${MAX_WORKFLOW_FILE_BYTES} bytes`);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await f.close();
  }
}

export const startWorkflowRuntime: RuntimeTool = {
  name: 'start_workflow',
  async run(a, r) {
    const port = a.ports.workflows;
    if (!port) return callFailed(a, r, 'workflow.unavailable', 'this runtime hosts no workflow runs; run the nodes with start_job instead');
    const { file } = r.input as StartWorkflowInput;
    const { workspace, model, baseUrl } = settings(a);
    const path = resolve(workspace, file);
    const rel = relative(workspace, path);
    if (rel.startsWith('..') || isAbsolute(rel)) return callFailed(a, r, 'workflow.outside_workspace', `${file} is outside the workspace; give a path inside it`);
    let text: string;
    try {
      text = await readInside(workspace, path);
    } catch (err) {
      if (err instanceof ActorloopError) return callFailed(a, r, err.code, `cannot start ${rel}: ${err.message}`);
      return callFailed(a, r, 'workflow.unreadable', `cannot read ${rel}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    let workflow: Workflow;
    try {
      workflow = parseWorkflow(text, rel);
    } catch (err) {
      if (err instanceof ActorloopError) return callFailed(a, r, 'workflow.invalid', err.message);
      throw err;
    }
    const refused = refusedNode(a, workflow);
    if (refused) return callFailed(a, r, 'workflow.not_allowed', `cannot start ${rel}: ${refused}`);
    const runId = workflowRunIdOf(r.ids.call);
    await port.start({ runId, name: workflow.name, workflow, ownerId: a.actorId, rootId: a.rootId, cwd: workspace, workspace, model: { spec: model, baseUrl } });
    callSucceeded(a, r,
      `Started workflow ${workflow.name} (${runId}): ${workflow.nodes.length} nodes, in the order ${topologicalOrder(workflow).join(', ')}. ` +
      'Each node runs as a background job once what it needs succeeded; when the run ends, a message tells you how each node ended. Go on with other work meanwhile.');
  },
};
