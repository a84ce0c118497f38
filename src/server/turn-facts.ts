import type { TreeClientEvent } from '../client/follower.js';
import type { Budgets } from '../protocol/turn-settings.js';

// What an operator's reads say of an actor that its projection does not keep: the task each turn
// took (the projection keeps the history, not which message was whose task), when the last turn
// ended, the error of the turn's last attempt, the turn's budgets once it ended, and when each
// approval and question was asked. Folded beside the projections in `tree-folds.ts`, one event at
// a time, so a read costs the commits since the last one here too.

/** A turn's budgets and output limit, as its `turn/start` recorded them. */
export interface TurnLimits {
  budgets: Budgets;
  maxOutputTokens: number | null;
}

/** The facts of one actor, as the events folded so far say. */
export interface TurnFacts {
  /** The task of its first turn (the first message that turn took); null before any. */
  firstTask: string | null;
  /** The task of its current or last turn (the first message it took); null before any. */
  task: string | null;
  /** Messages the last `turn/start` claimed whose `user/message` has not come yet. */
  claimed: readonly string[];
  /** When its last turn ended (that `turn/end`'s time); null before any ended. */
  endedAt: string | null;
  /** The error the last `attempt/end` of its current or last turn carried (null: it had none). */
  attemptError: { class: string; message: string } | null;
  /** The budgets and output limit of its current or last turn (null before any). */
  limits: TurnLimits | null;
  /** `attemptError` and `limits` as its last turn ended, kept while the next one runs (null before any ended). */
  ended: { attemptError: TurnFacts['attemptError']; limits: TurnLimits | null } | null;
  /** When each approval and question still open was asked, and the stream sequence it came in. */
  asked: Map<string, { at: string; streamSeq: number }>;
}

/** The facts of an actor with no event yet. */
export function emptyTurnFacts(): TurnFacts {
  return { firstTask: null, task: null, claimed: [], endedAt: null, attemptError: null, limits: null, ended: null, asked: new Map() };
}

/** Folds one event of the actor into its facts, in place. */
export function foldTurnFacts(f: TurnFacts, e: Pick<TreeClientEvent, 'event' | 'streamSeq'>): void {
  const ev = e.event;
  switch (ev.type) {
    case 'turn/start':
      f.claimed = ev.data.messageIds;
      f.attemptError = null;
      f.limits = { budgets: ev.data.settings.budgets, maxOutputTokens: ev.data.settings.maxOutputTokens ?? null };
      break;
    case 'user/message':
      // the first message a turn took is its task (as `actorloop runs` reads it); steers come later
      if (f.claimed.includes(ev.data.messageId)) {
        f.task = ev.data.content;
        f.firstTask ??= ev.data.content;
        f.claimed = [];
      }
      break;
    case 'attempt/end':
      // the last attempt's word: a retry that succeeded leaves no error behind
      f.attemptError = ev.data.error !== null && (ev.data.outcome === 'failed' || ev.data.outcome === 'overflow')
        ? { class: ev.data.error.class, message: ev.data.error.message }
        : null;
      break;
    case 'turn/end':
      f.endedAt = ev.at;
      f.ended = { attemptError: f.attemptError, limits: f.limits };
      break;
    case 'approval/requested':
      f.asked.set(ev.data.approvalId, { at: ev.at, streamSeq: e.streamSeq });
      break;
    case 'ask/asked':
      f.asked.set(ev.data.questionId, { at: ev.at, streamSeq: e.streamSeq });
      break;
    case 'approval/granted':
    case 'approval/denied':
      f.asked.delete(ev.data.approvalId);
      break;
    case 'ask/answered':
      f.asked.delete(ev.data.questionId);
      break;
    default:
      break;
  }
}
