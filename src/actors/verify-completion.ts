import type { TurnSettings } from '../protocol/events.js';
import { DEFAULT_MAX_COMPLETION_REJECTIONS } from '../protocol/completion.js';
import { emptyFacts, foldFacts, type FactCall } from '../store/completion-facts.js';
import { completionMissing, policyOf } from './completion-check.js';
import type { Check, Report } from './verify.js';

/**
 * A turn that completed under a completion policy had it met when it completed, re-checked from
 * the log with the fold and the verdict the runtime used (under `code-change` a passing
 * verification after the last change; under `cited` every citation of the answer retrieved), and
 * no turn refused more answers than its limit. An answer kept whole in a blob (the log holds a
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
  return {
    event(e) {
      const call = e.call === undefined ? null : (calls.get(e.call) ?? null);
      foldFacts(facts, e, call, settings?.workspace ?? '');
      switch (e.type) {
        case 'turn/start':
          settings = e.data.settings;
          refused = 0;
          verdict = null;
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
          break;
        }
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
          settings = null;
          verdict = null;
          break;
        default:
          break;
      }
    },
    end() {},
  };
}
