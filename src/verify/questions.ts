import type { Check, Report } from './violations.js';

/**
 * A question is asked once and answered at most once (answered, expired or cancelled), and every
 * `ask/answered` names a question the log asked before it, in the call that asked it.
 */
export function createQuestionCheck(report: Report): Check {
  const asked = new Map<string, { seq: number; call: string | undefined }>();
  const answered = new Map<string, number>();
  return {
    event(e) {
      if (e.type === 'ask/asked') {
        const first = asked.get(e.data.questionId);
        if (first !== undefined) report('question.duplicate', e.seq, `question ${e.data.questionId} was already asked at seq ${first.seq}`);
        else asked.set(e.data.questionId, { seq: e.seq, call: e.call });
      } else if (e.type === 'ask/answered') {
        const q = asked.get(e.data.questionId);
        if (q === undefined) {
          report('question.unknown', e.seq, `ask/answered for question ${e.data.questionId}, which was never asked before it`);
          return;
        }
        if (q.call !== e.call) report('question.other_call', e.seq, `question ${e.data.questionId} asked in call ${q.call} is answered in call ${e.call}`);
        const first = answered.get(e.data.questionId);
        if (first !== undefined) report('question.answered_twice', e.seq, `question ${e.data.questionId} was already answered at seq ${first}`);
        else answered.set(e.data.questionId, e.seq);
      }
    },
    end() {},
  };
}
