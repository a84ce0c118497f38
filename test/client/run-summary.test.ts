// The words an operator reads first: a run's task line, and why a turn failed or stopped, from
// what its `turn/end` and its last attempt recorded.
import { describe, expect, test } from 'vitest';
import { taskLine, turnError, type EndedTurn } from '../../src/client/run-summary.js';

const limits = { budgets: { maxSteps: 3, maxToolCalls: 5, deadlineAt: Date.parse('2026-01-02T03:04:05.000Z'), maxTokens: 1000 }, maxOutputTokens: 256 };
const ended = (t: Partial<EndedTurn>): EndedTurn => ({ outcome: 'stopped', reason: null, attemptError: null, limits, ...t });

describe('taskLine', () => {
  test('the first line that holds text, trimmed, cut to the bound with an ellipsis', () => {
    expect(taskLine('\n  Fix the slug test.  \nthen run it')).toBe('Fix the slug test.');
    expect(taskLine('x'.repeat(300))).toHaveLength(200);
    expect(taskLine('x'.repeat(300)).endsWith('…')).toBe(true);
    expect(taskLine('x'.repeat(200))).toBe('x'.repeat(200));
  });
});

describe('turnError', () => {
  test('only a failed or stopped turn has one', () => {
    expect(turnError(ended({ outcome: 'completed', reason: 'step_budget' }))).toBeNull();
    expect(turnError(ended({ outcome: 'cancelled', reason: 'interrupted' }))).toBeNull();
    expect(turnError(ended({ outcome: 'failed', reason: null }))).toBeNull();
  });

  test("a budget stop names the budget the turn's start recorded", () => {
    expect(turnError(ended({ reason: 'step_budget' }))).toEqual({ code: 'step_budget', message: expect.stringContaining('(maxSteps 3)') });
    expect(turnError(ended({ reason: 'tool_budget' }))!.message).toContain('(maxToolCalls 5)');
    expect(turnError(ended({ reason: 'deadline' }))!.message).toContain('2026-01-02T03:04:05.000Z');
    expect(turnError(ended({ reason: 'token_budget' }))!.message).toContain('(maxTokens 1000)');
    expect(turnError(ended({ reason: 'max_output_tokens' }))!.message).toContain('(maxOutputTokens 256)');
    expect(turnError(ended({ reason: 'step_budget', limits: null }))!.message).not.toContain('maxSteps');
  });

  test("the last attempt's error is the model's word; a coded reason splits into its code and words", () => {
    expect(turnError(ended({ outcome: 'failed', reason: 'context_overflow: too long', attemptError: { class: 'context_overflow', message: 'too long' } })))
      .toEqual({ code: 'context_overflow', message: 'too long' });
    expect(turnError(ended({ outcome: 'failed', reason: 'model server error: 502 from upstream' }))).toEqual({ code: 'server', message: '502 from upstream' });
    expect(turnError(ended({ outcome: 'failed', reason: 'context_overflow: the request does not fit' }))).toEqual({ code: 'context_overflow', message: 'the request does not fit' });
    expect(turnError(ended({ outcome: 'failed', reason: 'invalid final answer: not JSON' }))).toEqual({ message: 'invalid final answer: not JSON' });
    expect(turnError(ended({ reason: 'some_new_stop' }))).toEqual({ code: 'some_new_stop', message: 'some new stop' });
  });
});
