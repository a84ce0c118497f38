import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';

/** Characters a stop reason may have: it is a code and a sentence, not a report. */
export const MAX_STOP_REASON = 500;

const StopInput = z.strictObject({
  reason: z
    .string().trim().min(1).max(MAX_STOP_REASON)
    .describe('Why you stop, e.g. INSUFFICIENT_EVIDENCE: the logs needed to confirm the cause are not in the workspace'),
});
/** Input of `stop`. */
export type StopInput = z.infer<typeof StopInput>;

/**
 * `stop {reason}`: the model's stop decision (seed 004 §3.1). The turn ends `stopped` with the
 * reason once the step's calls end, not `completed`: for when the task cannot be done as asked.
 * It changes only the agent's own log, so it is a read-level tool with no effects, run by the
 * runtime (src/actors/runtime-tools/stop-decision.ts), which commits `stop/decided`.
 */
export const stopTool: ToolDefinition<StopInput> = {
  name: 'stop',
  version: '1',
  description:
    'End the turn without a final answer, saying why: when the task cannot be done as asked (missing ' +
    'evidence, access or information). The turn ends "stopped" with your reason. When a final answer ' +
    'must match an output schema, answering {"kind": "stop", "reason": "..."} does the same.',
  input: StopInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  async execute() {
    throw new ToolError('tool.runtime_only', 'stop is carried out by the agent runtime, not executed as a tool');
  },
};
