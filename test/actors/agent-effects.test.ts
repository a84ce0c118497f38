import { describe, expect, it } from 'vitest';
import { performEffect } from '../../src/actors/actor/agent-effects.js';
import { abortReason, scope } from '../../src/actors/agent/effect-context.js';
import { estimateUsage } from '../../src/actors/agent/model-request.js';
import { fakeContext, openTurnAndStep, type FakeContext } from './fake-effect-context.js';
import { memoryBlobs, turnRequest } from './agent-fixture.js';

// The effect table run against a fake EffectContext: effect in, staged events out, no actor or NATS.

const types = (ctx: FakeContext): string[] => ctx.staged.map((e) => e.type);

function withCall(ctx: FakeContext): Promise<void> {
  return performEffect(ctx, { name: 'dispatchCalls', params: { calls: [{ id: 'p1', name: 'echo', arguments: '{"text":"hi"}' }], toolBudgetLeft: null } });
}

describe('agent effects on a fake context', () => {
  it('startTurn claims the inbox items it names: turn/start with settings from the request, then each message', async () => {
    const ctx = fakeContext();
    ctx.given({
      type: 'inbox/received',
      data: { messageId: 'message_1', kind: 'user_message', from: 'client:test', content: 'hello', request: turnRequest() },
    });
    await performEffect(ctx, { name: 'startTurn', params: { messageIds: ['message_1'], source: 'user_message' } });
    expect(types(ctx)).toEqual(['turn/start', 'user/message']);
    expect(ctx.staged[0]!.data).toMatchObject({ source: 'user_message', messageIds: ['message_1'], settings: { model: 'scripted:inline' } });
    expect(ctx.staged[1]!.data).toEqual({ messageId: 'message_1', content: 'hello' });
    expect(ctx.flushes).toEqual([]);
  });

  it('dispatchCalls stages one tool/call per call with its resolution; startTool hands the call to the runner', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    await withCall(ctx);
    expect(types(ctx)).toEqual(['tool/call']);
    const call = ctx.staged[0]!;
    expect(call).toMatchObject({ turn: 'turn_1', step: 'step_1', data: { name: 'echo', status: 'valid', effects: 'none', recovery: 'rerun', withinBudget: true } });
    await performEffect(ctx, { name: 'startTool', params: { callId: call.call!, rerun: false } });
    expect(ctx.started).toEqual([{ callId: call.call!, rerun: false }]);
  });

  it('denyCall, cancelCall and rejectCall stage the call end in the open scope', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    await performEffect(ctx, { name: 'denyCall', params: { callId: 'call_a', reason: 'no' } });
    await performEffect(ctx, { name: 'cancelCall', params: { callId: 'call_b', reason: 'budget' } });
    await performEffect(ctx, { name: 'rejectCall', params: { callId: 'call_c', error: 'bad json' } });
    expect(ctx.staged.map((e) => [e.type, e.call, e.step])).toEqual([
      ['tool/denied', 'call_a', 'step_1'],
      ['tool/cancelled', 'call_b', 'step_1'],
      ['tool/result', 'call_c', 'step_1'],
    ]);
  });

  it('startAttempt on an aborted turn sends the abort to the machines and stages nothing', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    ctx.abort('interrupted');
    await performEffect(ctx, { name: 'startAttempt', params: { index: 1, notBeforeMs: null } });
    expect(ctx.staged).toEqual([]);
    expect(ctx.signals).toEqual([{ type: 'abort', reason: 'interrupted' }]);
    expect(abortReason(ctx)).toBe('interrupted');
  });

  it('prepareRequest stages request/prepared and keeps the prepared request for the attempt', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    await performEffect(ctx, { name: 'prepareRequest', params: { index: 1 } });
    expect(types(ctx)).toEqual(['request/prepared']);
    const digest = (ctx.staged[0]!.data as { digest: string }).digest;
    expect([...ctx.turn.prepared.keys()]).toEqual([digest]);
    expect(ctx.turn.model).not.toBeNull();
  });

  it('prepareRequest holds the commit of request/prepared for its blob when other hosts read the store, and not otherwise', async () => {
    const shared = fakeContext({ ports: { blobs: { ...memoryBlobs(), shared: true } } });
    openTurnAndStep(shared);
    await performEffect(shared, { name: 'prepareRequest', params: { index: 1 } });
    const digest = (shared.staged[0]!.data as { digest: string }).digest;
    expect(shared.holds).toHaveLength(1);
    expect(await shared.holds[0]).toBe(digest);
    expect(await shared.ports.blobs.has(digest)).toBe(true);

    const local = fakeContext();
    openTurnAndStep(local);
    await performEffect(local, { name: 'prepareRequest', params: { index: 1 } });
    expect(local.holds).toEqual([]);
  });

  it('interruptAttempt closes the attempt with estimated usage and notes it for the recovery continuation', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    await performEffect(ctx, { name: 'interruptAttempt', params: { attemptId: 'attempt_1' } });
    expect(ctx.staged[0]).toMatchObject({ type: 'attempt/end', attempt: 'attempt_1', data: { outcome: 'interrupted', usage: estimateUsage(0, 0) } });
    expect(ctx.recovered).toEqual(['attempt attempt_1 interrupted']);
    expect(scope(ctx)).toEqual({ turn: 'turn_1', step: 'step_1' });
  });
});
