import { performance } from 'node:perf_hooks';
import { ToolError } from '../protocol/errors.js';
import type { ToolContext, ToolDefinition, ToolResult } from './tool.js';

/** How an execution ended, for metrics and recovery; only `runtime` is a fault of the runtime or tool. */
export type ToolErrorClass = 'none' | 'business' | 'timeout' | 'cancelled' | 'runtime';

/** A tool result with how long it took and how it ended. */
export type ExecutedToolResult = ToolResult & { durationMs: number; errorClass: ToolErrorClass };

// setTimeout clamps longer delays to 1 ms, which would time every call out at once.
const MAX_TIMER_MS = 2_147_483_647;

type Settled = { kind: 'returned'; result: ToolResult } | { kind: 'threw'; error: unknown };

/**
 * Runs a tool with a timeout and the caller's abort signal, and never throws: every ending is
 * a `ToolResult` the model can see. A tool that ignores its signal is abandoned, not awaited.
 */
export async function executeTool<I>(
  tool: ToolDefinition<I>,
  input: I,
  ctx: Omit<ToolContext, 'signal'> & { signal: AbortSignal },
  timeoutMs: number,
): Promise<ExecutedToolResult> {
  const started = performance.now();
  const done = (result: ToolResult, errorClass: ToolErrorClass): ExecutedToolResult =>
    Object.assign({}, result, { durationMs: Math.round(performance.now() - started), errorClass });
  const outer = ctx.signal;
  if (outer.aborted) return done(failure('cancelled', `${tool.name} was cancelled before it started`), 'cancelled');

  // The tool's own signal (the caller's, or the timeout) is made when the tool first reads it:
  // an AbortSignal costs ~5 µs to make, and most calls end without one being read.
  let inner: AbortController | null = null;
  let abortedWith: { reason: unknown } | null = null;
  const abortInner = (reason: unknown): void => {
    abortedWith ??= { reason };
    inner?.abort(reason);
  };
  const toolCtx = Object.assign({}, ctx) as ToolContext;
  Object.defineProperty(toolCtx, 'signal', {
    enumerable: true,
    get(): AbortSignal {
      if (!inner) {
        inner = new AbortController();
        if (abortedWith) inner.abort(abortedWith.reason);
      }
      return inner.signal;
    },
  });
  let timedOut = false;
  let onEnd!: (reason: 'timeout' | 'cancelled') => void;
  const ended = new Promise<'timeout' | 'cancelled'>((resolve) => (onEnd = resolve));
  const onAbort = (): void => {
    abortInner(outer.reason);
    onEnd('cancelled');
  };
  outer.addEventListener('abort', onAbort, { once: true });
  const timer =
    Number.isFinite(timeoutMs) && timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          abortInner(new ToolError('timeout', `${tool.name} timed out after ${timeoutMs} ms`));
          onEnd('timeout');
        }, Math.min(timeoutMs, MAX_TIMER_MS))
      : undefined;

  // Settle into a value, so a tool that rejects after being abandoned is not an unhandled rejection.
  const run: Promise<Settled> = Promise.resolve()
    .then(() => tool.execute(input, toolCtx))
    .then(
      (result): Settled => ({ kind: 'returned', result }),
      (error: unknown): Settled => ({ kind: 'threw', error }),
    );
  try {
    const first = await Promise.race([run, ended]);
    // A tool that returned has had its effects, even if the abort fired in the same tick: report it.
    if (typeof first === 'object' && first.kind === 'returned') {
      return done(first.result, first.result.ok ? 'none' : 'business');
    }
    if (timedOut) return done(failure('timeout', `${tool.name} timed out after ${timeoutMs} ms; try a smaller request`), 'timeout');
    if (outer.aborted) return done(failure('cancelled', `${tool.name} was cancelled`), 'cancelled');
    const error = (first as Extract<Settled, { kind: 'threw' }>).error;
    if (error instanceof ToolError) return done(failure(error.code, error.message), 'business');
    const message = error instanceof Error ? error.message : String(error);
    return done(failure('runtime_error', `${tool.name} failed unexpectedly: ${message}`), 'runtime');
  } finally {
    if (timer) clearTimeout(timer);
    outer.removeEventListener('abort', onAbort);
  }
}

function failure(code: string, message: string): ToolResult {
  return { ok: false, output: message, error: { code, message } };
}
