import type { Logger } from 'pino';
import type { z } from 'zod';

/**
 * How a tool may be recovered after a crash between `tool/start` and its end (design §7, §8).
 * The type makes "possible effects, no key, auto retry" impossible to write.
 */
export type ExecutionSemantics =
  | { effects: 'none'; retry: 'auto' | 'never' }
  | {
      effects: 'possible';
      recovery:
        | { kind: 'idempotent'; key: string }
        | { kind: 'reconcile' }
        | { kind: 'manual'; on: 'ask' | 'block' };
    };

/** A resource a call touches; overlapping write keys serialize calls (issue 4 uses them). */
export interface ResourceKey {
  key: string;
  mode: 'read' | 'write';
}

/** What a tool's `execute` receives besides its input. */
export interface ToolContext {
  workspace: string;
  callId: string;
  idempotencyKey: string;
  /** The actor's epoch, a fencing token for effects outside the log. */
  epoch: number;
  signal: AbortSignal;
  logger: Logger;
}

/** The structured result of a tool: business failures are `ok: false` and the model sees them. */
export interface ToolResult {
  ok: boolean;
  /** The observation text the model sees. */
  output: string;
  error?: { code: string; message: string };
}

/** A tool (design §8). `input` names are a contract with models and scripts. */
export interface ToolDefinition<I = unknown> {
  name: string;
  version: string;
  description: string;
  input: z.ZodType<I>;
  executionSemantics(input: I): ExecutionSemantics;
  resources(input: I, workspace: string): ResourceKey[];
  execute(input: I, ctx: ToolContext): Promise<ToolResult>;
  /** Default timeout of one execution. */
  timeoutMs?: number;
}
