import { describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { EventDraft, GoalRequest } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { continuationPending } from '../../src/store/projection.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn } from './harness.js';
import { formatViolations } from '../../src/verify/verify.js';
import { resolveSettings } from '../../src/actors/agent/turn-settings.js';

const world = actorTestWorld();

const GOAL: GoalRequest = { objective: 'write the three notes', budget: {}, maxIdleTurns: 2 };

const write = (path: string): ScriptResponse => ({ tool_calls: [{ name: 'write_file', arguments: { path, content: `${path}\n` } }], usage: { input_tokens: 100, output_tokens: 10 } });
const answer = (content: string): ScriptResponse => ({ content, usage: { input_tokens: 50, output_tokens: 5 } });
const complete = (revision: number): ScriptResponse => ({
  tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'all three notes are written', expected_revision: revision } }],
  usage: { input_tokens: 80, output_tokens: 8 },
});

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

async function run(script: ScriptResponse[], goal: GoalRequest = GOAL) {
  const rt = await world.rts.open({ script });
  const sup = rt.supervisor();
  const { actor } = await startTurn(sup, 'write notes', turnRequest(world.ws, { goal }));
  await settled(actor);
  return { actor, log: await readLog(sup, actor.rootId, actor.actorId) };
}

describe('the goal tools', () => {
  const all = ['read_file', 'write_file', 'update_plan', 'get_goal', 'update_goal'];
  it('are seen only by a turn that starts a goal, and then even when the request names its tools', () => {
    expect(resolveSettings(turnRequest('/ws'), null, 0, all).tools).toEqual(['read_file', 'write_file', 'update_plan']);
    expect(resolveSettings(turnRequest('/ws', { goal: GOAL }), null, 0, all).tools).toEqual(all);
    expect(resolveSettings(turnRequest('/ws', { goal: GOAL, tools: ['write_file'] }), null, 0, all).tools).toEqual(['write_file', 'get_goal', 'update_goal']);
  });
});

describe('goals and continuation', () => {
  it('continues over three turns while each makes progress; the third completes the goal', async () => {
    const { actor, log } = await run([
      write('n1.md'), answer('first note written'),
      write('n2.md'), answer('second note written'),
      write('n3.md'), complete(0), answer('all notes written'),
    ]);
    const starts = ofType(log, 'turn/start');
    expect(starts.map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation', 'goal_continuation']);
    expect(ofType(log, 'turn/end').map((e) => e.data.goalContinues ?? false)).toEqual([true, true, false]);
    // the continuation's message says what the goal is, in the commit of its turn/start
    const continued = ofType(log, 'user/message').filter((m) => m.turn === starts[1]!.turn);
    expect(continued[0]!.data.content).toContain('write the three notes');
    expect(continued[0]!.seq).toBe(starts[1]!.seq + 1);
    const updates = ofType(log, 'goal/updated');
    expect(updates.map((u) => [u.data.revision, u.data.phase, u.data.by, u.data.requested ?? null])).toEqual([
      [1, 'active', 'model', 'complete'],
      [2, 'complete', 'runtime', null],
    ]);
    const g = actor.projection.goal!;
    expect(g).toMatchObject({ phase: 'complete', revision: 2, reason: 'all three notes are written' });
    // every attempt's tokens, summed
    expect(g.usage.tokens).toBe(3 * 110 + 3 * 55 + 88);
    expect(g.usage.seconds).toBeGreaterThan(0);
    // the goal tools were there for the model to see
    expect(starts[0]!.data.settings.tools).toEqual(expect.arrayContaining(['get_goal', 'update_goal']));
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('blocks the goal with no_progress after two turns in a row without progress', async () => {
    const { actor, log } = await run([answer('thinking'), answer('still thinking'), answer('unused')]);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation']);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'no_progress', revision: 1 });
    const blocked = ofType(log, 'goal/updated')[0]!;
    const end = ofType(log, 'turn/end')[1]!;
    // decided with the turn's end: one commit, the update first
    expect(blocked.seq).toBe(end.seq - 1);
    expect(end.data.goalContinues).toBeUndefined();
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('refuses update_goal with a stale revision as a tool error the model sees, and changes nothing', async () => {
    const { actor, log } = await run([complete(3), answer('ok'), answer('ok again')]);
    const result = ofType(log, 'tool/result')[0]!;
    expect(result.data.ok).toBe(false);
    expect(result.data.error).toMatchObject({ code: 'goal.stale_revision', retryable: false });
    expect(result.data.output).toContain('expected_revision 3, but the goal is at revision 0');
    expect(actor.projection.history.find((h) => h.role === 'tool')!.content).toBe(result.data.output);
    expect(ofType(log, 'goal/updated').map((u) => u.data.reason)).toEqual(['no_progress']);
  });

  it('blocks the goal when its token budget is spent, naming the budget', async () => {
    const { actor, log } = await run([write('big.md'), answer('wrote it'), answer('unused')], { ...GOAL, budget: { tokens: 100 } });
    expect(ofType(log, 'turn/start')).toHaveLength(1);
    expect(actor.projection.goal).toMatchObject({ phase: 'blocked', reason: 'budget:tokens' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a crash between a turn\'s end that owes a continuation and the continuation\'s start continues exactly once', async () => {
    const script = [write('n1.md'), answer('first'), write('n2.md'), answer('second'), write('n3.md'), complete(0), answer('all done')];
    const { log } = await run(script);
    // the same log cut right after the first turn's end: what a crash before the claim's commit leaves
    const cut = log.findIndex((e) => e.type === 'turn/end' && e.data.goalContinues === true);
    const prefix = log.slice(0, cut + 1);
    const rt = await world.rts.open({ script });
    const sup = rt.supervisor();
    const actorId = newId('agent');
    await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'cut', workspace: world.ws, labels: {} });
    await sup.stop();
    const writer = world.ports.logs.writer({ rootId: actorId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
    await writer.commit(prefix.map((e) => ({ type: e.type, data: e.data, turn: e.turn, step: e.step, attempt: e.attempt, call: e.call, at: e.at }) as EventDraft));

    const again = rt.supervisor();
    const { actor, recovered } = await again.hydrate(actorId);
    expect(recovered).toBe(true);
    await settled(actor);
    const after = await readLog(again, actorId, actorId);
    const tail = after.slice(prefix.length);
    expect(tail.slice(0, 5).map((e) => e.type)).toEqual(['actor/killed', 'actor/rehydrated', 'recovery/started', 'recovery/continuation', 'turn/start']);
    expect(ofType(after, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation', 'goal_continuation']);
    expect(ofType(tail, 'recovery/continuation')).toHaveLength(1);
    expect(actor.projection.goal).toMatchObject({ phase: 'complete', revision: 2 });
    const violations = verifyLog(after, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });
});
