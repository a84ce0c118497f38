import { describe, expect, it } from 'vitest';
import { redactedContent } from '../../src/actors/agent/task-redaction.js';
import { createRedactor } from '../../src/tools/redact.js';

const redactor = createRedactor(['configured-value-42']);
const TOKEN = 'ghp_UnitT0kenAbCdEfGhIjKlMnOpQrStUvWx1357';

describe('redactedContent', () => {
  it('redacts the text of a task, steer, inject and follow-up, and counts what it took out', () => {
    for (const kind of ['user_message', 'steer', 'inject', 'follow_up']) {
      expect(redactedContent(kind, `use ${TOKEN} and configured-value-42`, redactor)).toEqual({
        content: 'use [REDACTED:github_token] and [REDACTED:configured]', redactions: 2,
      });
    }
  });

  it('redacts each string of a subagent task or an answer, and the content stays JSON', () => {
    // a value that ends in a backslash before a quote: redacting the raw JSON text would unescape the quote
    const task = JSON.stringify({ name: 'w', task: `deploy with token=abc123\\" then ${TOKEN}`, depth: 1 });
    const out = redactedContent('subagent_task', task, redactor);
    expect(out.redactions).toBe(2);
    expect(JSON.parse(out.content)).toEqual({ name: 'w', task: 'deploy with token=[REDACTED:token]" then [REDACTED:github_token]', depth: 1 });
    const answer = JSON.stringify({ questionId: 'q_1', text: TOKEN });
    expect(JSON.parse(redactedContent('ask_answer', answer, redactor).content)).toEqual({ questionId: 'q_1', text: '[REDACTED:github_token]' });
  });

  it('keeps content with nothing to redact byte for byte, and leaves other kinds alone', () => {
    const spaced = '{ "questionId": "q_1",  "optionId": "red" }';
    expect(redactedContent('ask_answer', spaced, redactor)).toEqual({ content: spaced, redactions: 0 });
    expect(redactedContent('interrupt', TOKEN, redactor)).toEqual({ content: TOKEN, redactions: 0 });
    expect(redactedContent('ask_answer', `not json ${TOKEN}`, redactor)).toEqual({ content: 'not json [REDACTED:github_token]', redactions: 1 });
  });
});
