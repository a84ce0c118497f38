import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, type SnapshotFrom } from 'xstate';
import { agentMachine, type AgentEvent } from '../../src/machines/agent.machine.js';
import { CompiledMachine } from '../../src/machines/compiled-machine.js';
import type { ActorEvent, TurnOutcome } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent, pendingApprovals, pendingQuestions } from '../../src/store/projection.js';
import { effects, ev, feed, send, usage } from './events.js';

type Snap = SnapshotFrom<typeof agentMachine>;

const SETTINGS = {
  model: 'scripted',
  baseUrl: null,
  workspace: '/tmp/ws',
  tools: [],
  instructions: '',
  budgets: { maxSteps: null, maxToolCalls: null, deadlineAt: null },
  maxAttempts: 3,
};

function received(messageId: string, kind = 'user_message') {
  return ev('inbox/received', { messageId, kind, from: 'user', content: `hello ${messageId}`, request: null });
}
function turnStart(messageIds: string[], source: 'user_message' | 'follow_up' | 'recovery_continuation' = 'user_message') {
  return ev('turn/start', { source, messageIds, settings: SETTINGS }, { turn: 'turn-x' });
}
function turnEnd(outcome: TurnOutcome = 'completed', goalContinues?: true) {
  return ev(
    'turn/end',
    { outcome, reason: null, answer: outcome === 'completed' ? 'done' : null, steps: 1, toolCalls: 0, usage: usage(1, 1), ...(goalContinues ? { goalContinues } : {}) },
    { turn: 'turn-x' },
  );
}

function start(): Snap {
  return initialTransition(agentMachine, { actorId: 'agent-1' })[0];
}
function fold(...events: AgentEvent[]): Snap {
  return feed(agentMachine, start(), events);
}
function step(s: Snap, e: AgentEvent) {
  return send(agentMachine, s, e);
}

describe('agent machine', () => {
  it('starts idle with empty context and no effects', () => {
    const [s, actions] = initialTransition(agentMachine, { actorId: 'agent-1' });
    expect(s.value).toBe('idle');
    expect(s.context).toEqual({
      actorId: 'agent-1',
      turns: 0,
      queued: [],
      claiming: [],
      claimSource: null,
      lastOutcome: null,
    });
    expect(effects(actions)).toEqual([]);
  });

  describe('idle', () => {
    it('claims a user message: claiming + startTurn naming the message', () => {
      const [s, fx] = step(start(), received('m1'));
      expect(s.value).toBe('claiming');
      expect(s.context.claiming).toEqual(['m1']);
      expect(s.context.claimSource).toBe('user_message');
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['m1'], source: 'user_message' } }]);
    });

    it('claims a follow_up message with source follow_up', () => {
      const [s, fx] = step(start(), received('f1', 'follow_up'));
      expect(s.value).toBe('claiming');
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['f1'], source: 'follow_up' } }]);
    });

    it('claims a steer: it wakes the agent, in a turn of its own', () => {
      const [s, fx] = step(start(), received('s1', 'steer'));
      expect(s.value).toBe('claiming');
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['s1'], source: 'user_message' } }]);
    });

    it('claims a job notice: it wakes the agent, in a turn of its own', () => {
      const [s, fx] = step(start(), received('j1', 'job_notice'));
      expect(s.value).toBe('claiming');
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['j1'], source: 'user_message' } }]);
    });

    it.each(['inject', 'notification', ''])('ignores an inbox message of kind %j', (kind) => {
      const s0 = start();
      const [s, fx] = step(s0, received('n1', kind));
      expect(s.value).toBe('idle');
      expect(s.context).toEqual(s0.context);
      expect(fx).toEqual([]);
    });

    it('enters turn on a turn/start it did not claim (e.g. a recovery continuation)', () => {
      const [s, fx] = step(start(), turnStart([], 'recovery_continuation'));
      expect(s.value).toEqual({ turn: 'running' });
      expect(fx).toEqual([]);
    });

    it('does nothing on recover', () => {
      const [s, fx] = step(start(), { type: 'recover' });
      expect(s.value).toBe('idle');
      expect(fx).toEqual([]);
    });
  });

  describe('claiming', () => {
    it('enters turn on turn/start and clears the claim', () => {
      const [s, fx] = step(fold(received('m1')), turnStart(['m1']));
      expect(s.value).toEqual({ turn: 'running' });
      expect(s.context.claiming).toEqual([]);
      expect(s.context.claimSource).toBeNull();
      expect(fx).toEqual([]);
    });

    it('re-emits startTurn on recover, with the same messages and source', () => {
      const s0 = fold(received('m1'));
      const [s, fx] = step(s0, { type: 'recover' });
      expect(s.value).toBe('claiming');
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['m1'], source: 'user_message' } }]);
      // recovering twice asks again: the runtime dedupes by message id
      expect(step(s, { type: 'recover' })[1]).toEqual(fx);
    });

    it('re-emits a follow-up claim as a follow-up on recover', () => {
      const s0 = fold(received('m1'), turnStart(['m1']), received('f1', 'follow_up'), turnEnd());
      expect(s0.value).toBe('claiming');
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'startTurn', params: { messageIds: ['f1'], source: 'follow_up' } }]);
    });

    it('queues a message that arrives before the claimed turn/start, rather than dropping it', () => {
      const s0 = fold(received('m1'), turnStart(['m1']), received('f1', 'follow_up'), turnEnd());
      const [s, fx] = step(s0, received('f2', 'follow_up'));
      expect(s.value).toBe('claiming');
      expect(s.context.queued).toEqual(['f2']);
      expect(fx).toEqual([]);
    });

    it('ignores non-starting kinds', () => {
      const [s, fx] = step(fold(received('m1')), received('j1', 'job_notice'));
      expect(s.context.queued).toEqual([]);
      expect(fx).toEqual([]);
    });
  });

  describe('turn', () => {
    const inTurn = () => fold(received('m1'), turnStart(['m1']));

    it('ends into idle with turnEnded when nothing is queued', () => {
      const [s, fx] = step(inTurn(), turnEnd('completed'));
      expect(s.value).toBe('idle');
      expect(s.context.turns).toBe(1);
      expect(s.context.lastOutcome).toBe('completed');
      expect(fx).toEqual([{ type: 'turnEnded', params: { outcome: 'completed' } }]);
    });

    it.each<TurnOutcome>(['stopped', 'failed', 'cancelled'])('reports outcome %s', (outcome) => {
      const [s, fx] = step(inTurn(), turnEnd(outcome));
      expect(s.context.lastOutcome).toBe(outcome);
      expect(fx).toEqual([{ type: 'turnEnded', params: { outcome } }]);
    });

    it('queues a follow_up received during the turn without effects', () => {
      const [s, fx] = step(inTurn(), received('f1', 'follow_up'));
      expect(s.value).toEqual({ turn: 'running' });
      expect(s.context.queued).toEqual(['f1']);
      expect(fx).toEqual([]);
    });

    it('queues a user message received during the turn as a follow-up', () => {
      const s = fold(received('m1'), turnStart(['m1']), received('m2'));
      expect(s.context.queued).toEqual(['m2']);
      const [s2, fx] = step(s, turnEnd());
      expect(s2.value).toBe('claiming');
      expect(fx[1]).toEqual({ type: 'startTurn', params: { messageIds: ['m2'], source: 'follow_up' } });
    });

    it('does not queue non-starting kinds', () => {
      const [s, fx] = step(inTurn(), received('j1', 'job_notice'));
      expect(s.context.queued).toEqual([]);
      expect(fx).toEqual([]);
    });

    it('turn/end with a queued follow_up yields turnEnded then startTurn(follow_up)', () => {
      const s0 = feed(agentMachine, inTurn(), [received('f1', 'follow_up')]);
      const [s, fx] = step(s0, turnEnd('completed'));
      expect(s.value).toBe('claiming');
      expect(s.context).toMatchObject({
        turns: 1,
        lastOutcome: 'completed',
        queued: [],
        claiming: ['f1'],
        claimSource: 'follow_up',
      });
      expect(fx).toEqual([
        { type: 'turnEnded', params: { outcome: 'completed' } },
        { type: 'startTurn', params: { messageIds: ['f1'], source: 'follow_up' } },
      ]);
    });

    it('starts one queued message per turn, in arrival order', () => {
      let s = feed(agentMachine, inTurn(), [received('f1', 'follow_up'), received('f2', 'follow_up')]);
      let fx;
      [s, fx] = step(s, turnEnd());
      expect(fx[1]).toEqual({ type: 'startTurn', params: { messageIds: ['f1'], source: 'follow_up' } });
      expect(s.context.queued).toEqual(['f2']);

      s = feed(agentMachine, s, [turnStart(['f1'], 'follow_up')]);
      expect(s.value).toEqual({ turn: 'running' });
      [s, fx] = step(s, turnEnd('failed'));
      expect(s.value).toBe('claiming');
      expect(fx).toEqual([
        { type: 'turnEnded', params: { outcome: 'failed' } },
        { type: 'startTurn', params: { messageIds: ['f2'], source: 'follow_up' } },
      ]);
      expect(s.context.queued).toEqual([]);

      s = feed(agentMachine, s, [turnStart(['f2'], 'follow_up')]);
      [s, fx] = step(s, turnEnd());
      expect(s.value).toBe('idle');
      expect(s.context.turns).toBe(3);
      expect(fx).toEqual([{ type: 'turnEnded', params: { outcome: 'completed' } }]);
    });

    it('does nothing on recover (the turn machine owns in-turn recovery)', () => {
      const [s, fx] = step(inTurn(), { type: 'recover' });
      expect(s.value).toEqual({ turn: 'running' });
      expect(fx).toEqual([]);
    });

    it('an interrupt from the inbox asks to cancel the turn, queueing nothing', () => {
      const [s, fx] = step(inTurn(), received('i1', 'interrupt'));
      expect(s.value).toEqual({ turn: 'running' });
      expect(s.context.queued).toEqual([]);
      expect(fx).toEqual([{ type: 'interruptTurn', params: { messageId: 'i1', from: 'user' } }]);
    });

    it('a recovery of an interrupted turn asks again; the next turn starts uninterrupted', () => {
      const interrupted = fold(received('m1'), turnStart(['m1']), received('i1', 'interrupt'));
      expect(step(interrupted, { type: 'recover' })[1]).toEqual([{ type: 'interruptTurn', params: { messageId: 'i1', from: 'user' } }]);
      const next = feed(agentMachine, interrupted, [turnEnd('cancelled'), received('m2'), turnStart(['m2'])]);
      expect(next.value).toEqual({ turn: 'running' });
      expect(step(next, { type: 'recover' })[1]).toEqual([]);
    });

    it('an interrupt with no turn open is refused, and cancels nothing', () => {
      const [s, fx] = step(start(), received('i1', 'interrupt'));
      expect(s.value).toBe('idle');
      expect(fx).toEqual([{ type: 'refuseMessage', params: { messageId: 'i1', reason: 'nothing to interrupt: no turn is running' } }]);
    });

    it('an interrupt that lands while a turn is claimed is carried out once its turn/start is seen', () => {
      const claiming = fold(received('m1'), received('i1', 'interrupt'));
      expect(claiming.value).toBe('claiming');
      const [s, fx] = step(claiming, turnStart(['m1']));
      expect(s.value).toEqual({ turn: 'running' });
      expect(fx).toEqual([{ type: 'interruptTurn', params: { messageId: 'i1', from: 'user' } }]);
    });

    it('a question parks the turn in waiting_input; its answer (or expiry) resumes it', () => {
      const q = ev('ask/asked', { questionId: 'q1', question: 'which?', options: [], allowFreeText: true, sensitive: false, expiresAt: 9e12 }, { turn: 'turn-x', step: 's', call: 'c' });
      const waiting = feed(agentMachine, inTurn(), [q]);
      expect(waiting.value).toEqual({ turn: 'waiting_input' });
      // an interrupt still reaches the turn while it waits
      expect(step(waiting, received('i1', 'interrupt'))[1]).toEqual([{ type: 'interruptTurn', params: { messageId: 'i1', from: 'user' } }]);
      const a = ev('ask/answered', { questionId: 'q1', messageId: 'm9', by: 'client:cli', outcome: 'answered', optionId: null, answer: 'x' }, { turn: 'turn-x', step: 's', call: 'c' });
      expect(feed(agentMachine, waiting, [a]).value).toEqual({ turn: 'running' });
      expect(feed(agentMachine, waiting, [turnEnd('cancelled')]).value).toBe('idle');
    });

    it('steers left when a turn ends start the next turn, before any follow-up', () => {
      const s0 = fold(received('m1'), turnStart(['m1']), received('f1', 'follow_up'), received('s1', 'steer'), received('s2', 'steer'));
      const [s, fx] = step(s0, turnEnd());
      expect(s.value).toBe('claiming');
      expect(fx[1]).toEqual({ type: 'startTurn', params: { messageIds: ['s1', 's2'], source: 'user_message' } });
      expect(s.context.queued).toEqual(['f1']);
    });

    it('a steer a step claimed and included does not start another turn; one given back does', () => {
      const stepStart = (ids: string[]) => ev('step/start', { index: 2, maxAttempts: 1, toolBudgetLeft: null, model: 'm', maxOutputTokens: null, messageIds: ids }, { turn: 'turn-x', step: 'st' });
      const prepared = ev('request/prepared', { digest: 'd', bytes: 1, messages: 1, messageIds: ['s1'] }, { turn: 'turn-x', step: 'st' });
      const included = fold(received('m1'), turnStart(['m1']), received('s1', 'steer'), stepStart(['s1']), prepared);
      expect(step(included, turnEnd())[0].value).toBe('idle');
      const back = fold(received('m1'), turnStart(['m1']), received('s1', 'steer'), stepStart(['s1']), ev('recovery/started', { fromSeq: 5, reason: 'r', requeued: ['s1'] }));
      expect(step(back, turnEnd())[1][1]).toEqual({ type: 'startTurn', params: { messageIds: ['s1'], source: 'user_message' } });
    });
  });

  describe('waiting for a person', () => {
    const scope = (call: string) => ({ turn: 'turn-x', step: 'step-1', call });
    const stepStart = () => ev('step/start', { index: 1, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, { turn: 'turn-x', step: 'step-1' });
    const toolCall = (call: string, index: number) =>
      ev('tool/call', { index, providerId: `p-${call}`, name: 'write_file', arguments: '{}', status: 'valid', error: null, effects: 'possible', recovery: 'manual', withinBudget: true }, scope(call));
    const requested = (approvalId: string, call: string) =>
      ev('approval/requested', { approvalId, tool: 'write_file', toolVersion: '1', planDigest: `sha256:${call}`, expiresAt: 9e12 }, scope(call));
    const granted = (approvalId: string, call: string) => ev('approval/granted', { approvalId, by: 'client:cli', messageId: `m-${approvalId}` }, scope(call));
    const denied = (approvalId: string, call: string, by = 'client:cli') => ev('approval/denied', { approvalId, by, reason: 'no' }, scope(call));
    const asked = (questionId: string, call: string) =>
      ev('ask/asked', { questionId, question: 'which?', options: [], allowFreeText: true, sensitive: false, expiresAt: 9e12 }, scope(call));
    const answered = (questionId: string, call: string, outcome: 'answered' | 'expired' | 'cancelled' = 'answered') =>
      ev('ask/answered', { questionId, messageId: null, by: 'client:cli', outcome, optionId: null, answer: 'x' }, scope(call));
    const cancelled = (call: string) => ev('tool/cancelled', { reason: 'interrupted' }, scope(call));
    const stepEnd = () => ev('step/end', { outcome: 'cancelled', reason: 'interrupted', toolCalls: 2 }, { turn: 'turn-x', step: 'step-1' });
    const opening = (): ActorEvent[] => [received('m1'), turnStart(['m1']), stepStart(), toolCall('c1', 0), toolCall('c2', 1)];

    it('a live actor waits in turn.waiting_approval while either of two approvals is open, and runs once both are answered', () => {
      const actor = createActor(agentMachine, { input: { actorId: 'agent-1' } });
      actor.start();
      for (const e of opening()) actor.send(e);
      expect(actor.getSnapshot().value).toEqual({ turn: 'running' });
      actor.send(requested('ap1', 'c1'));
      expect(actor.getSnapshot().value).toEqual({ turn: 'waiting_approval' });
      actor.send(requested('ap2', 'c2'));
      expect(actor.getSnapshot().value).toEqual({ turn: 'waiting_approval' });
      expect(actor.getSnapshot().context.openApprovals).toEqual(['ap1', 'ap2']);
      actor.send(granted('ap1', 'c1'));
      expect(actor.getSnapshot().value).toEqual({ turn: 'waiting_approval' });
      expect(actor.getSnapshot().context.openApprovals).toEqual(['ap2']);
      // an expiry is a denial by the runtime: it closes the approval as a person's answer does
      actor.send(denied('ap2', 'c2', 'expiry'));
      expect(actor.getSnapshot().value).toEqual({ turn: 'running' });
      expect(actor.getSnapshot().context.openApprovals).toEqual([]);
      actor.stop();
    });

    it('asks for no effect while it waits or when the wait ends: the waits are facts the runtime already committed', () => {
      let s = fold(...opening());
      for (const e of [requested('ap1', 'c1'), requested('ap2', 'c2'), granted('ap2', 'c2'), granted('ap1', 'c1')]) {
        const [next, fx] = step(s, e);
        expect(fx).toEqual([]);
        s = next;
      }
      expect(s.value).toEqual({ turn: 'running' });
    });

    it('approvals come first: a question waits behind an open approval, and the last approval closed leaves the question', () => {
      const qFirst = fold(...opening(), asked('q1', 'c1'), requested('ap1', 'c2'));
      expect(qFirst.value).toEqual({ turn: 'waiting_approval' });
      const left = feed(agentMachine, qFirst, [granted('ap1', 'c2')]);
      expect(left.value).toEqual({ turn: 'waiting_input' });
      expect(feed(agentMachine, left, [answered('q1', 'c1')]).value).toEqual({ turn: 'running' });
      // a question answered while the approval waits: the approval still holds the turn, then it runs
      const aFirst = fold(...opening(), requested('ap1', 'c1'), asked('q1', 'c2'), answered('q1', 'c2', 'expired'));
      expect(aFirst.value).toEqual({ turn: 'waiting_approval' });
      expect(feed(agentMachine, aFirst, [denied('ap1', 'c1')]).value).toEqual({ turn: 'running' });
    });

    it('two questions: it waits until the last is answered, expired or cancelled', () => {
      const s = fold(...opening(), asked('q1', 'c1'), asked('q2', 'c2'), answered('q1', 'c1'));
      expect(s.value).toEqual({ turn: 'waiting_input' });
      expect(feed(agentMachine, s, [answered('q2', 'c2', 'cancelled')]).value).toEqual({ turn: 'running' });
    });

    it('a turn that ends while approvals wait goes idle, and the next turn starts with none open', () => {
      const s = fold(...opening(), requested('ap1', 'c1'), cancelled('c1'), stepEnd(), turnEnd('cancelled'));
      expect(s.value).toBe('idle');
      expect(s.context.openApprovals).toEqual([]);
      expect(feed(agentMachine, s, [received('m2'), turnStart(['m2'])]).value).toEqual({ turn: 'running' });
    });

    it('agrees with the projection after every event: waiting_approval exactly while it holds a pending approval, waiting_input while a question', () => {
      const runs: ActorEvent[][] = [
        [...opening(), requested('ap1', 'c1'), requested('ap2', 'c2'), granted('ap1', 'c1'), denied('ap2', 'c2')],
        // an interrupt: the call cancelled and the step ended leave the approval pending until the turn ends
        [...opening(), requested('ap1', 'c1'), cancelled('c1'), stepEnd(), turnEnd('cancelled')],
        [...opening(), asked('q1', 'c1'), requested('ap1', 'c2'), answered('q1', 'c1'), granted('ap1', 'c2')],
        [...opening(), requested('ap1', 'c1'), asked('q1', 'c2'), denied('ap1', 'c1', 'expiry'), answered('q1', 'c2', 'expired')],
      ];
      for (const run of runs) {
        let s = start();
        const p = emptyProjection('agent-1');
        for (const e of run) {
          s = step(s, e)[0];
          foldEvent(p, structuredClone(e));
          const got = typeof s.value === 'string' ? s.value : `turn.${(s.value as { turn: string }).turn}`;
          if (!p.openTurn) {
            expect(['idle', 'claiming'], `after ${e.type} (seq ${e.seq})`).toContain(got);
            continue;
          }
          const want = pendingApprovals(p).length > 0 ? 'turn.waiting_approval' : pendingQuestions(p).length > 0 ? 'turn.waiting_input' : 'turn.running';
          expect(got, `after ${e.type} (seq ${e.seq})`).toBe(want);
        }
      }
    });

    it('restores a snapshot written before the waits were kept (no open IDs) in either engine, and reads the missing IDs as none', () => {
      // what an agent snapshot of the earlier definition held mid-turn (test/fixtures/demo/snapshot-v1.json)
      const old = {
        status: 'active', value: { turn: 'running' }, historyValue: {}, children: {},
        context: { actorId: 'agent-1', turns: 0, queued: [], claiming: [], claimSource: null, lastOutcome: null },
      };
      const compiled = new CompiledMachine(agentMachine);
      let c = compiled.restore(old as never);
      let x = agentMachine.resolveState({ value: old.value, context: old.context as never });
      expect(c.value).toEqual({ turn: 'running' });
      // an answer to an approval the old snapshot did not keep (ap0) closes nothing and moves nothing
      const steps: Array<[AgentEvent, string]> = [
        [granted('ap0', 'c0'), 'running'],
        [requested('ap1', 'c1'), 'waiting_approval'],
        [granted('ap0', 'c0'), 'waiting_approval'],
        [granted('ap1', 'c1'), 'running'],
      ];
      for (const [e, want] of steps) {
        c = compiled.transition(c, e, null);
        x = step(x, e)[0];
        expect(c.value, `after ${e.type}`).toEqual({ turn: want });
        expect({ value: c.value, context: c.context }).toEqual({ value: x.value, context: x.context });
      }
    });
  });

  describe('actor/stopped', () => {
    const stop = () => ev('actor/stopped', { reason: 'shutdown' });

    it.each([
      ['idle', () => start()],
      ['claiming', () => fold(received('m1'))],
      ['turn', () => fold(received('m1'), turnStart(['m1']))],
    ])('stops from %s into a final state', (_name, from) => {
      const [s, fx] = step(from(), stop());
      expect(s.value).toBe('stopped');
      expect(s.status).toBe('done');
      expect(fx).toEqual([]);
    });

    it('ignores everything once stopped', () => {
      const s0 = fold(stop());
      const [s, fx] = step(s0, received('m1'));
      expect(s.value).toBe('stopped');
      expect(fx).toEqual([]);
    });
  });

  describe('goal continuation', () => {
    it('a turn/end whose goal goes on claims a goal_continuation turn', () => {
      const [s, fx] = step(fold(received('m1'), turnStart(['m1'])), turnEnd('completed', true));
      expect(s.value).toBe('claiming');
      expect(s.context.claimSource).toBe('goal_continuation');
      expect(effects(fx)).toEqual([
        { type: 'turnEnded', params: { outcome: 'completed' } },
        { type: 'startTurn', params: { messageIds: [], source: 'goal_continuation' } },
      ]);
      // a crash before its turn/start: the recovering incarnation claims it again, once
      expect(effects(step(s, { type: 'recover' })[1])).toEqual([{ type: 'startTurn', params: { messageIds: [], source: 'goal_continuation' } }]);
    });

    it('comes after a follow-up: the queued message takes the next turn', () => {
      const s0 = fold(received('m1'), turnStart(['m1']), received('f1', 'follow_up'));
      const [s, fx] = step(s0, turnEnd('completed', true));
      expect(s.context.claimSource).toBe('follow_up');
      expect(effects(fx)[1]).toEqual({ type: 'startTurn', params: { messageIds: ['f1'], source: 'follow_up' } });
    });

    it('a turn/end that does not say so goes idle', () => {
      const [s] = step(fold(received('m1'), turnStart(['m1'])), turnEnd('completed'));
      expect(s.value).toBe('idle');
    });

    it('hands a goal_control message to the runtime in any state', () => {
      const [, idleFx] = step(start(), received('g1', 'goal_control'));
      expect(effects(idleFx)).toEqual([{ type: 'controlGoal', params: { messageId: 'g1', content: 'hello g1' } }]);
      const [s, fx] = step(fold(received('m1'), turnStart(['m1'])), received('g2', 'goal_control'));
      expect(s.value).toEqual({ turn: 'running' });
      expect(effects(fx)).toEqual([{ type: 'controlGoal', params: { messageId: 'g2', content: 'hello g2' } }]);
    });
  });
});
