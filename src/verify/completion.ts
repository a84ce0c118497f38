import type { TurnSettings } from '../protocol/events.js';
import { DEFAULT_MAX_COMPLETION_REJECTIONS } from '../protocol/completion.js';
import { emptyFacts, foldFacts, type FactCall } from '../store/completion-facts.js';
import { completionMissing, policyOf } from '../store/completion-check.js';
import type { Check, Report } from './violations.js';
import { COMPLETION_BLOCK_PREFIX, COMPLETION_EXHAUSTED, COMPLETION_EXHAUSTED_STOP } from '../protocol/completion.js';

/**
 * A turn that completed under a completion policy had it met when it completed, re-checked from
 * the log with the fold and the verdict the runtime used (under `code-change` a passing
 * verification after the last change; under `cited` every citation of the answer retrieved), and
 * no turn refused more answers than its limit. Under `on_completion_exhausted = "block"` the
 * refusal at the limit with an active goal is followed, in its turn, by the runtime's `blocked`
 * update of that goal (`completion.not_blocked`), and a turn stopped `completion_exhausted` had
 * one. An answer kept whole in a blob (the log holds a
 * preview) is not re-read here: its citations are not checked.
 */
export function createCompletionCheck(report: Report): Check {
  const facts = emptyFacts();
  // the calls the fold reads, as the projection keeps them: by call ID, until their step ends
  const calls = new Map<string, FactCall>();
  let settings: TurnSettings | null = null;
  let refused = 0;
  /** The last answer of the open turn, when the log holds it whole. */
  let answer: string | null = null;
  /** What that answer lacked when its step ended: the facts then are the facts it was judged on. */
  let verdict: { seq: number; missing: string[] } | null = null;
  /** The refusal at the limit, under `block` with an active goal: the goal's block must follow it. */
  let mustBlock: number | null = null;
  /** The runtime blocked the goal for the completion policy in the open turn. */
  let blocked = false;
  return {
    event(e) {
      const call = e.call === undefined ? null : (calls.get(e.call) ?? null);
      foldFacts(facts, e, call, settings?.workspace ?? '');
      switch (e.type) {
        case 'turn/start':
          settings = e.data.settings;
          refused = 0;
          verdict = null;
          mustBlock = null;
          blocked = false;
          break;
        case 'tool/call':
          if (e.call) calls.set(e.call, { name: e.data.name, arguments: e.data.arguments, effects: e.data.effects, started: false });
          break;
        case 'policy/decided':
          if (call) call.verifies = e.data.verification === true;
          break;
        case 'tool/start':
          if (call) {
            call.started = true;
            call.startedAt = e.seq;
          }
          break;
        case 'assistant/accepted':
          answer = e.data.contentRef === undefined ? (e.data.content ?? '') : null;
          break;
        case 'completion/rejected': {
          refused += 1;
          const limit = settings?.maxCompletionRejections ?? DEFAULT_MAX_COMPLETION_REJECTIONS;
          if (refused > limit) report('completion.over_limit', e.seq, `turn ${e.turn} refused ${refused} answers, over its limit of ${limit}`);
          if (refused === limit && settings?.onCompletionExhausted === 'block' && e.data.goalActive === true) mustBlock = e.seq;
          break;
        }
        case 'goal/updated':
          if (e.data.phase === 'blocked' && e.data.by === 'runtime' && e.data.reason?.startsWith(COMPLETION_BLOCK_PREFIX)) blocked = true;
          // a person who changed the goal meanwhile took the decision out of the runtime's hands
          if (e.data.by === 'person') mustBlock = null;
          break;
        case 'step/end':
          if (e.data.outcome === 'final' && settings && answer !== null) verdict = { seq: e.seq, missing: completionMissing(settings, facts, answer) };
          calls.clear();
          answer = null;
          break;
        case 'turn/end':
          if (e.data.outcome === 'completed' && settings && verdict !== null && verdict.missing.length > 0) {
            report('completion.unmet', e.seq,
              `turn ${e.turn} completed under completion policy "${policyOf(settings)}" with its answer (step/end seq ${verdict.seq}) lacking: ${verdict.missing.join('; ')}`);
          }
          {
            const exhausted = e.data.reason === COMPLETION_EXHAUSTED_STOP || e.data.reason?.startsWith(COMPLETION_EXHAUSTED) === true;
            if (!blocked && ((mustBlock !== null && exhausted) || e.data.reason === COMPLETION_EXHAUSTED_STOP)) {
              report('completion.not_blocked', e.seq,
                `turn ${e.turn} ended ${e.data.outcome} at its completion limit under on_completion_exhausted = "block"${mustBlock !== null ? ` (refusal seq ${mustBlock})` : ''} without blocking its goal`);
            }
          }
          settings = null;
          verdict = null;
          mustBlock = null;
          blocked = false;
          break;
        default:
          break;
      }
    },
    end() {},
  };
}
