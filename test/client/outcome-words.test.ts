import { describe, expect, it } from 'vitest';
import { ModelErrorClassSchema } from '../../src/protocol/events.js';
import { BUDGET_ABORTS } from '../../src/machines/turn.machine.js';
import { outcomeWords, reasonMeaning } from '../../src/client/outcome-words.js';

// Why a turn ended, in the words the page's summary and runs list show: every reason code the
// machines write has a sentence; any other reason is shown as written.

describe('outcome words', () => {
  it('says what a budget stop means and which flag moves it', () => {
    expect(outcomeWords('stopped', 'step_budget')).toBe('stopped: step_budget — it took as many steps as its turn may (--max-steps)');
    expect(outcomeWords('stopped', 'tool_budget')).toContain('--max-tool-calls');
    for (const reason of BUDGET_ABORTS) expect(reasonMeaning(reason), reason).not.toBeNull();
  });

  it('gives every model error class a sentence, also with the provider message after it', () => {
    for (const c of ModelErrorClassSchema.options) expect(reasonMeaning(c), c).not.toBeNull();
    expect(outcomeWords('failed', 'context_overflow: 400 maximum context length exceeded')).toBe(
      "failed: context_overflow: 400 maximum context length exceeded — the request no longer fits the model's context window",
    );
  });

  it('shows a reason that is not a code as it is, and an outcome without one alone', () => {
    expect(outcomeWords('cancelled', 'the person pressed Ctrl-C twice')).toBe('cancelled: the person pressed Ctrl-C twice');
    expect(outcomeWords('completed', null)).toBe('completed');
    // an own property only: a reason named like an Object prototype key is words, not a code
    expect(reasonMeaning('constructor')).toBeNull();
  });
});
