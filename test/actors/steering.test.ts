import { describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { InboxKind } from '../../src/protocol/inbox.js';
import { z } from 'zod';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, message, ofType, replay, startTurn, waitForLog } from './harness.js';

// The inbox at step boundaries (design §6, §6a): steer, inject and follow-up delivered only where
// a request is assembled, with their delivery states as facts in the log; interrupts.

const world = actorTestWorld();
const { rts } = world;

const KIND_TARGET: Record<string, 'next_step' | 'next_turn' | 'now'> = { steer: 'next_step', inject: 'next_step', follow_up: 'next_turn', interrupt: 'now' };

function mail(actor: AgentActor, kind: InboxKind, content: string) {
  return message(actor.actorId, content, { kind, target: KIND_TARGET[kind] ?? 'next_turn', wakeup: kind !== 'inject', from: 'client:test' });
}

const has = (type: string, n = 1) => (log: ActorEvent[]) => log.filter((e) => e.type === type).length >= n;

function expectClean(log: ActorEvent[]): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
}

/** The delivery state of a message after each prefix of the log, changes only. */
function statesOf(actorId: string, log: ActorEvent[], messageId: string): string[] {
  const out: string[] = [];
  for (let i = 1; i <= log.length; i++) {
    const state = replay(actorId, log.slice(0, i)).inbox[messageId]?.state;
    if (state && out.at(-1) !== state) out.push(state);
  }
  return out;
}

async function open(script: ScriptResponse[], extra: Parameters<Awaited<ReturnType<typeof rts.open>>['supervisor']>[0] = {}) {
  const models = captureModels(script);
  const rt = await rts.open({ models, tools: [] });
  return { rt, models, sup: rt.supervisor(extra) };
}

const echo = (text: string) => ({ tool_calls: [{ id: `c_${text}`, name: 'list_dir', arguments: { path: '.' } }] });

describe('steer', () => {
  it('mid-request: the request in flight is not changed; the next one holds the message once (pending → reserved → included)', async () => {
    const { sup, models, rt } = await open([{ ...echo('a'), delay_ms: 300 }, { content: 'done' }]);
    const { actor, ended } = await startTurn(sup, 'look around', turnRequest(world.ws));
    await waitForLog(sup, actor, has('attempt/start'));
    const steer = mail(actor, 'steer', 'also check the tests directory');
    await sup.send(steer);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'done' });
    const log = await readLog(sup, actor.rootId, actor.actorId);

    const [first, second] = models.requests();
    // the request in flight when the steer came went out as it was prepared
    const prepared = ofType(log, 'request/prepared');
    expect(prepared).toHaveLength(2);
    expect(first!.digest).toBe(prepared[0]!.data.digest);
    expect(first!.body).not.toContain('also check the tests directory');
    expect(prepared[0]!.data.messageIds).toEqual([ofType(log, 'turn/start')[0]!.data.messageIds[0]]);
    // the next step claimed it and its request holds it exactly once
    const steps = ofType(log, 'step/start');
    expect(steps[0]!.data.messageIds).toBeUndefined();
    expect(steps[1]!.data.messageIds).toEqual([steer.id]);
    expect(prepared[1]!.data.messageIds).toEqual([steer.id]);
    expect(second!.body.split('also check the tests directory')).toHaveLength(2);
    expect(ofType(log, 'user/message').filter((e) => e.data.messageId === steer.id)).toHaveLength(1);
    expect(statesOf(actor.actorId, log, steer.id)).toEqual(['pending', 'reserved', 'included']);
    // reserved in the commit of its step's start, included in the commit of the request that holds it
    const commits = (rt.commits.get(actor.actorId) ?? []).map((c) => c.map((e) => e.type));
    expect(commits.some((c) => c.includes('step/start') && !c.includes('request/prepared'))).toBe(true);
    expectClean(log);
  });

  it('after the final answer: the turn takes one more step instead of ending', async () => {
    const { sup, models } = await open([{ content: 'first answer', delay_ms: 300 }, { content: 'second answer' }]);
    const { actor, ended } = await startTurn(sup, 'answer', turnRequest(world.ws));
    await waitForLog(sup, actor, has('attempt/start'));
    const steer = mail(actor, 'steer', 'answer in French');
    await sup.send(steer);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'second answer' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'turn/start')).toHaveLength(1);
    expect(ofType(log, 'step/end').map((e) => e.data.outcome)).toEqual(['final', 'final']);
    expect(models.requests()[1]!.body).toContain('answer in French');
    expectClean(log);
  });

  it('to an idle agent: wakes it, in a turn of its own', async () => {
    const { sup } = await open([{ content: 'one' }, { content: 'two' }]);
    const { actor, ended } = await startTurn(sup, 'first', turnRequest(world.ws));
    await ended;
    await sup.send(mail(actor, 'steer', 'and now this'));
    const log = await waitForLog(sup, actor, has('turn/end', 2));
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'user_message']);
    expect(ofType(log, 'turn/end').map((e) => e.data.answer)).toEqual(['one', 'two']);
    expectClean(log);
  });
});

describe('inject', () => {
  it('does not wake an idle agent; the next turn\'s first request includes it', async () => {
    const { sup, models } = await open([{ content: 'one' }, { content: 'two' }]);
    const { actor, ended } = await startTurn(sup, 'first', turnRequest(world.ws));
    await ended;
    const inject = mail(actor, 'inject', 'context: the build is on node 20');
    await sup.send(inject);
    await actor.idle();
    await new Promise((r) => setTimeout(r, 100));
    let log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'turn/start')).toHaveLength(1);
    expect(replay(actor.actorId, log).inbox[inject.id]!.state).toBe('pending');
    await sup.send(message(actor.actorId, 'second'));
    log = await waitForLog(sup, actor, has('turn/end', 2));
    expect(ofType(log, 'step/start')[1]!.data.messageIds).toEqual([inject.id]);
    expect(models.requests()[1]!.body).toContain('the build is on node 20');
    expect(statesOf(actor.actorId, log, inject.id)).toEqual(['pending', 'reserved', 'included']);
    expectClean(log);
  });
});

describe('follow-up', () => {
  it('three follow-ups start three turns, in order', async () => {
    const { sup } = await open([{ content: 'zero', delay_ms: 200 }, { content: 'one' }, { content: 'two' }, { content: 'three' }]);
    const { actor } = await startTurn(sup, 'start', turnRequest(world.ws));
    await waitForLog(sup, actor, has('attempt/start'));
    const ups = ['a', 'b', 'c'].map((t) => mail(actor, 'follow_up', `follow-up ${t}`));
    for (const m of ups) await sup.send(m);
    const log = await waitForLog(sup, actor, has('turn/end', 4));
    const starts = ofType(log, 'turn/start');
    expect(starts.map((e) => e.data.source)).toEqual(['user_message', 'follow_up', 'follow_up', 'follow_up']);
    expect(starts.slice(1).map((e) => e.data.messageIds)).toEqual(ups.map((m) => [m.id]));
    expect(ofType(log, 'turn/end').map((e) => e.data.answer)).toEqual(['zero', 'one', 'two', 'three']);
    expectClean(log);
  });
});

describe('interrupt', () => {
  it('during the model stream: interrupt/requested first, then the attempt aborted, the step and turn cancelled', async () => {
    const { sup } = await open([{ content: 'never', delay_ms: 10_000 }]);
    const { actor, ended } = await startTurn(sup, 'slow', turnRequest(world.ws));
    await waitForLog(sup, actor, has('attempt/start'));
    const stop = mail(actor, 'interrupt', '');
    await sup.send(stop);
    expect(await ended).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const types = log.map((e) => e.type);
    const at = types.indexOf('interrupt/requested');
    expect(at).toBeGreaterThan(types.indexOf('attempt/start'));
    expect(types.slice(at)).toEqual(['interrupt/requested', 'attempt/end', 'step/end', 'turn/end']);
    expect(ofType(log, 'interrupt/requested')[0]!.data).toEqual({ messageId: stop.id, by: 'client:test', followUps: 'keep' });
    expect(ofType(log, 'attempt/end')[0]!.data.outcome).toBe('aborted');
    expect(ofType(log, 'step/end')[0]!.data.outcome).toBe('cancelled');
    expectClean(log);
  });

  it('keeps queued follow-ups by default; `interrupt_follow_ups = "cancel"` cancels them', async () => {
    for (const mode of ['keep', 'cancel'] as const) {
      const { sup } = await open([{ content: 'never', delay_ms: 10_000 }, { content: 'follow-up answered' }], {
        extra: { tooling: defaultTooling({ interruptFollowUps: mode }) },
      });
      const { actor, ended } = await startTurn(sup, 'slow', turnRequest(world.ws));
      await waitForLog(sup, actor, has('attempt/start'));
      const up = mail(actor, 'follow_up', 'then this');
      await sup.send(up);
      await sup.send(mail(actor, 'interrupt', ''));
      await ended;
      if (mode === 'keep') {
        // the follow-up starts its turn (an aborted attempt consumed no response: it hangs as the first did)
        await waitForLog(sup, actor, has('attempt/start', 2));
        await sup.send(mail(actor, 'interrupt', ''));
        const log = await waitForLog(sup, actor, has('turn/end', 2));
        expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'follow_up']);
        expect(ofType(log, 'turn/start')[1]!.data.messageIds).toEqual([up.id]);
        expect(ofType(log, 'turn/end').map((e) => e.data.outcome)).toEqual(['cancelled', 'cancelled']);
        expectClean(log);
      } else {
        await actor.idle();
        const log = await readLog(sup, actor.rootId, actor.actorId);
        expect(ofType(log, 'inbox/cancelled').map((e) => e.data.messageId)).toEqual([up.id]);
        expect(ofType(log, 'turn/start')).toHaveLength(1);
        expect(replay(actor.actorId, log).inbox[up.id]!.state).toBe('cancelled');
        expectClean(log);
      }
    }
  });

  it('of an idle agent: refused with a reason, nothing else changes', async () => {
    const { sup } = await open([{ content: 'one' }]);
    const { actor, ended } = await startTurn(sup, 'first', turnRequest(world.ws));
    await ended;
    const before = await readLog(sup, actor.rootId, actor.actorId);
    const stop = mail(actor, 'interrupt', '');
    await sup.send(stop);
    const log = await waitForLog(sup, actor, has('inbox/cancelled'));
    expect(log.slice(before.length).map((e) => e.type)).toEqual(['inbox/received', 'inbox/cancelled']);
    expect(ofType(log, 'inbox/cancelled')[0]!.data).toMatchObject({ messageId: stop.id, reason: 'nothing to interrupt: no turn is running' });
    expectClean(log);
  });
});

/** `slow_write {}`: an effectful call that runs until its signal aborts (a write in flight). */
const slowWrite: ToolDefinition<Record<string, never>> = {
  name: 'slow_write', version: '1', description: 'Writes slowly.', input: z.strictObject({}), level: 'read',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'idempotent', key: 'k' } }),
  resources: () => [],
  execute: (_input, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true })),
};

describe('interrupt while waiting or after a crash', () => {
  it('during an approval wait: the call is cancelled before it started, the turn cancelled', async () => {
    const { sup } = await open([{ tool_calls: [{ id: 'w', name: 'write_file', arguments: { path: 'x.txt', content: 'x' } }] }, { content: 'never' }]);
    const { actor, ended } = await startTurn(sup, 'write', turnRequest(world.ws, { approvalMode: 'ask' }));
    await actor.whenAwaitingApproval();
    await sup.send(mail(actor, 'interrupt', ''));
    expect(await ended).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'tool/start')).toEqual([]);
    expect(ofType(log, 'tool/cancelled')[0]!.data).toMatchObject({ started: false });
    expectClean(log);
  });

  it('a kill right after interrupt/requested: the recovery cancels the turn and runs nothing again', async () => {
    const models = captureModels([{ tool_calls: [{ id: 'w', name: 'slow_write', arguments: {} }] }, { content: 'never' }]);
    const rt = await rts.open({ models, tools: [slowWrite] });
    const dropping = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:interrupt/requested=drop'), undefined, rt.faultRecords) });
    const { actor, ended } = await startTurn(dropping, 'write slowly', turnRequest(world.ws));
    await waitForLog(dropping, actor, has('tool/start'));
    await dropping.send(mail(actor, 'interrupt', ''));
    await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });

    const sup = rt.supervisor();
    let done: Promise<unknown> | null = null;
    await sup.hydrate(actor.actorId, (a) => {
      done = a.whenTurnEnds();
    });
    expect(await done).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // the write was in flight when the process died: not run again, and its outcome is not known
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(ofType(log, 'tool/outcome_unknown')).toHaveLength(1);
    expect(ofType(log, 'interrupt/requested')).toHaveLength(1);
    expectClean(log);
  });
});

describe('recovery of a claim', () => {
  it('a kill between step/start and request/prepared gives the message back; a later step includes it once', async () => {
    const script: ScriptResponse[] = [{ ...echo('a'), delay_ms: 300 }, { ...echo('b') }, { content: 'done' }];
    const models = captureModels(script);
    const rt = await rts.open({ models });
    const dropping = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:inbox-reserved=drop'), undefined, rt.faultRecords) });
    const { actor, ended } = await startTurn(dropping, 'look around', turnRequest(world.ws));
    await waitForLog(dropping, actor, has('attempt/start'));
    const steer = mail(actor, 'steer', 'mind the README');
    await dropping.send(steer);
    await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
    const before = await readLog(dropping, actor.rootId, actor.actorId);
    expect(before.at(-1)!.type).toBe('step/start');
    expect(replay(actor.actorId, before).inbox[steer.id]!.state).toBe('reserved');

    const sup = rt.supervisor();
    let done: Promise<unknown> | null = null;
    await sup.hydrate(actor.actorId, (a) => {
      done = a.whenTurnEnds();
    });
    expect(await done).toMatchObject({ outcome: 'completed', answer: 'done' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const recovery = ofType(log, 'recovery/started')[0]!;
    expect(recovery.data.requeued).toEqual([steer.id]);
    expect(statesOf(actor.actorId, log, steer.id)).toEqual(['pending', 'reserved', 'pending', 'reserved', 'included']);
    expect(ofType(log, 'request/prepared').filter((e) => e.data.messageIds?.includes(steer.id))).toHaveLength(1);
    expect(ofType(log, 'user/message').filter((e) => e.data.messageId === steer.id)).toHaveLength(1);
    expectClean(log);
  });
});

