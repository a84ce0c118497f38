import { describe, expect, it } from 'vitest';
import { checkModelOutput, retryMessage } from '../../src/jobs/workflow-output.js';
import { checkAnswer } from '../../src/model/output-schema.js';

const SCHEMA = { type: 'object', properties: { kind: { type: 'string', enum: ['regression', 'flake'] } }, required: ['kind'] };

describe('model node output', () => {
  it('an answer matching the schema gives its JSON value, fenced or not', () => {
    expect(checkModelOutput(SCHEMA, '{"kind": "flake"}', checkAnswer)).toEqual({ ok: true, value: { kind: 'flake' } });
    expect(checkModelOutput(SCHEMA, '```json\n{"kind": "regression"}\n```', checkAnswer)).toEqual({ ok: true, value: { kind: 'regression' } });
  });

  it('an answer that is not JSON, or does not match, gives the reason a retry is sent', () => {
    const notJson = checkModelOutput(SCHEMA, 'It is a flake.', checkAnswer);
    expect(notJson).toEqual({ ok: false, error: expect.stringMatching(/^the answer is not JSON \(.*\); reply with only a JSON value matching the output schema$/) });
    const wrong = checkModelOutput(SCHEMA, '{"kind": "unsure"}', checkAnswer);
    expect(wrong).toEqual({ ok: false, error: expect.stringMatching(/^the answer does not match the output schema: kind: /) });
    expect(checkModelOutput(SCHEMA, '  ', checkAnswer)).toEqual({ ok: false, error: 'the answer is empty; it must be JSON matching the output schema' });
    expect(retryMessage((wrong as { error: string }).error)).toMatch(/^Your previous answer was refused: the answer does not match the output schema: kind: .*\. Answer again with only the JSON value\.$/);
  });

  it('without a schema the answer is its text', () => {
    expect(checkModelOutput(undefined, 'a summary', checkAnswer)).toEqual({ ok: true, value: 'a summary' });
    expect(checkModelOutput(undefined, null, checkAnswer)).toEqual({ ok: false, error: 'the answer is empty' });
  });
});
