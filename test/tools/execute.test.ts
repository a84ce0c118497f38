import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolError } from '../../src/protocol/errors.js';
import { executeTool } from '../../src/tools/execute.js';
import { idempotencyKey } from '../../src/tools/idempotency.js';
import { TOOL_STOP_CODES, type ToolContext, type ToolDefinition } from '../../src/tools/tool.js';
import { toolContext } from './context.js';

function toolThat(execute: (input: { n: number }, ctx: ToolContext) => Promise<{ ok: boolean; output: string }>): ToolDefinition<{ n: number }> {
  return {
    name: 'probe',
    version: '1',
    description: 'a test tool',
    input: z.strictObject({ n: z.number() }),
    level: 'read',
    executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
    resources: () => [],
    execute,
  };
}

describe('executeTool', () => {
  it('returns a successful result with its duration', async () => {
    const result = await executeTool(toolThat(async ({ n }) => ({ ok: true, output: `got ${n}` })), { n: 2 }, toolContext('/tmp'), 1000);
    expect(result).toMatchObject({ ok: true, output: 'got 2', errorClass: 'none' });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('times out, aborting the tool signal', async () => {
    let sawAbort = false;
    const tool = toolThat(async (_input, ctx) => {
      ctx.signal.addEventListener('abort', () => (sawAbort = true));
      await sleep(5_000, undefined, { signal: ctx.signal });
      return { ok: true, output: 'late' };
    });
    const result = await executeTool(tool, { n: 1 }, toolContext('/tmp'), 20);
    expect(result).toMatchObject({ ok: false, errorClass: 'timeout', error: { code: 'timeout' } });
    expect(result.output).toContain('timed out after 20 ms');
    expect(sawAbort).toBe(true);
  });

  it('abandons a tool that ignores its signal at the timeout', async () => {
    const tool = toolThat(async () => {
      await sleep(300);
      throw new Error('too late to matter');
    });
    const result = await executeTool(tool, { n: 1 }, toolContext('/tmp'), 20, { graceMs: 30 });
    expect(result).toMatchObject({ errorClass: 'timeout', settled: false });
    await sleep(350); // the late rejection must not surface as unhandled
  });

  it('propagates the outer abort as cancelled', async () => {
    const controller = new AbortController();
    const tool = toolThat(async (_input, ctx) => {
      await sleep(5_000, undefined, { signal: ctx.signal });
      return { ok: true, output: 'late' };
    });
    setTimeout(() => controller.abort(), 20);
    const result = await executeTool(tool, { n: 1 }, toolContext('/tmp', controller.signal), 10_000);
    expect(result).toMatchObject({ ok: false, errorClass: 'cancelled', error: { code: 'cancelled' } });
    const already = await executeTool(tool, { n: 1 }, toolContext('/tmp', controller.signal), 10_000);
    expect(already.errorClass).toBe('cancelled');
  });

  it('gives a tool that reads its signal only after the abort an already aborted signal, with the reason', async () => {
    const controller = new AbortController();
    let seen: { aborted: boolean; reason: unknown } | null = null;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const tool = toolThat(async (_input, ctx) => {
      await gate;
      seen = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
      return { ok: true, output: 'read late' };
    });
    const running = executeTool(tool, { n: 1 }, toolContext('/tmp', controller.signal), 10_000, { graceMs: 20 });
    await sleep(5);
    controller.abort('operator stop');
    const result = await running;
    expect(result.errorClass).toBe('cancelled');
    release();
    await sleep(5);
    expect(seen).toEqual({ aborted: true, reason: 'operator stop' });
    // the same signal each time it is read, and the other context fields pass through
    const same = toolThat(async (_input, ctx) => ({ ok: ctx.signal === ctx.signal && ctx.workspace === '/tmp', output: 'x' }));
    expect((await executeTool(same, { n: 1 }, toolContext('/tmp'), 1000)).ok).toBe(true);
  });

  it('turns a ToolError into a business failure the model sees', async () => {
    const tool = toolThat(async () => {
      throw new ToolError('tool.not_found', 'no such file: a.txt');
    });
    expect(await executeTool(tool, { n: 1 }, toolContext('/tmp'), 1000)).toMatchObject({
      ok: false,
      output: 'no such file: a.txt',
      errorClass: 'business',
      error: { code: 'tool.not_found', message: 'no such file: a.txt' },
    });
    const returned = await executeTool(toolThat(async () => ({ ok: false, output: 'nope' })), { n: 1 }, toolContext('/tmp'), 1000);
    expect(returned).toMatchObject({ ok: false, errorClass: 'business' });
  });

  it('turns any other throw, even a synchronous one, into a runtime failure', async () => {
    const tool: ToolDefinition<{ n: number }> = {
      ...toolThat(async () => ({ ok: true, output: '' })),
      execute: (() => {
        throw new TypeError('boom');
      }) as ToolDefinition<{ n: number }>['execute'],
    };
    expect(await executeTool(tool, { n: 1 }, toolContext('/tmp'), 1000)).toMatchObject({
      ok: false,
      errorClass: 'runtime',
      error: { code: 'runtime_error' },
      output: 'probe failed unexpectedly: boom',
    });
  });
});

/** A tool with possible effects that runs `execute`. */
function effectful(execute: ToolDefinition<{ n: number }>['execute']): ToolDefinition<{ n: number }> {
  return { ...toolThat(async () => ({ ok: true, output: '' })), level: 'write', executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }), execute };
}

/** Runs `tool` and aborts the caller's signal once it has started. */
async function interrupted(tool: ToolDefinition<{ n: number }>, graceMs: number) {
  const controller = new AbortController();
  setTimeout(() => controller.abort('interrupted'), 10);
  return executeTool(tool, { n: 1 }, toolContext('/tmp', controller.signal), 10_000, { graceMs });
}

/** Sleeps `ms`, ignoring every signal. */
const stubborn = (ms: number) => async () => {
  await sleep(ms);
  return { ok: true, output: 'finished anyway' };
};

describe('executeTool after an abort (the grace)', () => {
  it('cancels an effectful call that stops on its signal, once it has settled', async () => {
    let stoppedAt = 0;
    const tool = effectful(async (_i, ctx) => {
      await sleep(5_000, undefined, { signal: ctx.signal }).catch(async (err: unknown) => {
        await sleep(30); // cleaning up after the abort, within the grace
        stoppedAt = performance.now();
        throw err;
      });
      return { ok: true, output: 'late' };
    });
    const result = await interrupted(tool, 1_000);
    expect(result).toMatchObject({ errorClass: 'cancelled', settled: true, error: { code: 'cancelled' } });
    expect(stoppedAt).toBeGreaterThan(0); // it was awaited, not abandoned
  });

  it('cancels an effectful call that returns a failure after the abort: it confirmed it stopped', async () => {
    const tool = effectful(async (_i, ctx) => {
      await new Promise((r) => ctx.signal.addEventListener('abort', r));
      return { ok: false, output: 'stopped', error: { code: 'tool.cancelled', message: 'stopped' } };
    });
    expect(await interrupted(tool, 1_000)).toMatchObject({ errorClass: 'cancelled', settled: true });
  });

  it('reports the result of a call that ran to its end after the abort', async () => {
    expect(await interrupted(effectful(stubborn(40)), 1_000)).toMatchObject({ ok: true, errorClass: 'none', output: 'finished anyway' });
  });

  it('gives an effectful call that ignores its signal an unknown outcome after the grace, never cancelled', async () => {
    const t0 = performance.now();
    const result = await interrupted(effectful(stubborn(2_000)), 50);
    expect(result).toMatchObject({ ok: false, errorClass: 'unknown', settled: false, error: { code: 'outcome_unknown' } });
    expect(result.output).toMatch(/interrupted after it started and did not confirm it stopped within 50 ms; it may or may not have taken effect/);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  it('treats an effectful call that settles saying it could not stop as unconfirmed', async () => {
    const tool = effectful(async (_i, ctx) => {
      await new Promise((r) => ctx.signal.addEventListener('abort', r));
      throw new ToolError(TOOL_STOP_CODES.notStopped, 'a process escaped the kill');
    });
    expect(await interrupted(tool, 1_000)).toMatchObject({ errorClass: 'unknown', settled: true });
  });

  it('cancels a call without effects that ignores its signal, after the grace', async () => {
    const result = await interrupted(toolThat(stubborn(2_000)), 50);
    expect(result).toMatchObject({ errorClass: 'cancelled', settled: false });
  });

  it('times out a call without effects as before, whether or not it stops', async () => {
    expect(await executeTool(toolThat(stubborn(2_000)), { n: 1 }, toolContext('/tmp'), 20, { graceMs: 30 })).toMatchObject({
      errorClass: 'timeout', error: { code: 'timeout' },
    });
  });

  it('gives an effectful call that times out an unknown outcome, even when it stops', async () => {
    const honours = effectful(async (_i, ctx) => {
      await sleep(5_000, undefined, { signal: ctx.signal });
      return { ok: true, output: 'late' };
    });
    const stopped = await executeTool(honours, { n: 1 }, toolContext('/tmp'), 20, { graceMs: 1_000 });
    expect(stopped).toMatchObject({ errorClass: 'unknown', settled: true });
    expect(stopped.output).toMatch(/timed out after 20 ms and stopped \(.*\) but did not confirm it did nothing; it may or may not have taken effect/);
    const ignores = await executeTool(effectful(stubborn(2_000)), { n: 1 }, toolContext('/tmp'), 20, { graceMs: 30 });
    expect(ignores).toMatchObject({ errorClass: 'unknown', settled: false });
    expect(ignores.output).toMatch(/did not confirm it stopped within 30 ms/);
  });

  it('times out an effectful call that confirms it did nothing (tool.not_applied), thrown or returned', async () => {
    const thrown = effectful(async (_i, ctx) => {
      await new Promise((r) => ctx.signal.addEventListener('abort', r));
      throw new ToolError(TOOL_STOP_CODES.notApplied, 'nothing was written');
    });
    const returned = effectful(async (_i, ctx) => {
      await new Promise((r) => ctx.signal.addEventListener('abort', r));
      return { ok: false, output: 'nothing sent', error: { code: TOOL_STOP_CODES.notApplied, message: 'nothing sent' } };
    });
    for (const tool of [thrown, returned]) {
      expect(await executeTool(tool, { n: 1 }, toolContext('/tmp'), 20, { graceMs: 1_000 })).toMatchObject({
        ok: false, errorClass: 'timeout', settled: true, error: { code: 'timeout' },
      });
    }
  });

  it('takes the effects it is told over the tool semantics', async () => {
    expect(await executeTool(toolThat(stubborn(2_000)), { n: 1 }, toolContext('/tmp'), 20, { graceMs: 30, effects: 'possible' })).toMatchObject({
      errorClass: 'unknown',
    });
  });
});

describe('idempotencyKey', () => {
  it('is 32 hex chars, stable under key order, and sensitive to every part', () => {
    const key = idempotencyKey('call_1', 'write_file', { path: 'a', content: 'x' });
    expect(key).toMatch(/^[0-9a-f]{32}$/);
    expect(idempotencyKey('call_1', 'write_file', { content: 'x', path: 'a' })).toBe(key);
    expect(idempotencyKey('call_1', 'write_file', { path: 'a', content: 'y' })).not.toBe(key);
    expect(idempotencyKey('call_2', 'write_file', { path: 'a', content: 'x' })).not.toBe(key);
    expect(idempotencyKey('call_1', 'read_file', { path: 'a', content: 'x' })).not.toBe(key);
  });
});
