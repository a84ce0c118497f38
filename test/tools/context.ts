import { pino } from 'pino';
import type { ToolContext } from '../../src/tools/tool.js';

/** A tool context over a workspace with a silent logger, no sandbox and no artifacts. */
export function toolContext(workspace: string, signal: AbortSignal = new AbortController().signal, over: Partial<ToolContext> = {}): ToolContext {
  return {
    workspace,
    callId: 'call_test',
    idempotencyKey: 'k',
    epoch: 1,
    signal,
    logger: pino({ level: 'silent' }),
    env: {},
    sandbox: { bwrapPath: null, network: false, envAllow: [] },
    artifacts: { read: async () => undefined },
    ...over,
  };
}
