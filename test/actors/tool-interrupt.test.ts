import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { ToolError } from '../../src/protocol/errors.js';
import { interruptMessage } from '../../src/client/messages.js';
import { TOOL_STOP_CODES, type ToolContext, type ToolDefinition, type ToolResult } from '../../src/tools/tool.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, ofType, only, startTurn } from './harness.js';

// The tool side of an interrupt and of a timeout (design §6a): a call that started gets its
// signal and a grace to settle; it ends cancelled only when it is known to have stopped.

const GRACE_MS = 150;
const world = actorTestWorld();
let rt: TestRuntime | null = null;
afterEach(() => {
  rt = null;
});

/** Resolves when a probe tool's execute has begun: the test interrupts only a call that runs. */
let running: { promise: Promise<void>; resolve: () => void };
const arm = (): void => {
  let resolve!: () => void;
  running = { promise: new Promise<void>((r) => (resolve = r)), resolve };
};

const Input = z.strictObject({});
/**
 * A probe tool. `honours`: it stops when its signal aborts (`settle` says how); otherwise it
 * ignores the signal and returns after 1.5 s. Level `read` so the policy allows it without an
 * approval; `effects` is what the runtime's rule looks at.
 */
function probe(name: string, effects: 'none' | 'possible', behaviour: { honours: boolean; settle?: () => never | ToolResult; timeoutMs?: number }): ToolDefinition<Record<string, never>> {
  return {
    name,
    version: '1',
    description: `probe ${name}`,
    input: Input,
    level: 'read',
    executionSemantics: () => (effects === 'none' ? { effects: 'none', retry: 'auto' } : { effects: 'possible', recovery: { kind: 'manual', on: 'block' } }),
    resources: () => [],
    ...(behaviour.timeoutMs ? { timeoutMs: behaviour.timeoutMs } : {}),
    async execute(_input, ctx: ToolContext) {
      running.resolve();
      if (!behaviour.honours) {
        await sleep(1_500);
        return { ok: true, output: 'finished anyway' };
      }
      await new Promise((r) => ctx.signal.addEventListener('abort', r, { once: true }));
      if (behaviour.settle) return behaviour.settle();
      throw ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error(String(ctx.signal.reason));
    },
  };
}

const TOOLS = [
  probe('read_honours', 'none', { honours: true }),
  probe('read_ignores', 'none', { honours: false }),
  probe('write_honours', 'possible', { honours: true }),
  probe('write_ignores', 'possible', { honours: false }),
  probe('read_times_out', 'none', { honours: false, timeoutMs: 50 }),
  probe('write_times_out', 'possible', { honours: false, timeoutMs: 50 }),
  probe('write_times_out_stops', 'possible', { honours: true, timeoutMs: 50 }),
  probe('write_times_out_not_applied', 'possible', {
    honours: true, timeoutMs: 50, settle: () => { throw new ToolError(TOOL_STOP_CODES.notApplied, 'nothing was sent'); },
  }),
];

async function run(script: ScriptResponse[]) {
  arm();
  rt = await world.rts.open({ script, tools: TOOLS });
  const sup = rt.supervisor({ extra: { tooling: defaultTooling({ cancelGraceMs: GRACE_MS }) } });
  const turn = await startTurn(sup, 'go', turnRequest(world.ws));
  return { sup, ...turn };
}

const call = (name: string) => ({ tool_calls: [{ name, arguments: {} }] });

/** How the one call of a log ended: its end event's type and data. */
function ending(log: ActorEvent[]): { type: string; data: unknown } {
  const end = log.find((e) => e.type === 'tool/result' || e.type === 'tool/cancelled' || e.type === 'tool/outcome_unknown' || e.type === 'tool/denied')!;
  return { type: end.type, data: end.data };
}

describe('an interrupt while a tool runs', () => {
  it.each([
    ['a read-only tool that stops on its signal', 'read_honours', 'abort'],
    ['a read-only tool that ignores its signal (nothing can be unknown)', 'read_ignores', 'abort'],
    ['an effectful tool that stops on its signal', 'write_honours', 'abort'],
    ['an effectful tool that stops on its signal, interrupted through the inbox', 'write_honours', 'inbox'],
  ] as const)('cancels %s, confirmed, and ends the turn cancelled', async (_, tool, how) => {
    const { sup, actor, ended } = await run([call(tool), { content: 'never reached' }]);
    await running.promise;
    if (how === 'abort') actor.abort('interrupted');
    else await sup.send(interruptMessage(actor.actorId));
    expect(await ended).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    await actor.idle();
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ending(log)).toEqual({ type: 'tool/cancelled', data: { reason: 'interrupted', started: true, confirmed: true } });
    // no step after the interrupt; the step and the turn end cancelled
    expect(ofType(log, 'step/start')).toHaveLength(1);
    expect(only(log, 'step/end').data).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'cancelled' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('ends an effectful tool that ignores its signal outcome_unknown after the grace, never cancelled', async () => {
    const { sup, actor, ended } = await run([call('write_ignores'), { content: 'never reached' }]);
    await running.promise;
    const t0 = performance.now();
    actor.abort('interrupted');
    expect(await ended).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    // the grace bounds the wait: the tool itself would take 1.5 s
    expect(performance.now() - t0).toBeLessThan(1_200);
    await actor.idle();
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = ending(log);
    expect(end.type).toBe('tool/outcome_unknown');
    expect((end.data as { reason: string }).reason).toMatch(/interrupted after it started and did not confirm it stopped.*may or may not have taken effect/);
    expect(ofType(log, 'tool/cancelled')).toEqual([]);
    // no step after the interrupt; the step and the turn end cancelled
    expect(ofType(log, 'step/start')).toHaveLength(1);
    expect(only(log, 'step/end').data).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'cancelled' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('a tool timeout after tool/start', () => {
  it.each([
    ['a read-only tool: a timeout result, as before', 'read_times_out', { type: 'tool/result', code: 'timeout' }],
    ['an effectful tool that ignores its signal: outcome_unknown', 'write_times_out', { type: 'tool/outcome_unknown', code: null }],
    ['an effectful tool that stops but does not say it did nothing: outcome_unknown', 'write_times_out_stops', { type: 'tool/outcome_unknown', code: null }],
    ['an effectful tool that confirms it did nothing (tool.not_applied): a timeout result', 'write_times_out_not_applied', { type: 'tool/result', code: 'timeout' }],
  ] as const)('ends %s, and the turn goes on', async (_, tool, want) => {
    const { sup, actor, ended } = await run([call(tool), { content: 'The tool did not finish.' }]);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'The tool did not finish.' });
    await actor.idle();
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = ending(log);
    expect(end.type).toBe(want.type);
    if (want.code) expect(end.data).toMatchObject({ ok: false, error: { code: want.code } });
    else expect((end.data as { reason: string }).reason).toMatch(/timed out after 50 ms and .*; it may or may not have taken effect/);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});
