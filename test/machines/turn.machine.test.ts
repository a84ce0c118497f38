import { describe, expect, it } from 'vitest';
import { initialTransition, type SnapshotFrom } from 'xstate';
import { turnMachine, type TurnEvent } from '../../src/machines/turn.machine.js';
import type { Budgets, EventData } from '../../src/protocol/events.js';
import { ZERO_USAGE } from '../../src/protocol/history.js';
import { at, effects, ev, feed, send, T0_MS, usage } from './events.js';

type Snap = SnapshotFrom<typeof turnMachine>;
type StepEnd = EventData<'step/end'>;

const NO_BUDGETS: Budgets = { maxSteps: null, maxToolCalls: null, deadlineAt: null };
const scope = { turn: 'turn-1' };

function start(budgets: Partial<Budgets> = {}): Snap {
  return initialTransition(turnMachine, { turnId: 'turn-1', budgets: { ...NO_BUDGETS, ...budgets } })[0];
}
function stepStart(index: number) {
  return ev('step/start', { index, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, {
    ...scope,
    step: `step-${index}`,
  });
}
function stepEnd(outcome: StepEnd['outcome'], reason: string | null = null, opts: { at?: string; toolCalls?: number } = {}) {
  return ev('step/end', { outcome, reason, toolCalls: opts.toolCalls ?? (outcome === 'tool_calls' ? 1 : 0) }, {
    ...scope,
    at: opts.at,
  });
}
function accepted(content: string | null, calls = 0) {
  const toolCalls = Array.from({ length: calls }, (_, i) => ({ id: `p${i}`, name: 'read_file', arguments: '{}' }));
  return ev('assistant/accepted', { content, toolCalls, finishReason: calls > 0 ? 'tool_calls' : 'stop' }, scope);
}
function toolStart(rerun = false) {
  return ev('tool/start', { name: 'read_file', input: {}, effects: 'none', idempotencyKey: 'k', rerun }, scope);
}
function attemptEnd(u = usage(10, 5)) {
  return ev('attempt/end', { outcome: 'succeeded', error: null, usage: u, backoffMs: null, latencyMs: 12 }, scope);
}
function turnEnd() {
  return ev(
    'turn/end',
    { outcome: 'completed', reason: null, answer: 'x', steps: 1, toolCalls: 0, usage: ZERO_USAGE },
    scope,
  );
}
function fold(s: Snap, ...events: TurnEvent[]): Snap {
  return feed(turnMachine, s, events);
}
function step(s: Snap, e: TurnEvent) {
  return send(turnMachine, s, e);
}

describe('turn machine', () => {
  describe('launching', () => {
    it('starts launching step 1 with no tool budget when unlimited', () => {
      const [s, actions] = initialTransition(turnMachine, { turnId: 'turn-1', budgets: NO_BUDGETS });
      expect(s.value).toBe('launching');
      expect(s.context).toEqual({
        turnId: 'turn-1',
        budgets: NO_BUDGETS,
        steps: 0,
        toolCalls: 0,
        usage: ZERO_USAGE,
        answer: null,
        ending: null,
        abortReason: null,
        rejections: 0,
        completionRejections: 0,
        maxCompletionRejections: 3,
        refusal: null,
        onCompletionExhausted: 'fail',
      });
      expect(effects(actions)).toEqual([{ type: 'startStep', params: { index: 1, toolBudgetLeft: null } }]);
    });

    it('passes the whole tool budget to step 1', () => {
      const [, actions] = initialTransition(turnMachine, {
        turnId: 'turn-1',
        budgets: { ...NO_BUDGETS, maxToolCalls: 5 },
      });
      expect(effects(actions)).toEqual([{ type: 'startStep', params: { index: 1, toolBudgetLeft: 5 } }]);
    });

    it('moves to stepping on step/start and counts the step', () => {
      const [s, fx] = step(start(), stepStart(1));
      expect(s.value).toBe('stepping');
      expect(s.context.steps).toBe(1);
      expect(fx).toEqual([]);
    });

    it('re-emits startStep on recover', () => {
      const s0 = fold(start({ maxToolCalls: 4 }), stepStart(1), toolStart(), stepEnd('tool_calls'));
      expect(s0.value).toBe('launching');
      const [s, fx] = step(s0, { type: 'recover' });
      expect(s.value).toBe('launching');
      expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: 3 } }]);
    });
  });

  describe('stepping', () => {
    it('launches the next step after a tool_calls step', () => {
      const [s, fx] = step(fold(start(), stepStart(1)), stepEnd('tool_calls'));
      expect(s.value).toBe('launching');
      expect(s.context.ending).toBeNull();
      expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: null } }]);
    });

    it('passes what is left of the tool budget to the next step', () => {
      const s0 = fold(start({ maxToolCalls: 5 }), stepStart(1), toolStart(), toolStart());
      const [, fx] = step(s0, stepEnd('tool_calls', null, { toolCalls: 2 }));
      expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: 3 } }]);
    });

    it('does nothing on recover (the step machine owns in-step recovery)', () => {
      const [s, fx] = step(fold(start(), stepStart(1)), { type: 'recover' });
      expect(s.value).toBe('stepping');
      expect(fx).toEqual([]);
    });

    it('completes on a final step, answering with the last accepted content', () => {
      const s0 = fold(
        start(),
        stepStart(1),
        attemptEnd(usage(100, 20)),
        accepted('let me look', 1),
        toolStart(),
        stepEnd('tool_calls'),
        stepStart(2),
        attemptEnd(usage(150, 30)),
        accepted('The answer is 42.'),
      );
      expect(s0.context.answer).toBe('The answer is 42.');
      const [s, fx] = step(s0, stepEnd('final'));
      const endTurn = {
        outcome: 'completed',
        reason: null,
        answer: 'The answer is 42.',
        steps: 2,
        toolCalls: 1,
        usage: usage(250, 50),
      };
      expect(s.value).toBe('ending');
      expect(s.context.ending).toEqual(endTurn);
      expect(fx).toEqual([{ type: 'endTurn', params: endTurn }]);
    });

    it.each([
      ['failed', 'model auth error: bad key'],
      ['stopped', 'max_output_tokens'],
      ['cancelled', 'user cancelled'],
    ] as const)('ends %s carrying the step reason and no answer', (outcome, reason) => {
      const s0 = fold(start(), stepStart(1), attemptEnd(usage(7, 3)), accepted('partial'));
      const [s, fx] = step(s0, stepEnd(outcome, reason));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        { type: 'endTurn', params: { outcome, reason, answer: null, steps: 1, toolCalls: 0, usage: usage(7, 3) } },
      ]);
    });
  });

  describe('budgets', () => {
    it('stops with step_budget when a tool_calls step reaches maxSteps', () => {
      let s = fold(start({ maxSteps: 2 }), stepStart(1));
      let fx;
      [s, fx] = step(s, stepEnd('tool_calls'));
      expect(s.value).toBe('launching');
      expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: null } }]);
      [s, fx] = step(fold(s, stepStart(2)), stepEnd('tool_calls'));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        {
          type: 'endTurn',
          params: { outcome: 'stopped', reason: 'step_budget', answer: null, steps: 2, toolCalls: 0, usage: ZERO_USAGE },
        },
      ]);
    });

    it('lets the last allowed step complete with its answer', () => {
      const s0 = fold(start({ maxSteps: 1 }), stepStart(1), accepted('done'));
      const [, fx] = step(s0, stepEnd('final'));
      expect(fx).toEqual([expect.objectContaining({ type: 'endTurn', params: expect.objectContaining({ outcome: 'completed', answer: 'done' }) })]);
    });

    it('counts tool/start events but not reruns', () => {
      const s = fold(start(), stepStart(1), toolStart(), toolStart(true), toolStart(), toolStart(true));
      expect(s.context.toolCalls).toBe(2);
    });

    it('stops with tool_budget once the started calls reach maxToolCalls', () => {
      const s0 = fold(start({ maxToolCalls: 2 }), stepStart(1), toolStart(), toolStart(), toolStart(true));
      const [s, fx] = step(s0, stepEnd('tool_calls', null, { toolCalls: 2 }));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        {
          type: 'endTurn',
          params: { outcome: 'stopped', reason: 'tool_budget', answer: null, steps: 1, toolCalls: 2, usage: ZERO_USAGE },
        },
      ]);
    });

    it('does not spend the tool budget on reruns', () => {
      const s0 = fold(start({ maxToolCalls: 2 }), stepStart(1), toolStart(), toolStart(true));
      const [s, fx] = step(s0, stepEnd('tool_calls'));
      expect(s.value).toBe('launching');
      expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: 1 } }]);
    });

    it('stops with deadline when a step ends at or after deadlineAt (event time, not a clock)', () => {
      const deadlineAt = T0_MS + 1_000;
      const s0 = fold(start({ deadlineAt }), stepStart(1));

      const [before] = step(s0, stepEnd('tool_calls', null, { at: at(999) }));
      expect(before.value).toBe('launching');

      const [s, fx] = step(s0, stepEnd('tool_calls', null, { at: at(1_000) }));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        {
          type: 'endTurn',
          params: { outcome: 'stopped', reason: 'deadline', answer: null, steps: 1, toolCalls: 0, usage: ZERO_USAGE },
        },
      ]);
    });

    it('checks the deadline before the step and tool budgets', () => {
      const s0 = fold(start({ deadlineAt: T0_MS, maxSteps: 1, maxToolCalls: 1 }), stepStart(1), toolStart());
      const [, fx] = step(s0, stepEnd('tool_calls', null, { at: at(5) }));
      expect(fx[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'stopped', reason: 'deadline' } });
    });

    it('checks the step budget before the tool budget', () => {
      const s0 = fold(start({ maxSteps: 1, maxToolCalls: 1 }), stepStart(1), toolStart());
      const [, fx] = step(s0, stepEnd('tool_calls'));
      expect(fx[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'stopped', reason: 'step_budget' } });
    });

    it('lets a final step after the deadline complete', () => {
      const s0 = fold(start({ deadlineAt: T0_MS }), stepStart(1), accepted('late but done'));
      const [, fx] = step(s0, stepEnd('final', null, { at: at(60_000) }));
      expect(fx[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'completed', answer: 'late but done' } });
    });
  });

  describe('tick and abort', () => {
    const deadlineAt = T0_MS + 1_000;

    it('ignores a tick before the deadline', () => {
      const [s, fx] = step(fold(start({ deadlineAt }), stepStart(1)), { type: 'tick', nowMs: deadlineAt - 1 });
      expect(s.value).toBe('stepping');
      expect(s.context.abortReason).toBeNull();
      expect(fx).toEqual([]);
    });

    it('ignores ticks when there is no deadline', () => {
      const [, fx] = step(fold(start(), stepStart(1)), { type: 'tick', nowMs: T0_MS + 10 ** 9 });
      expect(fx).toEqual([]);
    });

    it('aborts in-flight work once when a tick reaches the deadline', () => {
      let s = fold(start({ deadlineAt }), stepStart(1));
      let fx;
      [s, fx] = step(s, { type: 'tick', nowMs: deadlineAt });
      expect(s.value).toBe('stepping');
      expect(s.context.abortReason).toBe('deadline');
      expect(fx).toEqual([{ type: 'abortWork', params: { reason: 'deadline' } }]);

      [s, fx] = step(s, { type: 'tick', nowMs: deadlineAt + 500 });
      expect(fx).toEqual([]);
      [s, fx] = step(s, { type: 'abort', reason: 'cancelled' });
      expect(fx).toEqual([]);
      expect(s.context.abortReason).toBe('deadline');
    });

    it('fires the deadline on a tick in launching too (a rehydrated turn re-arms it)', () => {
      const [s, fx] = step(start({ deadlineAt }), { type: 'tick', nowMs: deadlineAt + 1 });
      expect(s.value).toBe('launching');
      expect(fx).toEqual([{ type: 'abortWork', params: { reason: 'deadline' } }]);
    });

    it('relays an abort signal once', () => {
      let s = fold(start(), stepStart(1));
      let fx;
      [s, fx] = step(s, { type: 'abort', reason: 'cancelled' });
      expect(s.value).toBe('stepping');
      expect(s.context.abortReason).toBe('cancelled');
      expect(fx).toEqual([{ type: 'abortWork', params: { reason: 'cancelled' } }]);
      [s, fx] = step(s, { type: 'abort', reason: 'shutdown' });
      expect(fx).toEqual([]);
      expect(s.context.abortReason).toBe('cancelled');
    });

    it('ends with the step reason when the aborted step stops', () => {
      const s0 = fold(start(), stepStart(1), { type: 'abort', reason: 'cancelled' });
      const [s, fx] = step(s0, stepEnd('stopped', 'cancelled'));
      expect(s.value).toBe('ending');
      expect(fx[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'stopped', reason: 'cancelled' } });
    });

    it('launches no further step after an abort, even when the step still ends tool_calls', () => {
      // the abort cancelled the calls that had not started; the step counts them as ended
      const s0 = fold(start(), stepStart(1), toolStart(), { type: 'abort', reason: 'cancelled' });
      const [s, fx] = step(s0, stepEnd('tool_calls', null, { toolCalls: 2 }));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        {
          type: 'endTurn',
          params: { outcome: 'cancelled', reason: 'cancelled', answer: null, steps: 1, toolCalls: 1, usage: ZERO_USAGE },
        },
      ]);
    });

    it('stops with deadline when the deadline abort lands before the step end it outran', () => {
      const s0 = fold(start({ deadlineAt }), stepStart(1), { type: 'tick', nowMs: deadlineAt });
      // the step/end was stamped by a clock slightly behind the one that ticked
      const [, fx] = step(s0, stepEnd('tool_calls', null, { at: at(990) }));
      expect(fx[0]).toMatchObject({ type: 'endTurn', params: { outcome: 'stopped', reason: 'deadline' } });
    });
  });

  describe('usage', () => {
    it('sums every attempt/end, aborted ones included, and marks the sum estimated if any part was', () => {
      const s = fold(
        start(),
        stepStart(1),
        attemptEnd(usage(100, 10)),
        ev('attempt/end', {
          outcome: 'aborted',
          error: { class: 'cancelled', message: 'aborted', retryable: false },
          usage: usage(50, 4, true),
          backoffMs: null,
          latencyMs: null,
        }),
        attemptEnd(usage(1, 1)),
      );
      expect(s.context.usage).toEqual(usage(151, 15, true));
    });
  });

  describe('ending', () => {
    const ended = () => fold(start(), stepStart(1), accepted('ok'), stepEnd('final'));

    it('re-emits endTurn on recover', () => {
      const s0 = ended();
      const [s, fx] = step(s0, { type: 'recover' });
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endTurn', params: s0.context.ending }]);
      expect(s0.context.ending).toMatchObject({ outcome: 'completed', answer: 'ok' });
    });

    it('is done on turn/end', () => {
      const [s, fx] = step(ended(), turnEnd());
      expect(s.value).toBe('done');
      expect(s.status).toBe('done');
      expect(fx).toEqual([]);
    });

    it('is done on turn/end from any state (recovery closes an open turn)', () => {
      const [s] = step(fold(start(), stepStart(1)), turnEnd());
      expect(s.value).toBe('done');
    });

    it('ignores events once done', () => {
      const done = fold(ended(), turnEnd());
      const [s, fx] = step(done, { type: 'recover' });
      expect(s.value).toBe('done');
      expect(fx).toEqual([]);
    });
  });
});

describe('turn machine, refused final answers', () => {
  it('asks again after a refused answer, and fails after the third with the reason', () => {
    let s = fold(start(), stepStart(1));
    let fx;
    [s, fx] = step(s, stepEnd('rejected', 'the answer is not JSON'));
    expect(s.value).toBe('launching');
    expect(s.context.rejections).toBe(1);
    expect(fx).toEqual([{ type: 'startStep', params: { index: 2, toolBudgetLeft: null } }]);
    s = fold(s, stepStart(2));
    [s] = step(s, stepEnd('rejected', 'still not JSON'));
    expect(s.context.rejections).toBe(2);
    s = fold(s, stepStart(3));
    [s, fx] = step(s, stepEnd('rejected', 'bug: expected string'));
    expect(s.value).toBe('ending');
    expect(fx).toEqual([
      {
        type: 'endTurn',
        params: { outcome: 'failed', reason: 'invalid final answer: bug: expected string', answer: null, steps: 3, toolCalls: 0, usage: ZERO_USAGE },
      },
    ]);
  });
});

describe('turn machine, the stop decision and budget aborts', () => {
  const decided = (reason: string, via: 'tool' | 'answer') => ev('stop/decided', { reason, via }, scope);

  it('ends stopped with the model\'s reason after a step whose stop tool ran, though budget is left', () => {
    const s0 = fold(start({ maxSteps: 10 }), stepStart(1), toolStart(), decided('INSUFFICIENT_EVIDENCE', 'tool'));
    const [s, fx] = step(s0, stepEnd('tool_calls'));
    expect(s.value).toBe('ending');
    expect(fx).toEqual([
      { type: 'endTurn', params: { outcome: 'stopped', reason: 'INSUFFICIENT_EVIDENCE', answer: null, steps: 1, toolCalls: 1, usage: ZERO_USAGE } },
    ]);
  });

  it('ends stopped, not completed, when the final answer was a stop decision', () => {
    const s0 = fold(start(), stepStart(1), decided('no evidence', 'answer'), accepted('{"kind":"stop","reason":"no evidence"}'));
    const [, fx] = step(s0, stepEnd('final'));
    expect(fx).toEqual([
      { type: 'endTurn', params: { outcome: 'stopped', reason: 'no evidence', answer: null, steps: 1, toolCalls: 0, usage: ZERO_USAGE } },
    ]);
  });

  it('a token or cost budget that aborts the work stops the turn with it; another abort cancels it', () => {
    for (const reason of ['token_budget', 'cost_budget']) {
      const [s1, fx1] = step(fold(start(), stepStart(1)), { type: 'abort', reason });
      expect(fx1).toEqual([{ type: 'abortWork', params: { reason } }]);
      const [, fx] = step(s1, stepEnd('stopped', reason));
      expect(fx).toEqual([{ type: 'endTurn', params: { outcome: 'stopped', reason, answer: null, steps: 1, toolCalls: 0, usage: ZERO_USAGE } }]);
    }
  });
});
