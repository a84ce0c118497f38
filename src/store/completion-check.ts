import { citationsOf, evidenceKey, type CompleteWhen } from '../protocol/completion.js';
import type { TurnSettings } from '../protocol/events.js';
import { unverifiedChange, type CompletionFacts } from './completion-facts.js';

// The completion policy's verdict on a final answer (design §6a). Pure: the facts are folded from
// the log (`completion-facts.ts`), so the incarnation that commits a refusal, one rehydrated after
// a crash, and `verify` reading the log afterwards all reach the same verdict.

/** The completion policy a turn runs under (`answer` for logs written before policies). */
export function policyOf(s: Pick<TurnSettings, 'completeWhen'>): CompleteWhen {
  return s.completeWhen ?? 'answer';
}

/**
 * What a final answer lacks under the turn's completion policy, each item a sentence the model
 * can act on; empty: the answer completes the turn.
 */
export function completionMissing(s: TurnSettings, facts: CompletionFacts | undefined, answer: string): string[] {
  const policy = policyOf(s);
  switch (policy) {
    case 'answer':
      return [];
    case 'code-change': {
      if (!facts || !unverifiedChange(facts)) return [];
      const commands = (s.verifyCommands ?? []).map((c) => `\`${c}\``).join(' or ');
      const what = facts.verifiedFrom === null ? 'no verification passed in this turn' : 'files changed after the last verification that passed';
      return [`files changed and ${what}: run ${commands} with the shell tool and make it pass (exit 0) after your last change`];
    }
    case 'cited': {
      const citations = citationsOf(answer, s.outputSchema != null);
      const cite = s.outputSchema != null ? 'list them in the `citations` array' : 'cite them as [path] or [art_…]';
      if (citations.length === 0) return [`the answer cites no evidence: read the files (read_file) or search (search) that support it, then ${cite}`];
      const evidence = facts?.evidence ?? {};
      return citations
        .filter((c) => evidence[evidenceKey(c, s.workspace)] !== true)
        .map((c) => `citation [${c}] names nothing this session retrieved: read it (read_file, search or artifact_read) before citing it, or drop it`);
    }
  }
}
