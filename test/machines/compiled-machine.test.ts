import { describe, expect, it } from 'vitest';
import { assign, createMachine, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { agentMachine } from '../../src/machines/agent.machine.js';
import { attemptMachine } from '../../src/machines/attempt.machine.js';
import { CompiledMachine, type Effect } from '../../src/machines/compiled-machine.js';
import { stepMachine } from '../../src/machines/step.machine.js';
import { toolCallMachine } from '../../src/machines/tool-call.machine.js';
import { turnMachine } from '../../src/machines/turn.machine.js';
// seeded, so a failing sequence can be replayed from its seed
import { mulberry32 as prng } from '../../src/cli/chaos/plan.js';

type Rand = () => number;
const pick = <T,>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const at = (r: Rand): string => new Date(pick(r, [0, 5_000, 2e12])).toISOString();

/** Every event type the machines name, with the variants their guards tell apart. */
function randomEvent(r: Rand): object {
  const usage = { inputTokens: 3, outputTokens: 2, estimated: false };
  const ids = { turn: 't1', step: 's1', attempt: 'a1', call: 'c1' };
  const makers: Array<() => object> = [
    () => ({ type: 'inbox/received', data: { messageId: `m${Math.floor(r() * 5)}`, kind: pick(r, ['user_message', 'follow_up', 'approval_response', 'steer']), from: 'u', content: 'c' } }),
    () => ({ type: 'turn/start', ...ids, data: { settings: {} } }),
    () => ({ type: 'turn/end', ...ids, data: { outcome: pick(r, ['completed', 'failed', 'stopped', 'cancelled']) } }),
    () => ({ type: 'actor/stopped', data: {} }),
    () => ({ type: 'step/start', ...ids, at: at(r), data: {} }),
    () => ({ type: 'step/end', ...ids, at: at(r), data: { outcome: pick(r, ['final', 'failed', 'stopped', 'cancelled', 'rejected', 'tool_calls']), reason: pick(r, [null, 'why']), toolCalls: 1, usage } }),
    () => ({ type: 'request/prepared', ...ids, data: {} }),
    () => ({ type: 'attempt/start', ...ids, data: {} }),
    () => ({
      type: 'attempt/end',
      ...ids,
      at: at(r),
      data: {
        outcome: pick(r, ['succeeded', 'failed', 'interrupted', 'overflow', 'aborted']),
        error: pick(r, [null, { class: 'server', message: 'boom', retryable: true }, { class: 'auth', message: 'no', retryable: false }]),
        backoffMs: pick(r, [null, 10]),
        usage,
      },
    }),
    () => ({
      type: 'assistant/accepted',
      ...ids,
      data: {
        content: pick(r, [null, '', 'the answer']),
        toolCalls: pick(r, [[], [{ id: 'c1', name: 'echo', arguments: '{}' }], [{ id: 'c1' }, { id: 'c2' }]]),
        finishReason: pick(r, ['stop', 'tool_calls', 'length', 'content_filter', 'refusal', 'error']),
      },
    }),
    () => ({ type: 'assistant/rejected', ...ids, data: { reason: 'not json' } }),
    () => ({ type: 'tool/call', ...ids, data: {} }),
    () => ({ type: 'tool/start', ...ids, data: { rerun: r() < 0.3 } }),
    () => ({ type: pick(r, ['tool/result', 'tool/denied', 'tool/cancelled', 'tool/outcome_unknown']), ...ids, data: {} }),
    () => ({ type: 'policy/decided', ...ids, data: { decision: pick(r, ['allow', 'ask', 'deny']), reason: pick(r, [null, 'rule']) } }),
    () => ({ type: 'approval/requested', ...ids, data: { approvalId: pick(r, ['ap1', 'ap2']), expiresAt: pick(r, [null, 1_000]) } }),
    () => ({ type: pick(r, ['approval/granted', 'approval/denied']), ...ids, data: { approvalId: pick(r, ['ap1', 'ap2']), reason: pick(r, [null, 'no']) } }),
    () => ({ type: 'ask/asked', ...ids, data: { questionId: pick(r, ['q1', 'q2']) } }),
    () => ({ type: 'ask/answered', ...ids, data: { questionId: pick(r, ['q1', 'q2']), outcome: pick(r, ['answered', 'expired', 'cancelled']) } }),
    () => ({ type: 'tool/reconciled', ...ids, data: { verdict: pick(r, ['applied', 'not_applied', 'unknown']), output: pick(r, [undefined, 'out']), reason: pick(r, [undefined, 'unsure']) } }),
    () => ({ type: 'recover' }),
    () => ({ type: 'tick', nowMs: pick(r, [0, 5_000, 2e12]) }),
    () => ({ type: 'abort', reason: pick(r, ['deadline', 'interrupted']) }),
  ];
  return pick(r, makers)();
}

const CASES: Array<{ machine: AnyStateMachine; input: (r: Rand) => object }> = [
  { machine: agentMachine, input: () => ({ actorId: 'agent_1' }) },
  {
    machine: turnMachine,
    input: (r) => ({
      turnId: 't1',
      budgets: { maxSteps: pick(r, [null, 2]), maxToolCalls: pick(r, [null, 0, 1]), deadlineAt: pick(r, [null, 1_000, 3e12]) },
    }),
  },
  { machine: stepMachine, input: (r) => ({ stepId: 's1', index: 1, maxAttempts: pick(r, [1, 3]), toolBudgetLeft: pick(r, [null, 0, 2]) }) },
  { machine: attemptMachine, input: () => ({ attemptId: 'a1', index: 1, requestDigest: 'sha256:x' }) },
  {
    machine: toolCallMachine,
    input: (r) => ({
      callId: 'c1',
      name: 'write_file',
      valid: r() < 0.85,
      error: pick(r, [null, 'bad arguments']),
      recovery: pick(r, ['rerun', 'idempotent', 'reconcile', 'manual']),
      withinBudget: r() < 0.85,
      confirmUnknown: r() < 0.5,
    }),
  },
];

/** XState's own transition, with effects collected as the agent actor's sink receives them. */
function xstateRunner(machine: AnyStateMachine) {
  let effects: Effect[] = [];
  const names = new Set(Object.keys(machine.implementations.actions));
  const noop = (): void => {};
  const scope = {
    self: { id: machine.id, sessionId: machine.id },
    id: machine.id,
    sessionId: machine.id,
    system: { _sendInspectionEvent: noop, _unregister: noop, scheduler: { schedule: noop, cancel: noop, cancelAll: noop } },
    logger: noop,
    defer: (fn: () => void) => fn(),
    stopChild: noop,
    emit: noop,
    actionExecutor: (a: { type: string; params: unknown }) => {
      if (names.has(a.type)) effects.push({ name: a.type, params: a.params });
    },
  };
  const take = (): Effect[] => {
    const out = effects;
    effects = [];
    return out;
  };
  return {
    initial: (input: object) => [machine.getInitialSnapshot(scope as never, input) as AnyMachineSnapshot, take()] as const,
    transition: (s: AnyMachineSnapshot, e: object) => [machine.transition(s, e as never, scope as never) as AnyMachineSnapshot, take()] as const,
    restore: (p: unknown) => machine.restoreSnapshot!(p as never, scope as never) as AnyMachineSnapshot,
  };
}

describe('compiled machines run the XState definitions as XState does', () => {
  for (const { machine, input } of CASES) {
    it(`${machine.id}: the same states, contexts and effects for 600 random event sequences`, () => {
      const compiled = new CompiledMachine(machine);
      const x = xstateRunner(machine);
      let events = 0;
      let moves = 0;
      const statesSeen = new Set<string>();
      for (let seed = 1; seed <= 600; seed++) {
        const r = prng(seed * 7919 + machine.id.length);
        const inp = input(r);
        const fx: Effect[] = [];
        let c = compiled.initial(inp, (e) => fx.push(e));
        let [xs, xfx] = x.initial(inp);
        expect({ value: c.value, context: c.context, status: c.status, effects: fx }, `seed ${seed} initial`).toEqual({
          value: xs.value,
          context: xs.context,
          status: xs.status,
          effects: xfx,
        });
        const length = 5 + Math.floor(r() * 30);
        for (let i = 0; i < length && xs.status === 'active'; i++) {
          const e = randomEvent(r);
          fx.length = 0;
          const before = c;
          c = compiled.transition(c, e as { type: string }, (ef) => fx.push(ef));
          [xs, xfx] = x.transition(xs, e);
          events += 1;
          if (c !== before) moves += 1;
          statesSeen.add(JSON.stringify(c.value));
          expect({ value: c.value, context: c.context, status: c.status, effects: fx }, `seed ${seed} event ${i} ${JSON.stringify(e)}`).toEqual({
            value: xs.value,
            context: xs.context,
            status: xs.status,
            effects: xfx,
          });
          // now and then, persist with one engine and carry on from what the other restores
          if (r() < 0.15) {
            expect(compiled.persist(c)).toEqual(machine.getPersistedSnapshot(xs));
            c = compiled.restore(machine.getPersistedSnapshot(xs) as never);
            xs = x.restore(JSON.parse(JSON.stringify(compiled.persist(c))));
          }
        }
      }
      // the sequences reach far: most events move the machine, and most of its states are visited
      expect(events).toBeGreaterThan(3_000);
      expect(moves).toBeGreaterThan(events / 20);
      expect(statesSeen.size).toBeGreaterThanOrEqual(Math.min(4, Object.keys(machine.root.states).length));
    });
  }

  it('an unchanged snapshot comes back as the same object (an event no active state handles)', () => {
    const compiled = new CompiledMachine(attemptMachine);
    const s = compiled.initial({ attemptId: 'a1', index: 1, requestDigest: 'd' }, null);
    expect(compiled.transition(s, { type: 'tool/call' }, null)).toBe(s);
  });

  it('refuses a machine using what it does not run, saying which state and what', () => {
    const parallel = createMachine({ id: 'p', type: 'parallel', states: { a: {}, b: {} } });
    expect(() => new CompiledMachine(parallel)).toThrow(/machine p: state p uses parallel states/);
    const delayed = createMachine({ id: 'd', initial: 'a', states: { a: { after: { 10: 'b' } }, b: {} } });
    expect(() => new CompiledMachine(delayed)).toThrow(/state d\.a uses invoked actors and delayed transitions/);
    const exit = createMachine({ id: 'e', initial: 'a', states: { a: { exit: () => {} }, b: {} } });
    expect(() => new CompiledMachine(exit)).toThrow(/state e\.a uses exit actions/);
  });

  it('takes a transition from an atomic state to itself as XState does: it stays, its actions run', () => {
    const self = createMachine({
      id: 's', initial: 'a', context: { n: 0 },
      states: { a: { on: { again: { target: 'a', actions: assign({ n: ({ context }) => context.n + 1 }) } } }, b: {} },
    });
    const compiled = new CompiledMachine(self);
    const xs = xstateRunner(self);
    let c = compiled.initial(undefined, null);
    let [x] = xs.initial({});
    for (let i = 0; i < 2; i++) {
      c = compiled.transition(c, { type: 'again' }, null);
      [x] = xs.transition(x, { type: 'again' });
    }
    expect(c.value).toBe('a');
    expect(c.value).toEqual(x.value);
    expect(c.context).toEqual({ n: 2 });
    expect(c.context).toEqual(x.context);
  });

  it('refuses a snapshot naming a state the machine does not have', () => {
    const compiled = new CompiledMachine(stepMachine);
    expect(() => compiled.restore({ status: 'active', value: 'nowhere', context: {} })).toThrow(/names state "nowhere"/);
  });
});
