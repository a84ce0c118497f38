import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolError } from '../../src/protocol/errors.js';
import { executeTool } from '../../src/tools/execute.js';
import { idempotencyKey } from '../../src/tools/idempotency.js';
import type { ToolContext, ToolDefinition } from '../../src/tools/tool.js';
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
    const result = await executeTool(tool, { n: 1 }, toolContext('/tmp'), 20);
    expect(result.errorClass).toBe('timeout');
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
    const running = executeTool(tool, { n: 1 }, toolContext('/tmp', controller.signal), 10_000);
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
