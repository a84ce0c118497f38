import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ToolError } from '../protocol/errors.js';
import { TOOL_STOP_CODES, type ToolContext, type ToolDefinition, type ToolResult } from './tool.js';

/**
 * How an execution ended, for metrics and recovery; only `runtime` is a fault of the runtime or
 * tool. `cancelled`: aborted, and known to have stopped (it never ran, it has no effects, or it
 * settled after its signal aborted). `unknown`: an effectful call was aborted or timed out and
 * never confirmed it stopped (or, after a timeout, that it did nothing): it may have taken effect.
 */
export type ToolErrorClass = 'none' | 'business' | 'timeout' | 'cancelled' | 'unknown' | 'runtime';

/** A tool result with how long it took and how it ended. */
export type ExecutedToolResult = ToolResult & {
  durationMs: number;
  errorClass: ToolErrorClass;
  /** Whether the tool's `execute` settled (returned or threw) before this result was made; false when it never ran or was abandoned. */
  settled: boolean;
};

/** Options of `executeTool`. */
export interface ExecuteOptions {
  /** What the call may do to the world; default: what the tool's semantics say for this input. */
  effects: 'none' | 'possible';
  /** How long a tool whose signal aborted (timeout or the caller's) gets to settle before it is abandoned. */
  graceMs: number;
}

/**
 * Default time a tool gets to settle after its signal aborted. Above the shell's SIGTERM-to-SIGKILL
 * grace plus its wait for the pipes to close, so a killed process tree is seen to end.
 */
export const DEFAULT_CANCEL_GRACE_MS = 5_000;

// setTimeout clamps longer delays to 1 ms, which would time every call out at once.
const MAX_TIMER_MS = 2_147_483_647;

type Settled = { kind: 'returned'; result: ToolResult } | { kind: 'threw'; error: unknown };

/**
 * Runs a tool with a timeout and the caller's abort signal, and never throws: every ending is
 * a `ToolResult`. After the signal aborts (timeout or the caller's), the tool gets `graceMs` to
 * settle, and how it settles decides the ending (design §6a):
 * - it returned `ok: true`: its result (it ran to an end);
 * - it returned `ok: false` or threw: it confirmed it stopped, so a cancel is `cancelled`; after
 *   a timeout an effectful call is `unknown` unless it said `tool.not_applied` (then `timeout`);
 * - it did not settle in time, or said `tool.not_stopped`: abandoned; without effects that is
 *   `cancelled` or `timeout`, with possible effects `unknown`, never `cancelled`.
 */
export async function executeTool<I>(
  tool: ToolDefinition<I>,
  input: I,
  ctx: Omit<ToolContext, 'signal'> & { signal: AbortSignal },
  timeoutMs: number,
  opts: Partial<ExecuteOptions> = {},
): Promise<ExecutedToolResult> {
  const started = performance.now();
  let settled = false;
  const done = (result: ToolResult, errorClass: ToolErrorClass): ExecutedToolResult =>
    Object.assign({}, result, { durationMs: Math.round(performance.now() - started), errorClass, settled });
  const outer = ctx.signal;
  if (outer.aborted) return done(failure('cancelled', `${tool.name} was cancelled before it started`), 'cancelled');
  const effects = opts.effects ?? tool.executionSemantics(input, { workspace: ctx.workspace }).effects;
  const graceMs = Math.max(0, opts.graceMs ?? DEFAULT_CANCEL_GRACE_MS);

  // The tool's own signal (the caller's, or the timeout) is made when the tool first reads it:
  // an AbortSignal is costly to make, and most calls end without one being read.
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
    )
    .then((s) => {
      settled = true;
      return s;
    });
  // made only when a call is aborted: an AbortController and its abort cost microseconds a call
  let graceTimer: AbortController | null = null;
  try {
    const first = await Promise.race([run, ended]);
    if (typeof first === 'object') {
      // A tool that returned has had its effects, even if the abort fired in the same tick: report it.
      if (first.kind === 'returned') return done(first.result, first.result.ok ? 'none' : 'business');
      // it threw before any abort: its own failure
      if (!abortedWith) return thrown(first.error);
    }
    // The signal aborted (timeout or cancel, whichever came first): wait a bounded time for the tool to settle.
    const why = typeof first === 'object' ? (outer.aborted ? 'cancelled' : 'timeout') : first;
    const last = typeof first === 'object'
      ? first
      : await Promise.race([run, sleep(graceMs, null, { signal: (graceTimer = new AbortController()).signal }).catch(() => null)]);
    return afterAbort(why, last);
  } finally {
    (graceTimer as AbortController | null)?.abort();
    if (timer) clearTimeout(timer);
    outer.removeEventListener('abort', onAbort);
  }

  function thrown(error: unknown): ExecutedToolResult {
    if (error instanceof ToolError) return done(failure(error.code, error.message), 'business');
    const message = error instanceof Error ? error.message : String(error);
    return done(failure('runtime_error', `${tool.name} failed unexpectedly: ${message}`), 'runtime');
  }

  function afterAbort(why: 'timeout' | 'cancelled', last: Settled | null): ExecutedToolResult {
    // it returned a result after all: it ran to an end
    if (last?.kind === 'returned' && last.result.ok) return done(last.result, 'none');
    const code = last === null ? null : last.kind === 'returned' ? (last.result.error?.code ?? null) : errorCode(last.error);
    const notApplied = code === TOOL_STOP_CODES.notApplied;
    // settled, and did not say it could not stop
    const stopped = last !== null && code !== TOOL_STOP_CODES.notStopped;
    const timedOut = (): ExecutedToolResult =>
      done(failure('timeout', `${tool.name} timed out after ${timeoutMs} ms; try a smaller request`), 'timeout');
    if (why === 'cancelled') {
      if (stopped || effects === 'none') return done(failure('cancelled', `${tool.name} was cancelled`), 'cancelled');
      return done(
        failure('outcome_unknown', `${tool.name} was interrupted after it started and did not confirm it stopped within ${graceMs} ms; it may or may not have taken effect`),
        'unknown',
      );
    }
    if (effects === 'none' || notApplied) return timedOut();
    const how = stopped ? `stopped (${settledMessage(last)}) but did not confirm it did nothing` : `did not confirm it stopped within ${graceMs} ms`;
    return done(
      failure('outcome_unknown', `${tool.name} timed out after ${timeoutMs} ms and ${how}; it may or may not have taken effect`),
      'unknown',
    );
  }
}

function errorCode(error: unknown): string | null {
  return error instanceof ToolError ? error.code : null;
}

function settledMessage(last: Settled): string {
  if (last.kind === 'returned') return last.result.error?.message ?? 'it returned a failure';
  return last.error instanceof Error ? last.error.message : String(last.error);
}

function failure(code: string, message: string): ToolResult {
  return { ok: false, output: message, error: { code, message } };
}
