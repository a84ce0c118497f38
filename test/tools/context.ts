import { pino } from 'pino';
import type { ToolContext } from '../../src/tools/tool.js';

/** A tool context over a workspace with a silent logger. */
export function toolContext(workspace: string, signal: AbortSignal = new AbortController().signal): ToolContext {
  return { workspace, callId: 'call_test', idempotencyKey: 'k', epoch: 1, signal, logger: pino({ level: 'silent' }) };
}
