// A goal's token and cost budgets as a reservation scope of their own (issue 17, part 4): each
// attempt reserves its worst case against the goal too, across the goal's turns, and the attempt
// that does not fit is never sent. Every fact is read back from the log, through a real agent actor.
import { describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { goalReservationId } from '../../src/actors/goals/budget.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, GoalRequest } from '../../src/protocol/events.js';
import { continuationPending } from '../../src/store/projection.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, only, startTurn } from './harness.js';

const world = actorTestWorld();

const write = (path: string, input: number): ScriptResponse => ({ tool_calls: [{ name: 'write_file', arguments: { path, content: `${path}\n` } }], usage: { input_tokens: input, output_tokens: 10 } });
const answer = (content: string, input: number): ScriptResponse => ({ content, usage: { input_tokens: input, output_tokens: 5 } });

function goal(budget: GoalRequest['budget']): GoalRequest {
  return { objective: 'write the notes', budget, maxIdleTurns: 5 };
}

/** Waits until the agent's goal work is over: no turn open, none owed, none being claimed. */
async function settled(actor: AgentActor): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const p = actor.projection;
    if (p.turns > 0 && p.openTurn === null && !continuationPending(p) && !actor.machines.isClaiming()) {
      await actor.idle();
      if (actor.projection.openTurn === null && !actor.machines.isClaiming()) return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the goal did not settle');
}

/** Each reservation of the log is settled exactly once. */
function expectSettledOnce(log: ActorEvent[]): void {
  const settled = ofType(log, 'budget/settled').map((e) => e.data.reservationId).sort();
  expect(settled).toEqual(ofType(log, 'budget/reserved').map((e) => e.data.reservationId).sort());
}

function goalReservations(log: ActorEvent[]) {
  return ofType(log, 'budget/reserved').filter((e) => e.data.scope === 'goal');
}

describe('the goal budget as a reservation scope', () => {
  it('reserves each attempt against the goal and the turn in one commit, and stops before the attempt that does not fit what the goal has left', async () => {
    const rt = await world.rts.open({ script: [write('a.md', 4800), answer('never sent', 10)] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'write a', turnRequest(world.ws, { goal: goal({ tokens: 5000 }), maxTokens: 100_000, maxOutputTokens: 100 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'goal_token_budget', answer: null });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const start = only(log, 'attempt/start');
    const [turnR, goalR] = ofType(log, 'budget/reserved');
    // both worst cases precede the attempt/start they were committed with
    expect(turnR!.data).toMatchObject({ scope: 'turn', kind: 'attempt', attemptId: start.attempt, outputTokens: 100 });
    expect(goalR!.data).toMatchObject({ scope: 'goal', kind: 'attempt', attemptId: start.attempt, goalId: actor.projection.goal!.id, tokens: turnR!.data.tokens });
    expect(goalR!.data.reservationId).toBe(goalReservationId(actor.projection.goal!.id, start.attempt!));
    expect([turnR!.seq, goalR!.seq]).toEqual([start.seq - 2, start.seq - 1]);
    // both settled with the attempt's usage, in the commit of its attempt/end
    const end = only(log, 'attempt/end');
    expect(ofType(log, 'budget/settled').map((e) => [e.seq, e.data.reservationId, e.data.tokens, e.data.outcome])).toEqual([
      [end.seq + 1, turnR!.data.reservationId, 4810, 'charged'],
      [end.seq + 2, goalR!.data.reservationId, 4810, 'charged'],
    ]);
    // the second step's worst case did not fit the 190 tokens the goal has left: never sent
    expect(ofType(log, 'step/end').map((e) => [e.data.outcome, e.data.reason])).toEqual([['tool_calls', null], ['stopped', 'goal_token_budget']]);
    // the goal is blocked on its budget by the runtime, at its next revision, before the spend passed it
    expect(ofType(log, 'goal/updated').map((u) => [u.data.revision, u.data.phase, u.data.reason, u.data.by])).toEqual([[1, 'blocked', 'budget:tokens', 'runtime']]);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'budget:tokens', usage: { tokens: 4810 } });
    expect(only(log, 'turn/end').data.goalContinues).toBeUndefined();
    expectSettledOnce(log);
    const violations = verifyLog(log, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });

  it('counts the goal budget across its turns: a continuation turn stops before the attempt that would pass what the earlier turns left', async () => {
    const script = [write('n1.md', 2000), answer('first', 2000), write('n2.md', 2000), answer('never sent', 2000)];
    const rt = await world.rts.open({ script });
    const sup = rt.supervisor();
    // each attempt's worst case is about 4200 tokens (the prompt with every built-in tool's schema,
    // plus the 100-token cap); the first turn spends 4015, the second's first attempt 2010: 6025
    // spent leaves too little for the next
    const { actor } = await startTurn(sup, 'write notes', turnRequest(world.ws, { goal: goal({ tokens: 9000 }), maxOutputTokens: 100 }));
    await settled(actor);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation']);
    const ends = ofType(log, 'turn/end');
    expect(ends.map((e) => [e.data.outcome, e.data.reason])).toEqual([['completed', null], ['stopped', 'goal_token_budget']]);
    // the second turn alone spent 2010 of 9000: only the first turn's spend makes its next attempt not fit
    const secondTurn = ofType(log, 'attempt/end').filter((e) => e.turn === ends[1]!.turn);
    expect(secondTurn.map((e) => e.data.usage.inputTokens + e.data.usage.outputTokens)).toEqual([2010]);
    // every goal reservation fitted what the goal had spent before it, across turns
    const reservations = goalReservations(log);
    expect(reservations).toHaveLength(3);
    for (const r of reservations) {
      const spent = ofType(log, 'attempt/end').filter((e) => e.seq < r.seq).reduce((n, e) => n + e.data.usage.inputTokens + e.data.usage.outputTokens, 0);
      expect(spent + r.data.tokens).toBeLessThanOrEqual(9000);
    }
    expect(ofType(log, 'attempt/start')).toHaveLength(3);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'budget:tokens', revision: 1, usage: { tokens: 6025 } });
    expectSettledOnce(log);
    const violations = verifyLog(log, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });

  it('a goal cost budget stops before the attempt it cannot pay for, at the model\'s price, and blocks the goal on its cost', async () => {
    const rt = await world.rts.open({ script: [write('a.md', 4800), answer('never sent', 10)] });
    // $1 per million tokens in and out: the first attempt's 4810 tokens cost $0.00481 of $0.005
    const sup = rt.supervisor({ extra: { pricing: () => ({ inputPerMTok: 1, outputPerMTok: 1 }) } });
    const { actor, ended } = await runTurn(sup, 'write a', turnRequest(world.ws, { goal: goal({ costUsd: 0.005 }), maxOutputTokens: 100 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'goal_cost_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // no turn budget: the goal's is the only reservation
    const [r] = ofType(log, 'budget/reserved');
    expect(r!.data).toMatchObject({ scope: 'goal', costUsd: r!.data.tokens / 1_000_000 });
    expect(only(log, 'budget/settled').data).toMatchObject({ tokens: 4810, costUsd: 0.00481, outcome: 'charged' });
    expect(ofType(log, 'attempt/start')).toHaveLength(1);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'budget:cost' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a goal cost budget for a model with no known price sends nothing (run refuses it before it starts)', async () => {
    const rt = await world.rts.open({ script: [answer('never sent', 10)] });
    const sup = rt.supervisor({ extra: { pricing: () => null } });
    const { actor, ended } = await runTurn(sup, 'x', turnRequest(world.ws, { goal: goal({ costUsd: 1 }) }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'goal_cost_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/start')).toHaveLength(0);
    expect(ofType(log, 'budget/reserved')).toHaveLength(0);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'budget:cost' });
  });

  it('cuts a stream that runs past the goal\'s reservation, stops the turn on the goal\'s budget and settles the usage once', async () => {
    const rt = await world.rts.open({ script: [{ content: 'word '.repeat(120) }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'talk', turnRequest(world.ws, { goal: goal({ tokens: 100_000 }), maxOutputTokens: 10 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'goal_token_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = only(log, 'attempt/end');
    expect(end.data).toMatchObject({ outcome: 'failed', error: { class: 'goal_token_budget', retryable: false } });
    expect(end.data.error!.message).toMatch(/the goal's budget \(--goal-tokens\) had left for it, and was cut/);
    expect(ofType(log, 'assistant/accepted')).toHaveLength(0);
    const settled = only(log, 'budget/settled');
    expect(settled.data).toMatchObject({ outcome: 'charged', tokens: end.data.usage.inputTokens + end.data.usage.outputTokens });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('reserves nothing for a goal with only a seconds budget', async () => {
    const rt = await world.rts.open({ script: [answer('done', 10)] });
    const sup = rt.supervisor();
    const { actor } = await runTurn(sup, 'x', turnRequest(world.ws, { goal: { ...goal({ seconds: 600 }), maxIdleTurns: 1 } }));
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/start').length).toBeGreaterThan(0);
    expect(ofType(log, 'budget/reserved')).toHaveLength(0);
  });
});
