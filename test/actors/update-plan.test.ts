import { describe, expect, it } from 'vitest';
import { updatePlanRuntime } from '../../src/actors/effects/update-plan.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { updatePlanTool } from '../../src/tools/builtins/update-plan.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { fakeContext } from './fake-effect-context.js';
import { actorTestWorld, ofType, startTurn } from './harness.js';

const world = actorTestWorld();

const plan = (items: Array<[string, 'pending' | 'in_progress' | 'completed']>, more: Record<string, unknown> = {}) => ({
  name: 'update_plan',
  arguments: { items: items.map(([content, status]) => ({ content, status })), ...more },
});

async function run(script: ScriptResponse[]) {
  const rt = await world.rts.open({ script });
  const sup = rt.supervisor();
  const { actor, ended } = await startTurn(sup, 'plan it', turnRequest(world.ws));
  await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
  return { actor, log: await readLog(sup, actor.rootId, actor.actorId) };
}

describe('update_plan', () => {
  it('commits the whole plan at versions 1 and 2, and shows it in the result', async () => {
    const { actor, log } = await run([
      { tool_calls: [plan([['Read the code', 'in_progress'], ['Fix the bug', 'pending']], { explanation: 'start small' })] },
      { tool_calls: [plan([['Read the code', 'completed'], ['Fix the bug', 'in_progress']], { expected_version: 1 })] },
      { content: 'done' },
    ]);
    const replaced = ofType(log, 'plan/replaced');
    expect(replaced.map((e) => e.data.version)).toEqual([1, 2]);
    expect(replaced[0]!.data).toEqual({
      version: 1,
      items: [{ content: 'Read the code', status: 'in_progress' }, { content: 'Fix the bug', status: 'pending' }],
      explanation: 'start small',
    });
    expect(replaced[1]!.data.explanation).toBeNull();
    // each plan/replaced is scoped to the call that wrote it, and the result follows it
    const results = ofType(log, 'tool/result');
    expect(replaced.map((e) => e.call)).toEqual(results.map((e) => e.call));
    expect(results[0]!.data).toMatchObject({ ok: true, source: 'tool:update_plan', trust: 'trusted' });
    expect(results[0]!.data.output).toBe('Plan version 1:\n[>] Read the code\n[ ] Fix the bug\nExplanation: start small');
    expect(results[1]!.data.output).toBe('Plan version 2:\n[x] Read the code\n[>] Fix the bug');
    expect(actor.projection.plan).toMatchObject({ version: 2, items: replaced[1]!.data.items, explanation: null });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('refuses a write with a stale expected_version: no plan/replaced, the result shows the current plan', async () => {
    const { actor, log } = await run([
      { tool_calls: [plan([['One', 'pending']])] },
      { tool_calls: [plan([['Two', 'pending']], { expected_version: 1 })] },
      { tool_calls: [plan([['Three', 'pending']], { expected_version: 1 })] },
      { content: 'done' },
    ]);
    expect(ofType(log, 'plan/replaced').map((e) => e.data.version)).toEqual([1, 2]);
    const stale = ofType(log, 'tool/result')[2]!;
    expect(stale.data.ok).toBe(false);
    expect(stale.data.error).toMatchObject({ code: 'plan.stale_version', retryable: false });
    expect(stale.data.output).toContain('expected_version 1, but the plan is at version 2; nothing was changed');
    expect(stale.data.output).toContain('Plan version 2:\n[ ] Two');
    // the model reads it as the call's observation
    expect(actor.projection.history.filter((h) => h.role === 'tool').at(-1)!.content).toBe(stale.data.output);
    expect(actor.projection.plan!.items).toEqual([{ content: 'Two', status: 'pending' }]);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('refuses expected_version above 0 when there is no plan yet', async () => {
    const { log } = await run([{ tool_calls: [plan([['One', 'pending']], { expected_version: 3 })] }, { content: 'done' }]);
    expect(ofType(log, 'plan/replaced')).toEqual([]);
    expect(ofType(log, 'tool/result')[0]!.data.output).toContain('there is no plan yet (version 0)');
  });

  it('answers bad items as invalid arguments, which the model sees, and writes no plan', async () => {
    const { log } = await run([
      {
        tool_calls: [
          plan([['A', 'in_progress'], ['B', 'in_progress']]),
          plan([['  ', 'pending']]),
          plan([]),
          plan([['A', 'started' as 'pending']]),
        ],
      },
      { content: 'done' },
    ]);
    expect(ofType(log, 'plan/replaced')).toEqual([]);
    const calls = ofType(log, 'tool/call');
    expect(calls.map((c) => c.data.status)).toEqual(['invalid_arguments', 'invalid_arguments', 'invalid_arguments', 'invalid_arguments']);
    expect(calls[0]!.data.error).toContain('at most one step may be in_progress');
    expect(calls[1]!.data.error).toContain('field "items.0.content" must be at least 1 characters long');
    expect(calls[2]!.data.error).toContain('field "items"');
  });

  it('is a read-level tool with no effects, so the policy allows it in every mode', () => {
    expect(updatePlanTool.level).toBe('read');
    expect(updatePlanTool.executionSemantics({ items: [] }, { workspace: '/' })).toEqual({ effects: 'none', retry: 'auto' });
  });

  it('on a rerun of a call whose plan is already in the log, stages only its result', async () => {
    const ctx = fakeContext();
    const ids = { turn: 'turn_1', step: 'step_1', call: 'call_1' };
    ctx.given({ type: 'plan/replaced', ...ids, data: { version: 4, items: [{ content: 'Ship', status: 'pending' }], explanation: null } });
    const input = { items: [{ content: 'Ship', status: 'pending' as const }], expected_version: 3 };
    await updatePlanRuntime.run(ctx, { call: {} as never, input, ids, rerun: true });
    expect(ctx.staged.map((e) => e.type)).toEqual(['tool/result']);
    expect(ctx.staged[0]).toMatchObject({ call: 'call_1', data: { ok: true } });
    expect(ctx.projection.plan!.version).toBe(4);
    // another call, with the version it expected: a new version
    await updatePlanRuntime.run(ctx, { call: {} as never, input: { ...input, expected_version: 4 }, ids: { ...ids, call: 'call_2' }, rerun: false });
    expect(ctx.projection.plan).toMatchObject({ version: 5, callId: 'call_2' });
  });
});
