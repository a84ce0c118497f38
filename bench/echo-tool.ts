import { z } from 'zod';
import type { ToolDefinition } from '../src/tools/tool.js';

const EchoInput = z.strictObject({
  text: z.string().describe('Text to return unchanged'),
});
/** Input of `echo`. */
export type EchoInput = z.infer<typeof EchoInput>;

/** `echo {text}`: returns its text; no effects, so the tool costs nothing but the runtime's own work. */
export const echoTool: ToolDefinition<EchoInput> = {
  name: 'echo',
  version: '1',
  description: 'Return the given text unchanged.',
  input: EchoInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  timeoutMs: 5_000,
  async execute(input) {
    return { ok: true, output: input.text };
  },
};
