// `questionToAnswer`, the check local `answer` and the gateway's `ask.answer` share: a question
// the agent never asked is not found (exit 3 either way), also when its ID is a name every object
// has; one answered already is a usage error (exit 2).
import { describe, expect, it } from 'vitest';
import { questionToAnswer } from '../../src/cli/turn/question-prompt.js';
import { ConfigError, NotFoundError } from '../../src/protocol/errors.js';
import { emptyProjection, type QuestionRecord } from '../../src/store/projection.js';

const AGENT = 'agt_01ABCDEFGHJKMNPQRSTVWXYZ01';
const line = (...args: unknown[]): string => `actorloop ${args.join(' ')}`;

function asking(state: QuestionRecord['state']) {
  const p = emptyProjection(AGENT);
  p.questions = {
    q_01ABCDEFGHJKMNPQRSTVWXYZ01: {
      callId: 'call_1', question: 'Which colour?', options: [{ id: 'red', label: 'Red' }], allowFreeText: false, sensitive: false, expiresAt: Date.now() + 60_000, state,
    } as QuestionRecord,
  };
  return p;
}

describe('questionToAnswer', () => {
  it.each(['q_01ABCDEFGHJKMNPQRSTVWXYZ99', 'constructor', 'toString', '__proto__'])('%s, never asked: not found, naming the questions that wait', (id) => {
    let err: unknown;
    try {
      questionToAnswer(AGENT, id, asking('pending'), { optionId: 'red' }, line);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ code: 'cli.question_not_found', message: `${AGENT} has no question ${id}` });
    expect((err as NotFoundError).userMessage()).toContain('questions waiting for an answer: q_01ABCDEFGHJKMNPQRSTVWXYZ01');
  });

  it('one answered already: a usage error', () => {
    expect(() => questionToAnswer(AGENT, 'q_01ABCDEFGHJKMNPQRSTVWXYZ01', asking('answered'), { optionId: 'red' }, line))
      .toThrow(expect.objectContaining({ code: 'cli.question_answered', constructor: ConfigError }));
  });
});
