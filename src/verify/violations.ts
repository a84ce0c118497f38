import type { ActorEvent } from '../protocol/events.js';

// The verdicts of the log checker: stable codes, a violation, and how checks report them.

/**
 * Every code `verifyLog` reports, one per invariant of design §7 that a single actor's log can
 * show. Codes are stable: chaos runs and `actorloop verify` decide on them, never on messages.
 */
export const VIOLATION_CODES = [
  'seq.gap',
  'epoch.backwards',
  'turn.epochs_interleaved',
  'event.actor',
  'scope.turn',
  'scope.step',
  'scope.attempt',
  'scope.call',
  'turn.nested',
  'turn.end_without_start',
  'turn.completed_without_answer',
  'step.outside_turn',
  'step.nested',
  'step.end_without_start',
  'step.open_at_turn_end',
  'attempt.outside_step',
  'attempt.nested',
  'attempt.end_without_start',
  'attempt.ended_twice',
  'attempt.unsettled',
  'compaction.unstarted',
  'compaction.closed_twice',
  'compaction.nested',
  'compaction.mismatch',
  'compaction.cas',
  'compaction.missing_pins',
  'compaction.open_at_step_end',
  'call.duplicate',
  'call.start_without_intent',
  'call.start_after_end',
  'call.start_without_allow',
  'approval.duplicate',
  'approval.unknown',
  'approval.other_call',
  'approval.answered_twice',
  'call.effect_twice',
  'call.result_without_start',
  'call.end_without_intent',
  'call.ended_twice',
  'call.denied_after_start',
  'call.cancelled_unconfirmed',
  'call.reconcile_without_start',
  'call.reconciled_twice',
  'call.unended',
  'inbox.received_twice',
  'inbox.claim_unreceived',
  'inbox.included_twice',
  'inbox.included_unreserved',
  'inbox.requeue_invalid',
  'inbox.lost',
  'interrupt.dispatch_after',
  'interrupt.turn_completed',
  'interrupt.unended',
  'recovery.unclosed',
  'recovery.continuation_without_start',
  'recovery.killed_inconsistent',
  'parked.outside_turn',
  'parked.not_pending',
  'question.duplicate',
  'question.unknown',
  'question.other_call',
  'question.answered_twice',
  'budget.reserved_twice',
  'budget.settled_twice',
  'budget.settle_unknown',
  'budget.unsettled',
  'budget.over_limit',
  'budget.unknown_goal',
  'completion.unmet',
  'completion.over_limit',
  'completion.not_blocked',
  'goal.unknown',
  'goal.revision',
  'goal.usage',
  'goal.updated_after_end',
  'goal.continuation_unowed',
  'goal.continuation_lost',
  'job.uncreated',
  'job.edge',
  'job.end_missing',
  'job.ended_twice',
  'job.unended',
  'job.started_twice',
  'job.started_after_end',
  'job.notified_early',
  'job.notified_twice',
] as const;

/** One of `VIOLATION_CODES`. */
export type ViolationCode = (typeof VIOLATION_CODES)[number];

/**
 * One broken invariant. `seq` points at the event that is wrong or, when something is missing
 * (an end, a continuation), at the event that opened what was never closed.
 */
export interface Violation {
  code: string;
  seq: number | null;
  message: string;
}

/** Records one violation; the checks call it as they find things. */
export type Report = (code: ViolationCode, seq: number | null, message: string) => void;

/** One concern of `verifyLog`: sees every event in log order, then the end of the log. */
export interface Check {
  event(e: ActorEvent): void;
  end(complete: boolean): void;
}

/**
 * Every code `verifyTree` reports on top of each log's own (`VIOLATION_CODES`): the invariants of
 * design §6b that only the logs of a tree together show. Stable, like verifyLog's.
 */
export const TREE_VIOLATION_CODES = [
  'tree.root_missing',
  'tree.child_missing',
  'tree.child_unrequested',
  'tree.child_requested_twice',
  'tree.task_missing',
  'tree.task_mismatch',
  'tree.task_twice',
  'tree.spawn_unended',
  'tree.notice_unincluded',
  'tree.notice_unreceived',
  'tree.notice_included_twice',
  'tree.spawn_outside_turn',
  'tree.tools_wider',
  'tree.mode_looser',
  'tree.readonly_dropped',
  'tree.over_budget',
  'tree.too_wide',
  'tree.carve_wider',
  'tree.carve_unreserved',
  'tree.carve_exceeded',
  'tree.job_unowned',
] as const;

/** One of `TREE_VIOLATION_CODES`. */
export type TreeViolationCode = (typeof TREE_VIOLATION_CODES)[number];

/** A broken invariant of the tree: a `Violation` whose `seq` is in the log of `actorId`. */
export interface TreeViolation extends Violation {
  actorId: string;
}

/** Records one tree violation; the tree checks call it as they find things. */
export type TreeReport = (code: TreeViolationCode, actorId: string, seq: number | null, message: string) => void;
