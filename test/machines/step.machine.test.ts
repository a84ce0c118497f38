import { describe, expect, it } from 'vitest';
import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import { stepMachine, type StepEvent, type StepInput } from '../../src/machines/step.machine.js';
import type { EventData, ModelErrorClass } from '../../src/protocol/events.js';
import { at, effects, ev, feed, send, T0_MS, usage } from './events.js';

type Snap = SnapshotFrom<typeof stepMachine>;
type AttemptEnd = EventData<'attempt/end'>;
type Accepted = EventData<'assistant/accepted'>;

const INPUT: StepInput = { stepId: 'step-1', index: 1, maxAttempts: 3, toolBudgetLeft: null };
const scope = { turn: 'turn-1', step: 'step-1' };

const CALLS = [
  { id: 'p0', name: 'read_file', arguments: '{"path":"a.txt"}' },
  { id: 'p1', name: 'list_dir', arguments: '{"path":"."}' },
];

function start(input: Partial<StepInput> = {}): Snap {
  return initialTransition(stepMachine, { ...INPUT, ...input })[0];
}
const prepared = () => ev('request/prepared', { digest: 'sha256:abc', bytes: 1200, messages: 3 }, scope);
const attemptStart = (index: number) => ev('attempt/start', { index, requestDigest: 'sha256:abc' }, { ...scope, attempt: `a${index}` });
function attemptEnd(outcome: AttemptEnd['outcome'], extra: Partial<AttemptEnd> = {}, time?: string) {
  return ev(
    'attempt/end',
    { outcome, error: null, usage: usage(10, 2), backoffMs: null, latencyMs: 20, ...extra },
    { ...scope, at: time },
  );
}
function failure(cls: ModelErrorClass, message: string, retryable: boolean, backoffMs: number | null = null, time?: string) {
  return attemptEnd('failed', { error: { class: cls, message, retryable }, backoffMs }, time);
}
function accepted(content: string | null, toolCalls: Accepted['toolCalls'] = [], finishReason?: Accepted['finishReason']) {
  return ev(
    'assistant/accepted',
    { content, toolCalls, finishReason: finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop') },
    scope,
  );
}
function toolCall(index: number) {
  const c = CALLS[index]!;
  return ev(
    'tool/call',
    {
      index,
      providerId: c.id,
      name: c.name,
      arguments: c.arguments,
      status: 'valid',
      error: null,
      effects: 'none',
      recovery: 'rerun',
      withinBudget: true,
    },
    { ...scope, call: `call-${index}` },
  );
}
type ToolEnd = 'tool/result' | 'tool/denied' | 'tool/cancelled' | 'tool/outcome_unknown';
function toolEnd(type: ToolEnd, index: number): StepEvent {
  const s = { ...scope, call: `call-${index}` };
  switch (type) {
    case 'tool/result':
      return ev('tool/result', { ok: true, output: 'contents', error: null, durationMs: 3 }, s);
    case 'tool/denied':
      return ev('tool/denied', { reason: 'denied by policy' }, s);
    case 'tool/cancelled':
      return ev('tool/cancelled', { reason: 'tool_budget' }, s);
    case 'tool/outcome_unknown':
      return ev('tool/outcome_unknown', { reason: 'crashed mid-call' }, s);
  }
}
const stepEndEvent = () => ev('step/end', { outcome: 'final', reason: null, toolCalls: 0 }, scope);

function fold(s: Snap, ...events: StepEvent[]): Snap {
  return feed(stepMachine, s, events);
}
function step(s: Snap, e: StepEvent) {
  return send(stepMachine, s, e);
}
/** A step whose first attempt is streaming. */
const attempting = (input: Partial<StepInput> = {}) => fold(start(input), prepared(), attemptStart(1));
/** A step whose attempt succeeded, waiting for the accepted output. */
const accepting = () => fold(attempting(), attemptEnd('succeeded'));
/** A step dispatching both CALLS. */
const inTools = () => fold(accepting(), accepted(null, CALLS));

describe('step machine', () => {
  describe('assembling', () => {
    it('starts assembling and asks to prepare the request', () => {
      const [s, actions] = initialTransition(stepMachine, { ...INPUT, index: 4 });
      expect(s.value).toBe('assembling');
      expect(s.context).toMatchObject({ attempts: 0, retryAt: null, expectedCalls: 0, ended: 0, ending: null });
      expect(effects(actions)).toEqual([{ type: 'prepareRequest', params: { index: 4 } }]);
    });

    it('re-emits prepareRequest on recover', () => {
      const [s, fx] = step(start(), { type: 'recover' });
      expect(s.value).toBe('assembling');
      expect(fx).toEqual([{ type: 'prepareRequest', params: { index: 1 } }]);
    });

    it('stops on abort before any attempt', () => {
      const [s, fx] = step(start(), { type: 'abort', reason: 'deadline' });
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'stopped', reason: 'deadline', toolCalls: 0 } }]);
    });

    it('asks for attempt 1 with no backoff once the request is prepared', () => {
      const [s, fx] = step(start(), prepared());
      expect(s.value).toEqual({ generating: 'launching' });
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 1, notBeforeMs: null } }]);
    });
  });

  describe('generating', () => {
    it('re-emits startAttempt on recover while launching', () => {
      const [s, fx] = step(fold(start(), prepared()), { type: 'recover' });
      expect(s.value).toEqual({ generating: 'launching' });
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 1, notBeforeMs: null } }]);
    });

    it('stops on abort while launching', () => {
      const [s, fx] = step(fold(start(), prepared()), { type: 'abort', reason: 'cancelled' });
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'cancelled', reason: 'cancelled', toolCalls: 0 } }]);
    });

    it('is attempting after attempt/start, counting the attempt', () => {
      const [s, fx] = step(fold(start(), prepared()), attemptStart(1));
      expect(s.value).toEqual({ generating: 'attempting' });
      expect(s.context.attempts).toBe(1);
      expect(fx).toEqual([]);
    });

    it('leaves recover while attempting to the attempt machine', () => {
      const [s, fx] = step(attempting(), { type: 'recover' });
      expect(s.value).toEqual({ generating: 'attempting' });
      expect(fx).toEqual([]);
    });

    it('accepts after a succeeded attempt', () => {
      const [s, fx] = step(attempting(), attemptEnd('succeeded'));
      expect(s.value).toBe('accepting');
      expect(fx).toEqual([]);
    });

    it('retries a retryable failure after its backoff, as an absolute time', () => {
      const [s, fx] = step(attempting(), failure('rate_limit', 'slow down', true, 2_000, at(500)));
      expect(s.value).toEqual({ generating: 'launching' });
      expect(s.context.retryAt).toBe(T0_MS + 2_500);
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: T0_MS + 2_500 } }]);
    });

    it('retries at once when a retryable failure has no backoff', () => {
      const [, fx] = step(attempting(), failure('network', 'reset', true, null, at(100)));
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: T0_MS + 100 } }]);
    });

    it('re-emits the retry with its backoff on recover, and clears it once the attempt starts', () => {
      const s0 = fold(attempting(), failure('overloaded', 'busy', true, 1_000));
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: T0_MS + 1_000 } }]);
      const [s] = step(s0, attemptStart(2));
      expect(s.context).toMatchObject({ attempts: 2, retryAt: null });
    });

    it('fails, naming the class, when retryable attempts are exhausted', () => {
      let s = attempting({ maxAttempts: 2 });
      let fx;
      [s, fx] = step(s, failure('rate_limit', 'slow down', true, 10));
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: T0_MS + 10 } }]);
      [s, fx] = step(fold(s, attemptStart(2)), failure('rate_limit', 'still slow', true, 10));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([
        { type: 'endStep', params: { outcome: 'failed', reason: 'model rate_limit error: still slow', toolCalls: 0 } },
      ]);
    });

    it('gives up at once with maxAttempts 1', () => {
      const [s, fx] = step(attempting({ maxAttempts: 1 }), failure('server', '500', true, 10));
      expect(s.value).toBe('ending');
      expect(fx[0]).toMatchObject({ type: 'endStep', params: { outcome: 'failed' } });
    });

    it.each<[ModelErrorClass, string]>([
      ['auth', 'bad key'],
      ['invalid_request', 'unknown parameter'],
      ['context_overflow', 'too long'],
    ])('fails without retry on non-retryable %s', (cls, message) => {
      const [s, fx] = step(attempting(), failure(cls, message, false));
      expect(s.value).toBe('ending');
      expect(s.context.attempts).toBe(1);
      expect(fx).toEqual([
        { type: 'endStep', params: { outcome: 'failed', reason: `model ${cls} error: ${message}`, toolCalls: 0 } },
      ]);
    });

    it('fails with a generic reason when a failed attempt carries no error', () => {
      const [, fx] = step(attempting(), attemptEnd('failed'));
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'failed', reason: 'model attempt failed', toolCalls: 0 } }]);
    });

    it('starts a new attempt, without backoff, after an interrupted one', () => {
      const [s, fx] = step(attempting(), attemptEnd('interrupted', {}, at(5_000)));
      expect(s.value).toEqual({ generating: 'launching' });
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: null } }]);
    });

    it('does not spend the retry budget on interruptions', () => {
      // a crash is not the model's failure: even with one attempt allowed, the step goes on
      const [, fx] = step(attempting({ maxAttempts: 1 }), attemptEnd('interrupted'));
      expect(fx).toEqual([{ type: 'startAttempt', params: { index: 2, notBeforeMs: null } }]);
    });

    it('stops when the attempt was aborted, with the abort message', () => {
      const [s, fx] = step(
        attempting(),
        attemptEnd('aborted', { error: { class: 'cancelled', message: 'deadline', retryable: false } }),
      );
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'stopped', reason: 'deadline', toolCalls: 0 } }]);
    });

    it('stops on the budget when a stream was cut past its reservation, never retrying it', () => {
      for (const budget of ['token_budget', 'cost_budget'] as const) {
        const [s, fx] = step(attempting({ maxAttempts: 4 }), attemptEnd('failed', { error: { class: budget, message: 'cut', retryable: false } }));
        expect(s.value).toBe('ending');
        expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'stopped', reason: budget, toolCalls: 0 } }]);
      }
    });

    it('stops (not cancelled) when its attempt was refused for a budget before it started', () => {
      const [, fx] = step(fold(start(), prepared()), { type: 'abort', reason: 'cost_budget' });
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'stopped', reason: 'cost_budget', toolCalls: 0 } }]);
    });

    it('stops as cancelled when an aborted attempt carries no error', () => {
      const [, fx] = step(attempting(), attemptEnd('aborted'));
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'cancelled', reason: 'cancelled', toolCalls: 0 } }]);
    });
  });

  describe('accepting', () => {
    it('ends final on an answer with content and no calls', () => {
      const [s, fx] = step(accepting(), accepted('Here it is.'));
      expect(s.value).toBe('ending');
      expect(s.context.ending).toEqual({ outcome: 'final', reason: null, toolCalls: 0 });
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'final', reason: null, toolCalls: 0 } }]);
    });

    it('treats finish tool_calls without calls as an answer', () => {
      const [, fx] = step(accepting(), accepted('Done.', [], 'tool_calls'));
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'final', reason: null, toolCalls: 0 } }]);
    });

    it.each([null, '', '  \n\t'])('fails with empty_answer on content %j', (content) => {
      const [s, fx] = step(accepting(), accepted(content));
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'failed', reason: 'empty_answer', toolCalls: 0 } }]);
    });

    it.each([
      ['length', 'stopped', 'max_output_tokens'],
      ['content_filter', 'stopped', 'content_filter'],
      ['refusal', 'stopped', 'refusal'],
      ['error', 'failed', 'model_error'],
    ] as const)('maps finish %s to %s %s, whatever the content', (finishReason, outcome, reason) => {
      for (const content of ['partial text', null]) {
        const [s, fx] = step(accepting(), accepted(content, [], finishReason));
        expect(s.value).toBe('ending');
        expect(fx).toEqual([{ type: 'endStep', params: { outcome, reason, toolCalls: 0 } }]);
      }
    });

    it('dispatches the calls of an output with tool calls', () => {
      const [s, fx] = step(fold(attempting({ toolBudgetLeft: 7 }), attemptEnd('succeeded')), accepted('checking', CALLS));
      expect(s.value).toBe('tools');
      expect(s.context).toMatchObject({ calls: CALLS, expectedCalls: 2, ended: 0 });
      expect(fx).toEqual([{ type: 'dispatchCalls', params: { calls: CALLS, toolBudgetLeft: 7 } }]);
    });

    it('has nothing to re-emit on recover (the accepted output commits with the attempt end)', () => {
      const [s, fx] = step(accepting(), { type: 'recover' });
      expect(s.value).toBe('accepting');
      expect(fx).toEqual([]);
    });
  });

  describe('tools', () => {
    it('re-emits dispatchCalls on recover', () => {
      const [s, fx] = step(fold(inTools(), toolCall(0)), { type: 'recover' });
      expect(s.value).toBe('tools');
      expect(fx).toEqual([{ type: 'dispatchCalls', params: { calls: CALLS, toolBudgetLeft: null } }]);
    });

    it('registers tool/call events without effects', () => {
      const [s, fx] = step(inTools(), toolCall(0));
      expect(s.context.registered).toBe(1);
      expect(fx).toEqual([]);
    });

    it('waits while a call is still open', () => {
      const [s, fx] = step(fold(inTools(), toolCall(0), toolCall(1)), toolEnd('tool/result', 0));
      expect(s.value).toBe('tools');
      expect(s.context.ended).toBe(1);
      expect(fx).toEqual([]);
    });

    const ENDS: ToolEnd[] = ['tool/result', 'tool/denied', 'tool/cancelled', 'tool/outcome_unknown'];
    const pairs = ENDS.flatMap((a) => ENDS.map((b) => [a, b] as const));

    it.each(pairs)('ends tool_calls once every call ended (%s, %s)', (first, second) => {
      const s0 = fold(inTools(), toolCall(0), toolCall(1), toolEnd(first, 0));
      const [s, fx] = step(s0, toolEnd(second, 1));
      expect(s.value).toBe('ending');
      expect(s.context.ending).toEqual({ outcome: 'tool_calls', reason: null, toolCalls: 2 });
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'tool_calls', reason: null, toolCalls: 2 } }]);
    });
  });

  describe('ending', () => {
    it('re-emits endStep on recover', () => {
      const s0 = fold(accepting(), accepted('answer'));
      const [s, fx] = step(s0, { type: 'recover' });
      expect(s.value).toBe('ending');
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'final', reason: null, toolCalls: 0 } }]);
    });

    it('re-emits a tool_calls endStep on recover', () => {
      const s0 = fold(inTools(), toolEnd('tool/result', 0), toolEnd('tool/cancelled', 1));
      const [, fx] = step(s0, { type: 'recover' });
      expect(fx).toEqual([{ type: 'endStep', params: { outcome: 'tool_calls', reason: null, toolCalls: 2 } }]);
    });

    it('is done on step/end', () => {
      const [s, fx] = step(fold(accepting(), accepted('answer')), stepEndEvent());
      expect(s.value).toBe('done');
      expect(s.status).toBe('done');
      expect(fx).toEqual([]);
    });

    it('is done on step/end from any state (recovery closes an open step)', () => {
      const [s] = step(attempting(), stepEndEvent());
      expect(s.value).toBe('done');
    });
  });

  it('runs a whole step from the log: retry, accept, two calls, end', () => {
    const events: StepEvent[] = [
      prepared(),
      attemptStart(1),
      failure('overloaded', 'busy', true, 250, at(1_000)),
      attemptStart(2),
      attemptEnd('succeeded'),
      accepted(null, CALLS),
      toolCall(0),
      toolCall(1),
      toolEnd('tool/result', 0),
      toolEnd('tool/result', 1),
    ];
    const s = fold(start(), ...events);
    expect(s.value).toBe('ending');
    expect(s.context).toMatchObject({ attempts: 2, retryAt: null, registered: 2, ended: 2 });
    expect(s.context.ending).toEqual({ outcome: 'tool_calls', reason: null, toolCalls: 2 });
  });
});

describe('step machine, context overflow and compaction', () => {
  const rejected = (reason: 'conflict' | 'no_gain' | 'nothing_to_compact', endsStep: boolean) => ev('compaction/rejected', { checkpoint: 'ckpt_1', reason, message: 'nothing closed is left to compact', endsStep }, { step: 'step_x' });
  const started = ev('compaction/started', { checkpoint: 'ckpt_1', trigger: 'budget', range: { from: 1, to: 3 }, historyRevision: 2, requestRevision: 1, tokensBefore: 9000 }, { step: 'step_x' });
  const start = () => initialTransition(stepMachine, { stepId: 'step_x', index: 1, maxAttempts: 3, toolBudgetLeft: null })[0];

  it('assembles the request again when the provider refused it as too long (which compacts), without counting an attempt', () => {
    let s = start();
    for (const e of [
      ev('request/prepared', { digest: 'sha256:a', bytes: 10, messages: 1 }, { step: 'step_x' }),
      ev('attempt/start', { index: 1, requestDigest: 'sha256:a' }, { step: 'step_x', attempt: 'att_1' }),
    ]) [s] = transition(stepMachine, s, e);
    const [after, actions] = transition(
      stepMachine,
      s,
      ev('attempt/end', {
        outcome: 'overflow',
        error: { class: 'context_overflow', message: 'maximum context length is 128000 tokens', retryable: false },
        usage: { inputTokens: 0, outputTokens: 0, estimated: false },
        backoffMs: null,
        latencyMs: 5,
      }, { step: 'step_x', attempt: 'att_1' }),
    );
    expect(after.value).toBe('assembling');
    expect(actions.map((a) => a.type)).toEqual(['prepareRequest']);
  });

  it('compacts on compaction/started, and assembles again once the checkpoint is committed', () => {
    const [compacting, entry] = transition(stepMachine, start(), started);
    expect(compacting.value).toBe('compacting');
    expect(entry.map((a) => a.type)).toEqual(['compact']);
    const committed = ev('checkpoint/committed', { id: 'ckpt_1', range: { from: 1, to: 3 }, historyRevision: 2, text: 't', digest: 'sha256:t', tokensBefore: 5000, tokensAfter: 100, kept: ['task'], files: [] }, { step: 'step_x' });
    const [again, actions] = transition(stepMachine, compacting, committed);
    expect(again.value).toBe('assembling');
    expect(actions.map((a) => a.type)).toEqual(['prepareRequest']);
  });

  it('asks for the summary again after its attempt was interrupted (a crash), and re-issues compact on recover', () => {
    const [compacting] = transition(stepMachine, start(), started);
    const [same, actions] = transition(stepMachine, compacting, ev('attempt/end', { outcome: 'interrupted', error: null, usage: { inputTokens: 0, outputTokens: 0, estimated: true }, backoffMs: null, latencyMs: null }, { step: 'step_x', attempt: 'att_c' }));
    expect(same.value).toBe('compacting');
    expect(actions.map((a) => a.type)).toEqual(['compact']);
    const [, onRecover] = transition(stepMachine, compacting, { type: 'recover' } as never);
    expect(onRecover.map((a) => a.type)).toEqual(['compact']);
  });

  it('takes a new range after a conflict, and ends the step context_cannot_fit on a rejection that ends it', () => {
    const [compacting] = transition(stepMachine, start(), started);
    const [again] = transition(stepMachine, compacting, rejected('conflict', false));
    expect(again.value).toBe('assembling');
    const [ending, actions] = transition(stepMachine, compacting, rejected('no_gain', true));
    expect(ending.value).toBe('ending');
    expect(actions.map((a) => ({ type: a.type, params: a.params }))).toEqual([
      { type: 'endStep', params: { outcome: 'failed', reason: 'context_cannot_fit: nothing closed is left to compact', toolCalls: 0 } },
    ]);
  });

  it('ends the step from assembling when no compaction could start, and ignores a rejection that does not end it', () => {
    const [ending] = transition(stepMachine, start(), rejected('nothing_to_compact', true));
    expect(ending.value).toBe('ending');
    const [stays] = transition(stepMachine, start(), rejected('nothing_to_compact', false));
    expect(stays.value).toBe('assembling');
  });
});

describe('step machine, refused answer', () => {
  it('ends the step rejected with the reason', () => {
    const [s0] = initialTransition(stepMachine, { stepId: 'step_x', index: 1, maxAttempts: 3, toolBudgetLeft: null });
    let s = s0;
    for (const e of [
      ev('request/prepared', { digest: 'sha256:a', bytes: 10, messages: 1 }, { step: 'step_x' }),
      ev('attempt/start', { index: 1, requestDigest: 'sha256:a' }, { step: 'step_x', attempt: 'att_1' }),
      ev('attempt/end', { outcome: 'succeeded', error: null, usage: { inputTokens: 1, outputTokens: 1, estimated: false }, backoffMs: null, latencyMs: 1 }, { step: 'step_x', attempt: 'att_1' }),
    ]) [s] = transition(stepMachine, s, e);
    expect(s.value).toBe('accepting');
    const [after, actions] = transition(stepMachine, s, ev('assistant/rejected', { reason: 'the answer is not JSON', content: 'hello' }, { step: 'step_x', attempt: 'att_1' }));
    expect(after.value).toBe('ending');
    expect(actions.map((a) => ({ type: a.type, params: a.params }))).toEqual([
      { type: 'endStep', params: { outcome: 'rejected', reason: 'the answer is not JSON', toolCalls: 0 } },
    ]);
  });
});
