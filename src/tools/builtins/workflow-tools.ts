import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';

// The tool an agent starts a workflow run with (design §11b). Carried out by the runtime
// (src/actors/effects/workflow-tools.ts): the file is read and validated as `actorloop workflow
// run` does, the run (an actor of its own, owned by the agent) is created and its ID returned at
// once; its end comes back to the agent as a `job_notice` message, as a job's does.

const StartWorkflowInput = z.strictObject({
  file: z.string().min(1).max(4_096).describe('The workflow file (.json or .toml), relative to the workspace root'),
});
/** Input of `start_workflow`. */
export type StartWorkflowInput = z.infer<typeof StartWorkflowInput>;

/** `start_workflow`: starts a workflow file's run in the background; returns its ID at once. */
export const startWorkflowTool: ToolDefinition<StartWorkflowInput> = {
  name: 'start_workflow',
  version: '1',
  description:
    'Start a workflow file (a graph of shell nodes, each with the nodes it needs) as a background run, and get its ID at once. ' +
    'Each node runs as a job in the same sandbox as shell, once every node it needs succeeded. ' +
    'When the run ends, a message tells you how each node ended. A file with a problem (a cycle, an unknown need, a node without run) is refused with what to fix.',
  input: StartWorkflowInput,
  level: 'execute',
  // the run's ID derives from the call: a start retried after a crash starts nothing twice
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'idempotent', key: 'start_workflow' } }),
  resources: () => [],
  plan: (input) => ({
    tool: 'start_workflow',
    version: '1',
    command: `actorloop workflow run ${input.file}`,
    cwd: '.',
    paths: [{ path: input.file, mode: 'read' }],
    network: false,
    envNames: [],
  }),
  execute: async (): Promise<never> => {
    throw new ToolError('tool.runtime_only', 'start_workflow is carried out by the agent runtime, not executed as a tool');
  },
};
