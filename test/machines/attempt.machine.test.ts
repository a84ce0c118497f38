import { describe, expect, it } from 'vitest';
import { initialTransition, type SnapshotFrom } from 'xstate';
import { attemptMachine, type AttemptInput } from '../../src/machines/attempt.machine.js';
import type { EventData } from '../../src/protocol/events.js';
import { effects, ev, send, usage } from './events.js';

type Snap = SnapshotFrom<typeof attemptMachine>;
type AttemptEnd = EventData<'attempt/end'>;

const INPUT: AttemptInput = { attemptId: 'att-1', index: 2, requestDigest: 'sha256:abc' };

const start = (): Snap => initialTransition(attemptMachine, INPUT)[0];
function attemptEnd(outcome: AttemptEnd['outcome'], error: AttemptEnd['error'] = null) {
  return ev(
    'attempt/end',
    { outcome, error, usage: usage(12, 3), backoffMs: null, latencyMs: 40 },
    { turn: 'turn-1', step: 'step-1', attempt: 'att-1' },
  );
}

describe('attempt machine', () => {
  it('starts streaming and asks to call the model', () => {
    const [s, actions] = initialTransition(attemptMachine, INPUT);
    expect(s.value).toBe('streaming');
    expect(s.context).toEqual(INPUT);
    expect(effects(actions)).toEqual([
      { type: 'callModel', params: { attemptId: 'att-1', index: 2, requestDigest: 'sha256:abc' } },
    ]);
  });

  it.each([
    ['succeeded', null],
    ['failed', { class: 'rate_limit', message: 'slow down', retryable: true }],
    ['interrupted', null],
    ['aborted', { class: 'cancelled', message: 'deadline', retryable: false }],
  ] as const)('ends %s as a final state with no effects', (outcome, error) => {
    const [s, fx] = send(attemptMachine, start(), attemptEnd(outcome, error));
    expect(s.value).toBe(outcome);
    expect(s.status).toBe('done');
    expect(fx).toEqual([]);
  });

  it('closes an attempt left streaming by a crash: recover asks for interruptAttempt', () => {
    const [s, fx] = send(attemptMachine, start(), { type: 'recover' });
    expect(s.value).toBe('streaming');
    expect(fx).toEqual([{ type: 'interruptAttempt', params: { attemptId: 'att-1' } }]);
  });

  it('never calls the model again on recover', () => {
    const [, fx] = send(attemptMachine, start(), { type: 'recover' });
    expect(fx.map((f) => f.type)).not.toContain('callModel');
  });

  it('ignores signals it has no use for while streaming', () => {
    for (const e of [{ type: 'tick', nowMs: 1 }, { type: 'abort', reason: 'deadline' }] as const) {
      const [s, fx] = send(attemptMachine, start(), e);
      expect(s.value).toBe('streaming');
      expect(fx).toEqual([]);
    }
  });

  it('ignores recover once ended', () => {
    const [ended] = send(attemptMachine, start(), attemptEnd('succeeded'));
    const [s, fx] = send(attemptMachine, ended, { type: 'recover' });
    expect(s.value).toBe('succeeded');
    expect(fx).toEqual([]);
  });
});
