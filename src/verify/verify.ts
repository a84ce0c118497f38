import type { ActorEvent } from '../protocol/events.js';
import type { Check, Report, Violation } from './violations.js';

export { VIOLATION_CODES, type Violation, type ViolationCode } from './violations.js';
import { createCallCheck } from './calls.js';
import { createScopeCheck } from './scopes.js';
import { createInboxCheck, createInterruptCheck } from './inbox.js';
import { createQuestionCheck } from './questions.js';
import { createBudgetCheck } from './budgets.js';
import { createCompletionCheck } from './completion.js';
import { createContinuationCheck, createGoalCheck } from './goals.js';
import { createCompactionCheck } from './compaction.js';
import { createJobCheck } from './jobs.js';

/** Options of `verifyLog`. */
export interface VerifyOptions {
  /**
   * The log is finished: no writer will append to it again (a run that ended, a chaos run after
   * its last recovery). Then whatever is still open and must be closed is a violation too.
   */
  complete?: boolean;
}


/**
 * Checks the invariants of design §7 that one actor's log can show, in one pass: O(n) time,
 * state proportional to what is open or must stay unique (IDs of calls and inbox messages).
 * Pure: no I/O, no clock. Returns the violations ordered by seq; an empty array means the log
 * keeps every invariant checked here.
 */
export function verifyLog(events: ActorEvent[], opts: VerifyOptions = {}): Violation[] {
  const found: Violation[] = [];
  const report: Report = (code, seq, message) => found.push({ code, seq, message });
  const checks = [
    createEnvelopeCheck(report),
    createInboxCheck(report),
    createInterruptCheck(report),
    createRecoveryCheck(report),
    createScopeCheck(report),
    createCallCheck(report),
    createParkedCheck(report),
    createQuestionCheck(report),
    createBudgetCheck(report),
    createCompletionCheck(report),
    createGoalCheck(report),
    createContinuationCheck(report),
    createCompactionCheck(report),
    createJobCheck(report),
  ];
  for (const e of events) for (const c of checks) c.event(e);
  for (const c of checks) c.end(opts.complete ?? false);
  // Checks report in the order they notice, which for missing ends is later than the seq they
  // name; a stable sort keeps one event's violations in the order they were found.
  return found.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
}

/**
 * Checks a job's log (design §11b): the envelope every log keeps (seqs gapless, epochs never
 * back, one actor) and the job's own invariants (`createJobCheck`); an agent's turn, call and
 * inbox invariants are not a job's. Pure, O(n).
 */
export function verifyJobLog(events: ActorEvent[], opts: VerifyOptions = {}): Violation[] {
  const found: Violation[] = [];
  const report: Report = (code, seq, message) => found.push({ code, seq, message });
  const checks = [createEnvelopeCheck(report), createJobCheck(report)];
  for (const e of events) for (const c of checks) c.event(e);
  for (const c of checks) c.end(opts.complete ?? false);
  return found.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
}

/**
 * True for a job's log (its first event is `job/created`), which `verifyJobLog` checks rather than
 * `verifyLog`. A log whose job events come without it stays an agent's: `verifyLog`'s job check
 * names the stray events (`job.uncreated`), and its other checks still run.
 */
export function isJobLog(events: readonly ActorEvent[]): boolean {
  return events[0]?.type === 'job/created';
}

/** One line per violation, `seq <n>: <code>: <message>`, for people and CLI output. */
export function formatViolations(v: Violation[]): string {
  return v.map((x) => `seq ${x.seq ?? '-'}: ${x.code}: ${x.message}`).join('\n');
}

/**
 * Sequences gapless from 1, epochs never decreasing, one actor. An older epoch inside a turn a
 * newer incarnation already wrote into is reported as that turn's interleave rather than as a
 * plain step back: it names the turn whose history two writers mixed.
 */
function createEnvelopeCheck(report: Report): Check {
  let expected = 1;
  let maxEpoch = -1;
  let actor: string | null = null;
  /** Highest epoch of each open turn's events; a turn's entry goes when it ends. */
  const turnEpochs = new Map<string, number>();
  return {
    event(e) {
      if (e.seq !== expected) {
        const what = e.seq < expected ? 'repeats or goes back' : 'skips ahead';
        report('seq.gap', e.seq, `expected seq ${expected}, got ${e.seq}: the log ${what}`);
      }
      // Resynchronise past the highest seq seen, so one gap or one repeated event is one
      // violation, not one per later event.
      expected = Math.max(expected, e.seq + 1);
      const turnEpoch = e.turn === undefined ? undefined : turnEpochs.get(e.turn);
      if (turnEpoch !== undefined && e.epoch < turnEpoch) {
        report('turn.epochs_interleaved', e.seq,
          `${e.type} of epoch ${e.epoch} in turn ${e.turn} after that turn's events of epoch ${turnEpoch}: two incarnations wrote into one turn`);
      } else if (e.epoch < maxEpoch) {
        report('epoch.backwards', e.seq, `epoch ${e.epoch} after epoch ${maxEpoch}: an older incarnation wrote after a newer one`);
      }
      maxEpoch = Math.max(maxEpoch, e.epoch);
      if (e.turn !== undefined) {
        if (e.type === 'turn/end') turnEpochs.delete(e.turn);
        else turnEpochs.set(e.turn, Math.max(turnEpoch ?? -1, e.epoch));
      }
      actor ??= e.actor;
      if (e.actor !== actor) report('event.actor', e.seq, `event of actor ${e.actor} in the log of ${actor}`);
    },
    end() {},
  };
}

/**
 * Every `recovery/started` is followed by its `recovery/continuation` before another recovery.
 * An `actor/killed` names an incarnation no newer than the one writing it, and a seq before its own.
 */
function createRecoveryCheck(report: Report): Check {
  let open: number | null = null;
  const unclosed = (seq: number, until: string) =>
    report('recovery.unclosed', seq, `recovery started at seq ${seq} has no recovery/continuation ${until}`);
  return {
    event(e) {
      // an incarnation that died before writing leaves its epoch unused: without a lease to hand
      // out epochs, the next one takes the same number, so the note's epoch may equal its own
      if (e.type === 'actor/killed' && (e.data.epoch > e.epoch || e.data.lastSeq >= e.seq)) {
        report('recovery.killed_inconsistent', e.seq,
          `actor/killed of epoch ${e.data.epoch} after seq ${e.data.lastSeq} is written by epoch ${e.epoch} at seq ${e.seq}: it must name an incarnation no newer than its writer and a seq before its own`);
      }
      if (e.type === 'recovery/started') {
        if (open !== null) unclosed(open, `before the next recovery at seq ${e.seq}`);
        open = e.seq;
      } else if (e.type === 'recovery/continuation') {
        if (open === null) report('recovery.continuation_without_start', e.seq, 'recovery/continuation with no recovery/started open');
        open = null;
      }
    },
    end(complete) {
      if (complete && open !== null) unclosed(open, 'by the end of the log');
    },
  };
}

/**
 * An `actor/parked` is a wait for a person inside an open turn, and every approval or question it names is
 * one the turn asked for and nobody has answered yet: a client acts on it as the truth.
 */
function createParkedCheck(report: Report): Check {
  let turn: string | null = null;
  const pending = new Set<string>();
  return {
    event(e) {
      if (e.type === 'turn/start') turn = e.turn ?? null;
      else if (e.type === 'turn/end') {
        turn = null;
        pending.clear();
      } else if (e.type === 'approval/requested') pending.add(e.data.approvalId);
      else if (e.type === 'approval/granted' || e.type === 'approval/denied') pending.delete(e.data.approvalId);
      else if (e.type === 'ask/asked') pending.add(e.data.questionId);
      else if (e.type === 'ask/answered') pending.delete(e.data.questionId);
      else if (e.type === 'actor/parked') {
        if (turn === null) report('parked.outside_turn', e.seq, 'actor/parked with no turn open: there is nothing to wait for');
        else {
          const answered = e.data.ids.filter((id) => !pending.has(id));
          if (answered.length > 0) report('parked.not_pending', e.seq, `actor/parked waits on ${answered.join(', ')}, which no open request of the turn left unanswered`);
        }
      }
    },
    end() {},
  };
}
