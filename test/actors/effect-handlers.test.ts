import { describe, expect, it } from 'vitest';
import { performEffect } from '../../src/actors/actor/agent-effects.js';
import { callModel } from '../../src/actors/effects/model-call.js';
import { reconcileCall, settleReconciled } from '../../src/actors/effects/reconcile.js';
import { ToolRunner } from '../../src/actors/effects/tool-runner.js';
import { answerQuestion } from '../../src/actors/effects/questions.js';
import { answerApproval, decideCall } from '../../src/actors/effects/tool-policy.js';
import { fakeContext, openTurnAndStep, type FakeContext } from './fake-effect-context.js';

// model-call, tool-policy, tool-runner and reconcile, each run alone on a fake EffectContext.

async function withEchoCall(ctx: FakeContext): Promise<string> {
  openTurnAndStep(ctx);
  await performEffect(ctx, { name: 'dispatchCalls', params: { calls: [{ id: 'p1', name: 'echo', arguments: '{"text":"hi"}' }], toolBudgetLeft: null } });
  ctx.staged.length = 0;
  return ctx.projection.pending.calls[0]!.callId;
}

describe('model-call on a fake context', () => {
  it('commits the attempt before streaming, then stages its end and the accepted answer together', async () => {
    const ctx = fakeContext({ script: [{ content: 'the answer' }] });
    openTurnAndStep(ctx);
    await performEffect(ctx, { name: 'prepareRequest', params: { index: 1 } });
    const digest = (ctx.staged[0]!.data as { digest: string }).digest;
    ctx.staged.length = 0;
    await callModel(ctx, 'attempt_1', digest);
    expect(ctx.flushes).toEqual([0]);
    expect(ctx.staged.map((e) => e.type)).toEqual(['attempt/end', 'assistant/accepted']);
    expect(ctx.staged[0]!.data).toMatchObject({ outcome: 'succeeded' });
    expect(ctx.staged[1]!.data).toMatchObject({ content: 'the answer', finishReason: 'stop' });
  });

  it('an aborted turn ends the attempt as aborted, with the abort reason', async () => {
    const ctx = fakeContext({ script: [{ content: 'late', delay_ms: 5_000 }] });
    openTurnAndStep(ctx);
    ctx.abort('deadline');
    await callModel(ctx, 'attempt_1', 'sha256:unknown');
    expect(ctx.staged.at(-1)).toMatchObject({ type: 'attempt/end', data: { outcome: 'aborted', error: { class: 'cancelled', message: 'deadline' } } });
  });
});

describe('tool-policy on a fake context', () => {
  it('decides a valid read-only call: allowed, bound to its plan digest', async () => {
    const ctx = fakeContext();
    const callId = await withEchoCall(ctx);
    decideCall(ctx, callId, false);
    expect(ctx.staged).toHaveLength(1);
    expect(ctx.staged[0]).toMatchObject({ type: 'policy/decided', call: callId, data: { decision: 'allow', recheck: false } });
    expect((ctx.staged[0]!.data as { planDigest: string }).planDigest).toMatch(/^sha256:/);
  });

  it('refuses an approval answer that does not come from a client command', async () => {
    const ctx = fakeContext();
    await answerApproval(ctx, 'message_9', 'agent:other', JSON.stringify({ approvalId: 'approval_1', decision: 'approve' }));
    expect(ctx.staged).toHaveLength(1);
    expect(ctx.staged[0]).toMatchObject({ type: 'inbox/cancelled', data: { messageId: 'message_9' } });
    expect(ctx.flushes).toEqual([]);
  });
});

describe('answers naming what every object has', () => {
  // the records are plain objects: `constructor`, `toString` and `__proto__` are in every one of
  // them unless the lookup asks for the record's own keys
  const names = ['constructor', 'toString', '__proto__'];

  it('an approval answer for one is "no approval was asked for", not "already undefined"', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    ctx.projection.approvals = {};
    for (const [i, name] of names.entries()) {
      await answerApproval(ctx, `message_${i}`, 'client:cli', JSON.stringify({ approvalId: name, decision: 'approve' }));
    }
    expect(ctx.staged.map((e) => e.data)).toEqual(names.map((name, i) => ({ messageId: `message_${i}`, reason: `no approval ${name} was asked for in the open turn` })));
  });

  it('a question answer for one is "no question was asked"', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    ctx.projection.questions = {};
    for (const [i, name] of names.entries()) {
      await answerQuestion(ctx, `message_${i}`, 'client:cli', JSON.stringify({ questionId: name, optionId: 'x' }));
    }
    expect(ctx.staged.map((e) => e.data)).toEqual(names.map((name, i) => ({ messageId: `message_${i}`, reason: `no question ${name} was asked` })));
  });
});

describe('tool-runner on a fake context', () => {
  it('stages tool/start, runs the tool once it is committed, and stages its result', async () => {
    const ctx = fakeContext();
    const callId = await withEchoCall(ctx);
    const runner = new ToolRunner(ctx);
    runner.request(callId, false);
    expect(ctx.staged.map((e) => e.type)).toEqual(['tool/start']);
    await runner.idle();
    expect(ctx.staged.map((e) => e.type)).toEqual(['tool/start', 'tool/result']);
    expect(ctx.staged[1]!.data).toMatchObject({ ok: true, output: 'hi' });
    expect(ctx.failures).toEqual([]);
  });
});

describe('reconcile on a fake context', () => {
  it('settles a call reconcile found applied: its result, noted for the recovery continuation', async () => {
    const ctx = fakeContext();
    const callId = await withEchoCall(ctx);
    settleReconciled(ctx, callId, 'it was done');
    expect(ctx.staged[0]).toMatchObject({ type: 'tool/result', call: callId, data: { ok: true, output: 'it was done' } });
    expect(ctx.recovered).toHaveLength(1);
  });

  it('drops a late answer for a call its machine no longer reconciles', async () => {
    const ctx = fakeContext();
    const callId = await withEchoCall(ctx);
    ctx.calls.set(callId, 'outcome_unknown');
    await reconcileCall(ctx, callId);
    expect(ctx.staged).toEqual([]);
  });
});
