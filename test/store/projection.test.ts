import { describe, expect, it } from 'vitest';
import type { ActorEvent, EventData } from '../../src/protocol/events.js';
import { approvalById, emptyProjection, foldEvent, questionById, type Projection } from '../../src/store/projection.js';
import { ACTOR, LogBuilder } from '../actors/log-builder.js';

const REQUEST = {
  model: 'scripted', baseUrl: null, workspace: '/tmp/ws', tools: null, instructions: null,
  maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
};

function fold(events: ActorEvent[], p: Projection = emptyProjection(ACTOR)): Projection {
  for (const e of events) foldEvent(p, e);
  return p;
}

/** What LogBuilder's `user/message` says. */
const USER = 'Summarise notes.txt';

const usage = (inputTokens: number, outputTokens: number, estimated = false) => ({ inputTokens, outputTokens, estimated });

/** A log builder with the turn open and one step open, ready for an attempt. */
function inStep(): LogBuilder {
  return new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1);
}

/** An attempt that ends `outcome` with `u`, in the builder's open step. */
function attempt(b: LogBuilder, outcome: EventData<'attempt/end'>['outcome'], u = usage(10, 2)): LogBuilder {
  b.startAttempt();
  const error = outcome === 'succeeded' ? null : { class: 'server' as const, message: 'x', retryable: outcome === 'failed' };
  b.push('attempt/end', { outcome, error, usage: u, backoffMs: null, latencyMs: 5 }, { turn: b.turn, step: b.step, attempt: b.attempt });
  return b;
}

/** `assistant/accepted` asking for the named calls (provider IDs p0, p1, ...), then a `tool/call` each. */
function acceptCalls(b: LogBuilder, names: string[]): string[] {
  const toolCalls = names.map((name, i) => ({ id: `p${i}`, name, arguments: '{}' }));
  const scope = { turn: b.turn, step: b.step };
  b.push('assistant/accepted', { content: 'calling', toolCalls, finishReason: 'tool_calls' }, { ...scope, attempt: b.attempt });
  return names.map((name, index) => {
    const call = `call_${b.step}_${index}`;
    b.push('tool/call', {
      index, providerId: `p${index}`, name, arguments: '{}', status: 'valid', error: null,
      effects: 'none', recovery: 'rerun', withinBudget: true,
    }, { ...scope, call });
    return call;
  });
}

const inCall = (b: LogBuilder, call: string) => ({ turn: b.turn, step: b.step, call });

describe('foldEvent', () => {
  it('closes a step into history: user, assistant, then tool results in call order, whatever the commit order', () => {
    const b = attempt(inStep(), 'succeeded');
    const [c0, c1, c2] = acceptCalls(b, ['read_file', 'list_dir', 'search']);
    // results land out of order
    for (const [call, output] of [[c2!, 'found'], [c0!, 'file'], [c1!, 'dir']] as const) {
      b.push('tool/start', { name: 'x', input: {}, effects: 'none', idempotencyKey: `k_${call}`, rerun: false }, inCall(b, call));
      b.push('tool/result', { ok: true, output, error: null, durationMs: 1 }, inCall(b, call));
    }
    const open = fold(b.events);
    // only whole steps are in the history
    expect(open.history).toEqual([{ role: 'user', content: USER }]);
    expect(open.pending.calls.map((c) => c.observation)).toEqual(['file', 'dir', 'found']);

    b.endStep('tool_calls', 3);
    const p = fold(b.events);
    expect(p.history).toEqual([
      { role: 'user', content: USER },
      {
        role: 'assistant', content: 'calling',
        toolCalls: [{ id: 'p0', name: 'read_file', arguments: '{}' }, { id: 'p1', name: 'list_dir', arguments: '{}' }, { id: 'p2', name: 'search', arguments: '{}' }],
      },
      { role: 'tool', callId: 'p0', name: 'read_file', content: 'file' },
      { role: 'tool', callId: 'p1', name: 'list_dir', content: 'dir' },
      { role: 'tool', callId: 'p2', name: 'search', content: 'found' },
    ]);
    expect(p.openStep).toBeNull();
    expect(p.pending).toEqual({ assistant: null, calls: [] });
  });

  it('orders results by call index even when the calls were registered out of order', () => {
    const b = attempt(inStep(), 'succeeded');
    const scope = { turn: b.turn, step: b.step };
    b.push('assistant/accepted', {
      content: null, finishReason: 'tool_calls',
      toolCalls: [{ id: 'p0', name: 'read_file', arguments: '{}' }, { id: 'p1', name: 'read_file', arguments: '{}' }],
    }, { ...scope, attempt: b.attempt });
    for (const index of [1, 0]) {
      b.push('tool/call', {
        index, providerId: `p${index}`, name: 'read_file', arguments: '{}', status: 'unknown_tool', error: `e${index}`,
        effects: null, recovery: null, withinBudget: true,
      }, { ...scope, call: `c${index}` });
      b.push('tool/result', { ok: false, output: `e${index}`, error: null, durationMs: 0 }, { ...scope, call: `c${index}` });
    }
    b.endStep('tool_calls', 2);
    expect(fold(b.events).history.slice(2)).toEqual([
      { role: 'tool', callId: 'p0', name: 'read_file', content: 'e0' },
      { role: 'tool', callId: 'p1', name: 'read_file', content: 'e1' },
    ]);
  });

  it('turns denied, cancelled and outcome_unknown calls into observations the model sees', () => {
    const b = attempt(inStep(), 'succeeded');
    const [denied, cancelled, unknown, silent] = acceptCalls(b, ['write_file', 'read_file', 'write_file', 'list_dir']);
    b.push('tool/denied', { reason: 'denied by policy' }, inCall(b, denied!));
    b.push('tool/cancelled', { reason: 'tool_budget' }, inCall(b, cancelled!));
    b.push('tool/start', { name: 'write_file', input: {}, effects: 'possible', idempotencyKey: 'k', rerun: false }, inCall(b, unknown!));
    b.push('tool/outcome_unknown', { reason: 'the process stopped' }, inCall(b, unknown!));
    b.endStep('tool_calls', 4);
    expect(fold(b.events).history.slice(2).map((h) => h.content)).toEqual([
      'Denied: denied by policy',
      'Cancelled: tool_budget',
      'Outcome unknown: the process stopped',
      // a call with no end recorded still answers the model
      'No result was recorded.',
    ]);
    expect(silent).toBeDefined();
  });

  it('adds nothing to history for a step that ended without an accepted output', () => {
    const b = attempt(inStep(), 'failed');
    b.endStep('failed');
    const p = fold(b.events);
    expect(p.history).toEqual([{ role: 'user', content: USER }]);
    expect(p.openStep).toBeNull();
  });

  it('sums usage over attempts of every outcome, per turn and in total', () => {
    const b = inStep();
    attempt(b, 'failed', usage(1, 0));
    attempt(b, 'interrupted', usage(10, 1, true));
    attempt(b, 'succeeded', usage(100, 20));
    const p = fold(b.events);
    expect(p.usage).toEqual(usage(111, 21, true));
    expect(p.openTurn!.usage).toEqual(usage(111, 21, true));

    b.push('assistant/accepted', { content: 'done', toolCalls: [], finishReason: 'stop' }, { turn: b.turn, step: b.step, attempt: b.attempt });
    b.endStep('final').endTurn();
    b.receive('msg_2', 'again').startTurn('msg_2').startStep(1);
    attempt(b, 'aborted', usage(1000, 0));
    const q = fold(b.events);
    expect(q.openTurn!.usage).toEqual(usage(1000, 0));
    expect(q.usage).toEqual(usage(1111, 21, true));
  });

  it('counts succeeded and failed attempts as consumed model responses, not interrupted or aborted ones', () => {
    const b = inStep();
    const counts: number[] = [];
    for (const outcome of ['failed', 'interrupted', 'succeeded', 'aborted', 'failed'] as const) {
      attempt(b, outcome);
      counts.push(fold(b.events).modelResponses);
    }
    expect(counts).toEqual([1, 1, 2, 2, 3]);
  });

  it('tracks the open attempt, the last prepared request, steps and started calls of the open turn', () => {
    const b = inStep();
    b.startAttempt();
    let p = fold(b.events);
    expect(p.lastPrepared).toEqual({ digest: `sha256-${b.step}`, bytes: 400 });
    expect(p.openAttempt).toEqual({ id: b.attempt, index: 1, requestDigest: `sha256-${b.step}` });
    b.push('attempt/end', { outcome: 'succeeded', error: null, usage: usage(1, 1), backoffMs: null, latencyMs: 1 }, { turn: b.turn, step: b.step, attempt: b.attempt });
    const [call] = acceptCalls(b, ['read_file']);
    b.push('tool/start', { name: 'read_file', input: {}, effects: 'none', idempotencyKey: 'k', rerun: false }, inCall(b, call!));
    // a rerun after recovery is the same call, not another
    b.push('tool/start', { name: 'read_file', input: {}, effects: 'none', idempotencyKey: 'k', rerun: true }, inCall(b, call!));
    p = fold(b.events);
    expect(p.openAttempt).toBeNull();
    expect(p.pending.calls[0]!.started).toBe(true);
    expect(p.openTurn).toMatchObject({ steps: 1, toolCalls: 1 });
    b.push('tool/result', { ok: true, output: 'x', error: null, durationMs: 1 }, inCall(b, call!));
    b.endStep('tool_calls', 1).startStep(2);
    expect(fold(b.events).openTurn).toMatchObject({ steps: 2, toolCalls: 1 });
  });

  it('keeps inbox states: pending when received, reserved (content and request dropped) once a turn claims it', () => {
    const b = new LogBuilder();
    b.push('inbox/received', { messageId: 'msg_1', kind: 'user_message', from: 'cli', content: 'first', request: REQUEST });
    b.push('inbox/received', { messageId: 'msg_2', kind: 'follow_up', from: 'cli', content: 'second', request: null });
    let p = fold(b.events);
    expect(p.inbox).toEqual({
      msg_1: { state: 'pending', kind: 'user_message', content: 'first', request: REQUEST },
      msg_2: { state: 'pending', kind: 'follow_up', content: 'second', request: null },
    });
    b.startTurn('msg_1');
    p = fold(b.events);
    expect(p.inbox.msg_1).toEqual({ state: 'reserved', kind: 'user_message', content: '', request: null });
    expect(p.inbox.msg_2!.state).toBe('pending');
    expect(p.unsent).toEqual(['msg_1']);
    expect(p.openTurn!.settings).toEqual(p.lastSettings);
  });

  it('records the last turn and closes every open scope at turn/end', () => {
    const b = inStep();
    b.startAttempt();
    b.push('turn/end', { outcome: 'stopped', reason: 'deadline', answer: null, steps: 1, toolCalls: 0, usage: usage(0, 0) }, { turn: b.turn });
    const turnId = b.turn;
    const p = fold(b.events);
    expect(p.lastTurn).toEqual({ id: turnId, outcome: 'stopped', reason: 'deadline', answer: null });
    expect(p.turns).toBe(1);
    expect(p.openTurn).toBeNull();
    expect(p.openStep).toBeNull();
    expect(p.openAttempt).toBeNull();
    // the settings outlive the turn: a follow-up without a request runs with them
    expect(p.lastSettings).not.toBeNull();

    b.turn = undefined;
    b.receive('msg_2').startTurn('msg_2').startStep(1).answer('ok').endStep('final').endTurn('completed', 'ok');
    expect(fold(b.events)).toMatchObject({ turns: 2, lastTurn: { id: b.events.at(-1)!.turn, outcome: 'completed', answer: 'ok' } });
  });

  it('follows seq and the highest epoch', () => {
    const b = inStep();
    b.epoch = 3;
    b.startAttempt();
    b.epoch = 2;
    b.push('recovery/started', { fromSeq: 1, reason: 'r' });
    const p = fold(b.events);
    expect(p.seq).toBe(b.events.length);
    expect(p.epoch).toBe(3);
  });

  it('is deterministic and incremental: a JSON snapshot folded on equals a full fold', () => {
    const b = attempt(inStep(), 'succeeded');
    const [call] = acceptCalls(b, ['read_file']);
    b.push('tool/start', { name: 'read_file', input: {}, effects: 'none', idempotencyKey: 'k', rerun: false }, inCall(b, call!));
    b.push('tool/result', { ok: true, output: 'x', error: null, durationMs: 1 }, inCall(b, call!));
    b.endStep('tool_calls', 1).startStep(2).answer('done').endStep('final').endTurn();
    const full = fold(b.events);
    expect(fold(b.events)).toEqual(full);
    for (const cut of [1, 5, 9, 12, b.events.length - 1]) {
      const snap = JSON.parse(JSON.stringify(fold(b.events.slice(0, cut)))) as Projection;
      expect(fold(b.events.slice(cut), snap)).toEqual(full);
    }
  });
});

describe('approvalById and questionById', () => {
  // the records are plain objects, also as a snapshot decodes them: a lookup by an ID someone gave
  // must not find what every object inherits
  const inherited = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'];

  it('find a record by its own ID, and nothing by a name every object has', () => {
    const p = emptyProjection('agt_x');
    const approval = { callId: 'call_1', tool: 'shell', toolVersion: '1', planDigest: 'sha256:a', scope: [], expiresAt: 1, state: 'pending' } as unknown as NonNullable<Projection['approvals']>[string];
    const question = { callId: 'call_2', question: 'which?', options: [], allowFreeText: true, sensitive: false, expiresAt: 1, state: 'pending' } as unknown as NonNullable<Projection['questions']>[string];
    p.approvals = { apr_1: approval };
    p.questions = { q_1: question };
    // as a snapshot gives them back: decoded plain objects
    const restored = JSON.parse(JSON.stringify(p)) as Projection;
    for (const proj of [p, restored]) {
      expect(approvalById(proj, 'apr_1')).toEqual(approval);
      expect(questionById(proj, 'q_1')).toEqual(question);
      for (const name of inherited) {
        expect(approvalById(proj, name), name).toBeUndefined();
        expect(questionById(proj, name), name).toBeUndefined();
      }
    }
    expect(approvalById(emptyProjection('agt_y'), 'apr_1')).toBeUndefined();
  });
});
