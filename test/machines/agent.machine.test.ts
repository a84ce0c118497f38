import { describe, expect, it } from 'vitest';
import { initialTransition, type SnapshotFrom } from 'xstate';
import { agentMachine, type AgentEvent } from '../../src/machines/agent.machine.js';
import type { TurnOutcome } from '../../src/protocol/events.js';
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

    it.each(['job_notice', 'inject', 'notification', ''])('ignores an inbox message of kind %j', (kind) => {
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
