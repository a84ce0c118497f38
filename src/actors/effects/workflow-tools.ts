import { readFileSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
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
    let workflow: Workflow;
    try {
      const text = readFileSync(path, 'utf8');
      workflow = parseWorkflow(text, rel);
    } catch (err) {
      if (err instanceof ActorloopError) return callFailed(a, r, 'workflow.invalid', err.message);
      return callFailed(a, r, 'workflow.unreadable', `cannot read ${rel}: ${(err as Error).message}`);
    }
    const runId = workflowRunIdOf(r.ids.call);
    await port.start({ runId, name: workflow.name, workflow, ownerId: a.actorId, rootId: a.rootId, cwd: workspace, workspace, model: { spec: model, baseUrl } });
    callSucceeded(a, r,
      `Started workflow ${workflow.name} (${runId}): ${workflow.nodes.length} nodes, in the order ${topologicalOrder(workflow).join(', ')}. ` +
      'Each node runs as a background job once what it needs succeeded; when the run ends, a message tells you how each node ended. Go on with other work meanwhile.');
  },
};
