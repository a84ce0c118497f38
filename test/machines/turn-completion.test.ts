// The turn's settle decision under a completion policy, event in, effects out: a final answer the
// policy refused (`completion/rejected` in its step) takes another step; the refusal that reaches
// the limit fails the turn naming the policy; budgets and aborts still win; a rebuilt machine
// (fold of the same events, or a restored snapshot) decides the same.
import { describe, expect, it } from 'vitest';
import { initialTransition, type SnapshotFrom } from 'xstate';
import { turnMachine, type TurnEvent, type TurnInput } from '../../src/machines/turn.machine.js';
import { COMPLETION_EXHAUSTED, COMPLETION_EXHAUSTED_STOP } from '../../src/protocol/completion.js';
import type { Budgets, EventData } from '../../src/protocol/events.js';
import { effects, ev, feed, send } from './events.js';

type Snap = SnapshotFrom<typeof turnMachine>;

const NO_BUDGETS: Budgets = { maxSteps: null, maxToolCalls: null, deadlineAt: null };
const scope = { turn: 'turn-1' };

function start(input: Partial<TurnInput> = {}, budgets: Partial<Budgets> = {}): Snap {
  return initialTransition(turnMachine, { turnId: 'turn-1', budgets: { ...NO_BUDGETS, ...budgets }, ...input })[0];
}
function stepStart(index: number) {
  return ev('step/start', { index, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, { ...scope, step: `step-${index}` });
}
function answer(content: string) {
  return ev('assistant/accepted', { content, toolCalls: [], finishReason: 'stop' }, scope);
}
function refused(missing: string[], policy: EventData<'completion/rejected'>['policy'] = 'cited', goal: { revision: number; active: boolean } | null = null) {
  const data: EventData<'completion/rejected'> = { policy, missing, goalRevision: goal?.revision ?? null, ...(goal?.active ? { goalActive: true } : {}) };
  return ev('completion/rejected', data, scope);
}
function finalEnd() {
  return ev('step/end', { outcome: 'final', reason: null, toolCalls: 0 }, scope);
}
/** One step whose final answer the policy refused, up to (not including) its step/end. */
function refusedStep(index: number, missing = [`citation [fake-${index}.md] names nothing this session retrieved`]): TurnEvent[] {
  return [stepStart(index), answer(`see [fake-${index}.md]`), refused(missing)];
}
function fold(s: Snap, ...events: TurnEvent[]): Snap {
  return feed(turnMachine, s, events);
}

describe('turn machine: the completion policy settles a final answer', () => {
  it('a refused answer takes another step instead of completing', () => {
    const [s, fx] = send(turnMachine, fold(start(), ...refusedStep(1)), finalEnd());
    expect(s.value).toBe('launching');
    expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: null } }]);
    expect(s.context.completionRejections).toBe(1);
    expect(s.context.refusal).toBeNull();
    // the answer-validation count is another limit: untouched
    expect(s.context.rejections).toBe(0);
  });

  it('an answer with no refusal after a refused one completes the turn with it', () => {
    const s0 = fold(start(), ...refusedStep(1), finalEnd(), stepStart(2), answer('see [a.txt]'));
    const [s, fx] = send(turnMachine, s0, finalEnd());
    expect(s.value).toBe('ending');
    expect(effects(fx)).toEqual([
      { type: 'endTurn', params: expect.objectContaining({ outcome: 'completed', reason: null, answer: 'see [a.txt]', steps: 2 }) },
    ]);
  });

  it('the refusal that reaches the limit fails the turn, naming the policy, what is missing and that a person decides', () => {
    const s0 = fold(start(), ...refusedStep(1), finalEnd(), ...refusedStep(2), finalEnd(), ...refusedStep(3));
    const [s, fx] = send(turnMachine, s0, finalEnd());
    expect(s.value).toBe('ending');
    const end = effects(fx)[0] as { type: string; params: { outcome: string; reason: string; answer: string | null } };
    expect(end.type).toBe('endTurn');
    expect(end.params.outcome).toBe('failed');
    expect(end.params.answer).toBeNull();
    expect(end.params.reason.startsWith(COMPLETION_EXHAUSTED)).toBe(true);
    expect(end.params.reason).toContain('"cited" refused 3 answers');
    expect(end.params.reason).toContain('citation [fake-3.md]');
    expect(end.params.reason).toContain('a person must decide');
  });

  it('takes its limit from the input (the turn settings)', () => {
    const [s, fx] = send(turnMachine, fold(start({ maxCompletionRejections: 1 }), ...refusedStep(1)), finalEnd());
    expect(s.value).toBe('ending');
    expect(effects(fx)[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'failed', reason: expect.stringContaining('refused 1 answer (the limit)') } });
  });

  it('a spent step budget stops the turn rather than asking again', () => {
    const [s, fx] = send(turnMachine, fold(start({}, { maxSteps: 1 }), ...refusedStep(1)), finalEnd());
    expect(s.value).toBe('ending');
    expect(effects(fx)[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'stopped', reason: 'step_budget', answer: null } });
  });

  it('an abort during the refused step cancels the turn', () => {
    const s0 = fold(start(), ...refusedStep(1), { type: 'abort', reason: 'interrupted' });
    const [, fx] = send(turnMachine, s0, finalEnd());
    expect(effects(fx)[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'cancelled', reason: 'interrupted' } });
  });

  it('a refusal counts once: the step after it starts clean', () => {
    const s0 = fold(start(), ...refusedStep(1), finalEnd(), stepStart(2));
    expect(s0.context.refusal).toBeNull();
    expect(s0.context.completionRejections).toBe(1);
  });

  it('decides the same after a restore from its persisted snapshot mid-way (rehydrated)', () => {
    const events = [...refusedStep(1), finalEnd(), ...refusedStep(2)];
    const live = fold(start(), ...events);
    const restored = turnMachine.resolveState(JSON.parse(JSON.stringify(turnMachine.getPersistedSnapshot?.(live) ?? live)));
    const a = send(turnMachine, live, finalEnd());
    const b = send(turnMachine, restored as Snap, finalEnd());
    expect(b[0].value).toBe(a[0].value);
    expect(effects(b[1])).toEqual(effects(a[1]));
  });

  it('loads a context from before completion policies (no counters) and counts from zero', () => {
    const old = fold(start(), stepStart(1));
    const ctx = { ...old.context } as Record<string, unknown>;
    delete ctx.completionRejections;
    delete ctx.maxCompletionRejections;
    delete ctx.refusal;
    const restored = turnMachine.resolveState({ value: 'stepping', context: ctx as never });
    const s = fold(restored as Snap, answer('see [x.md]'), refused(['m']));
    const [next] = send(turnMachine, s, finalEnd());
    expect(next.value).toBe('launching');
    expect(next.context.completionRejections).toBe(1);
  });
});

describe('turn machine: on_completion_exhausted = "block" at the limit', () => {
  const block = { onCompletionExhausted: 'block' as const, maxCompletionRejections: 2 };
  const goalStep = (index: number, goal: { revision: number; active: boolean } | null) =>
    [stepStart(index), answer(`see [fake-${index}.md]`), refused([`citation [fake-${index}.md] names nothing this session retrieved`], 'cited', goal)];

  it('with an active goal: the turn stops `completion_exhausted` and asks for the goal to be blocked with the policy and what was missing', () => {
    const goal = { revision: 1, active: true };
    const s0 = fold(start(block), ...goalStep(1, goal), finalEnd(), ...goalStep(2, goal));
    const [s, fx] = send(turnMachine, s0, finalEnd());
    expect(s.value).toBe('ending');
    expect(effects(fx)).toEqual([{
      type: 'endTurn',
      params: {
        outcome: 'stopped', reason: COMPLETION_EXHAUSTED_STOP, answer: null, steps: 2, toolCalls: 0, usage: expect.anything(),
        blockGoal: 'completion:cited: citation [fake-2.md] names nothing this session retrieved',
      },
    }]);
    // the ending is what `recover` re-emits: a resumed turn blocks the same goal the same way
    const [, again] = send(turnMachine, s, { type: 'recover' } as TurnEvent);
    expect(effects(again)).toEqual(effects(fx));
  });

  it('below the limit a refusal still takes another step, goal or not', () => {
    const [s, fx] = send(turnMachine, fold(start(block), ...goalStep(1, { revision: 0, active: true })), finalEnd());
    expect(s.value).toBe('launching');
    expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: null } }]);
  });

  it('without a goal it fails the turn like `fail`', () => {
    const s0 = fold(start(block), ...goalStep(1, null), finalEnd(), ...goalStep(2, null));
    const [, fx] = send(turnMachine, s0, finalEnd());
    const end = effects(fx)[0] as { type: string; params: Record<string, unknown> };
    expect(end).toMatchObject({ type: 'endTurn', params: { outcome: 'failed', reason: expect.stringContaining(`${COMPLETION_EXHAUSTED} "cited" refused 2 answers`) } });
    expect(end.params).not.toHaveProperty('blockGoal');
  });

  it('with a goal that is not active (paused) it fails the turn like `fail`', () => {
    const goal = { revision: 3, active: false };
    const s0 = fold(start(block), ...goalStep(1, goal), finalEnd(), ...goalStep(2, goal));
    const [, fx] = send(turnMachine, s0, finalEnd());
    expect(effects(fx)[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'failed' } });
    expect((effects(fx)[0] as { params: object }).params).not.toHaveProperty('blockGoal');
  });

  it('under `fail` (the default) an active goal does not change the decision', () => {
    const goal = { revision: 1, active: true };
    const s0 = fold(start({ maxCompletionRejections: 2 }), ...goalStep(1, goal), finalEnd(), ...goalStep(2, goal));
    const [, fx] = send(turnMachine, s0, finalEnd());
    expect(effects(fx)[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'failed' } });
    expect((effects(fx)[0] as { params: object }).params).not.toHaveProperty('blockGoal');
  });

  it('decides the same after a restore from its persisted snapshot mid-way', () => {
    const goal = { revision: 1, active: true };
    const live = fold(start(block), ...goalStep(1, goal), finalEnd(), ...goalStep(2, goal));
    const restored = turnMachine.resolveState(JSON.parse(JSON.stringify(turnMachine.getPersistedSnapshot?.(live) ?? live)));
    const a = send(turnMachine, live, finalEnd());
    const b = send(turnMachine, restored as Snap, finalEnd());
    expect(effects(b[1])).toEqual(effects(a[1]));
    expect(effects(a[1])[0]).toMatchObject({ params: { outcome: 'stopped', blockGoal: expect.stringMatching(/^completion:cited: /) } });
  });
});
