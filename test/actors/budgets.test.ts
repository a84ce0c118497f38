// Budgets that cannot be overspent (issue 17, part 4) and the model's stop decision (part 5),
// through a real agent actor on the scripted model: every budget fact is read back from the log.
import { describe, expect, it } from 'vitest';
import { stopInAnswer } from '../../src/actors/effects/stop-decision.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, ofType, only } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

function reserved(log: ActorEvent[], kind: 'attempt' | 'tool_calls') {
  return ofType(log, 'budget/reserved').filter((e) => e.data.kind === kind);
}

/** Each reservation of the log is settled exactly once. */
function expectSettledOnce(log: ActorEvent[]): void {
  const settled = ofType(log, 'budget/settled').map((e) => e.data.reservationId).sort();
  expect(settled).toEqual(ofType(log, 'budget/reserved').map((e) => e.data.reservationId).sort());
}

describe('the tool budget', () => {
  it('32 parallel calls against maxToolCalls 10: a reservation of 10 before dispatch, exactly 10 run, 22 are observations saying why', async () => {
    const calls = Array.from({ length: 32 }, (_, i) => ({ name: 'list_dir', arguments: { path: i % 2 === 0 ? 'src' : '.' } }));
    const rt = await rts.open({ script: [{ tool_calls: calls }, { content: 'never asked for' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'list everything', turnRequest(world.ws, { maxToolCalls: 10 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'tool_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const [reservation] = reserved(log, 'tool_calls');
    expect(reservation!.data).toMatchObject({ scope: 'turn', kind: 'tool_calls', calls: 10 });
    // reserved before any call is dispatched: it precedes every tool/call and tool/start
    expect(reservation!.seq).toBeLessThan(ofType(log, 'tool/call')[0]!.seq);
    expect(ofType(log, 'tool/start')).toHaveLength(10);
    expect(ofType(log, 'tool/result')).toHaveLength(10);
    const cancelled = ofType(log, 'tool/cancelled');
    expect(cancelled).toHaveLength(22);
    for (const c of cancelled) {
      expect(c.data).toMatchObject({ started: false, confirmed: true });
      expect(c.data.reason).toMatch(/^tool_budget: not run\. The turn may start 10 tool calls in all \(--max-tool-calls 10\)/);
    }
    // the ones that ran are the first 10 in the model's order
    const byCall = new Map(ofType(log, 'tool/call').map((e) => [e.call, e.data.index]));
    expect(ofType(log, 'tool/start').map((e) => byCall.get(e.call)).sort((a, b) => a! - b!)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(only(log, 'budget/settled').data).toMatchObject({ reservationId: reservation!.data.reservationId, calls: 10, outcome: 'charged' });
    // the model reads all 32 observations, the 22 cancelled ones saying why
    const history = actor.projection.history.filter((h) => h.role === 'tool');
    expect(history).toHaveLength(32);
    expect(history.filter((h) => h.content.startsWith('Cancelled: tool_budget: not run.'))).toHaveLength(22);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('token and cost budgets', () => {
  const readA: ScriptResponse = { tool_calls: [{ name: 'read_file', arguments: { path: 'src/a.txt' } }], usage: { input_tokens: 4800, output_tokens: 10 } };

  it('reserves each attempt\'s worst case before it is sent and stops before the attempt that could pass --max-tokens', async () => {
    const rt = await rts.open({ script: [readA, { content: 'never sent' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'read a.txt', turnRequest(world.ws, { maxTokens: 5000, maxOutputTokens: 100, tools: ['read_file'] }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'token_budget', answer: null });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const [r] = reserved(log, 'attempt');
    const start = only(log, 'attempt/start');
    // the worst case is in the commit that opens the attempt, before it
    expect(r!.seq).toBe(start.seq - 1);
    expect(r!.data).toMatchObject({ scope: 'turn', kind: 'attempt', attemptId: start.attempt, outputTokens: 100 });
    expect(r!.data.tokens).toBeGreaterThan(100);
    expect(r!.data.tokens).toBeLessThanOrEqual(5000);
    // settled with the actual usage, in the attempt/end commit
    const settled = only(log, 'budget/settled');
    expect(settled.data).toMatchObject({ reservationId: r!.data.reservationId, tokens: 4810, outcome: 'charged' });
    expect(settled.seq).toBe(only(log, 'attempt/end').seq + 1);
    // the second step's worst case did not fit the 190 tokens left: it was never sent
    expect(ofType(log, 'step/start')).toHaveLength(2);
    expect(ofType(log, 'step/end').map((e) => [e.data.outcome, e.data.reason])).toEqual([['tool_calls', null], ['stopped', 'token_budget']]);
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'stopped', reason: 'token_budget' });
    expectSettledOnce(log);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('stops before the attempt that could pass --max-cost, at the model\'s price', async () => {
    const rt = await rts.open({ script: [readA, { content: 'never sent' }] });
    // $1 per million tokens in and out: 4810 tokens charged cost $0.00481
    const sup = rt.supervisor({ extra: { pricing: () => ({ inputPerMTok: 1, outputPerMTok: 1 }) } });
    const { actor, ended } = await runTurn(sup, 'read a.txt', turnRequest(world.ws, { maxCostUsd: 0.005, maxOutputTokens: 100, tools: ['read_file'] }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'cost_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const [r] = reserved(log, 'attempt');
    expect(r!.data.costUsd).toBe(r!.data.tokens / 1_000_000);
    expect(only(log, 'budget/settled').data).toMatchObject({ tokens: 4810, costUsd: 0.00481, outcome: 'charged' });
    expect(ofType(log, 'attempt/start')).toHaveLength(1);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('cuts a stream that runs past its reservation: the partial output is not accepted, no tool call is taken, its usage is settled', async () => {
    const long = 'word '.repeat(120);
    const rt = await rts.open({ script: [{ content: long, tool_calls: [{ name: 'read_file', arguments: { path: 'src/a.txt' } }] }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'talk', turnRequest(world.ws, { maxTokens: 100_000, maxOutputTokens: 10 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'token_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = only(log, 'attempt/end');
    expect(end.data).toMatchObject({ outcome: 'failed', error: { class: 'token_budget', retryable: false } });
    expect(end.data.error!.message).toMatch(/cut; its partial output is not accepted/);
    expect(ofType(log, 'attempt/start')).toHaveLength(1);
    expect(ofType(log, 'assistant/accepted')).toHaveLength(0);
    expect(ofType(log, 'tool/call')).toHaveLength(0);
    const settled = only(log, 'budget/settled');
    expect(settled.data.outcome).toBe('charged');
    expect(settled.data.tokens).toBe(end.data.usage.inputTokens + end.data.usage.outputTokens);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a cost budget for a model with no known price sends nothing (run refuses it before it starts)', async () => {
    const rt = await rts.open({ script: [{ content: 'never sent' }] });
    const sup = rt.supervisor({ extra: { pricing: () => null } });
    const { actor, ended } = await runTurn(sup, 'x', turnRequest(world.ws, { maxCostUsd: 1 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'cost_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/start')).toHaveLength(0);
    expect(ofType(log, 'budget/reserved')).toHaveLength(0);
  });

  it('reserves nothing without a token or cost budget', async () => {
    const rt = await rts.open({ script: [readA, { content: 'done' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'read a.txt', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'budget/reserved')).toHaveLength(0);
  });
});

describe('the stop decision', () => {
  it('the stop tool ends the turn stopped with the model\'s reason', async () => {
    const rt = await rts.open({
      script: [
        { tool_calls: [{ name: 'stop', arguments: { reason: 'INSUFFICIENT_EVIDENCE: no logs of the failure in the workspace' } }] },
        { content: 'never asked for' },
      ],
    });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'why did prod fail?', turnRequest(world.ws));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'INSUFFICIENT_EVIDENCE: no logs of the failure in the workspace', answer: null });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const decided = only(log, 'stop/decided');
    expect(decided.data).toEqual({ reason: 'INSUFFICIENT_EVIDENCE: no logs of the failure in the workspace', via: 'tool' });
    // the decision and the call's result are one commit
    expect(only(log, 'tool/result').seq).toBe(decided.seq + 1);
    expect(ofType(log, 'step/start')).toHaveLength(1);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a {"kind": "stop"} final answer under an output schema ends the turn stopped, though it does not match the schema', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };
    const models = captureModels([{ content: '{"kind": "stop", "reason": "INSUFFICIENT_EVIDENCE"}' }]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'why?', turnRequest(world.ws, { outputSchema: schema }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'INSUFFICIENT_EVIDENCE', answer: null });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'stop/decided').data).toEqual({ reason: 'INSUFFICIENT_EVIDENCE', via: 'answer' });
    expect(ofType(log, 'assistant/rejected')).toHaveLength(0);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('reads a stop answer as the schema check reads answers: JSON, in a code fence or not, with a reason', () => {
    expect(stopInAnswer('{"kind":"stop","reason":"NO_ACCESS"}')).toBe('NO_ACCESS');
    expect(stopInAnswer('```json\n{"kind": "stop", "reason": " NO_ACCESS "}\n```')).toBe('NO_ACCESS');
    expect(stopInAnswer('{"kind":"stop","reason":""}')).toBeNull();
    expect(stopInAnswer('{"kind":"answer","reason":"x"}')).toBeNull();
    expect(stopInAnswer('stop: no access')).toBeNull();
    expect(stopInAnswer('[{"kind":"stop","reason":"x"}]')).toBeNull();
    expect(stopInAnswer(null)).toBeNull();
  });

  it('without an output schema, a stop-shaped answer is an answer', async () => {
    const rt = await rts.open({ script: [{ content: '{"kind": "stop", "reason": "x"}' }] });
    const sup = rt.supervisor();
    const { ended } = await runTurn(sup, 'why?', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
  });
});
