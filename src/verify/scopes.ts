import type { ActorEvent, EventOf, EventType } from '../protocol/events.js';
import type { Check, Report } from './violations.js';

interface TurnState {
  id: string;
  seq: number;
  steps: Set<StepState>;
  /** The last step/end of this turn was `final` over an accepted answer: it may complete. */
  answered: boolean;
}

interface StepState {
  id: string;
  seq: number;
  turn: TurnState;
  attempts: Set<AttemptState>;
  /** The last assistant/accepted of this step has content and no tool calls. */
  answer: boolean;
  /** The last attempt of this step that succeeded: the only one whose output may be accepted. */
  succeeded: string | null;
}

interface AttemptState {
  id: string;
  seq: number;
  step: StepState;
  /** A compaction's summary attempt (`attempt/start {kind: compaction}`). */
  compaction?: true;
}

/** Types that only happen inside a Turn (besides the starts and ends handled on their own). */
const IN_TURN: ReadonlySet<EventType> = new Set<EventType>([
  'user/message', 'request/prepared', 'assistant/accepted', 'assistant/rejected', 'tool/call',
  'policy/decided', 'tool/start', 'tool/result', 'tool/denied', 'tool/cancelled', 'tool/outcome_unknown',
]);

/** Types that only happen inside a Step. */
const IN_STEP: ReadonlySet<EventType> = new Set<EventType>([...IN_TURN].filter((t) => t !== 'user/message'));

/**
 * Turns, Steps and Attempts: nesting (a Turn has at most one open Step, a Step at most one open
 * Attempt), ends that close nothing, scope IDs that name what is open, settled attempts, and
 * turns completed only by an accepted final answer.
 *
 * Open scopes are kept by ID rather than in one slot per level, so one stray start is one
 * violation: what was already open still closes cleanly when its own end arrives.
 */
export function createScopeCheck(report: Report): Check {
  const turns = new Map<string, TurnState>();
  const steps = new Map<string, StepState>();
  const attempts = new Map<string, AttemptState>();
  const endedAttempts = new Set<string>();

  const unsettled = (a: AttemptState, why: string) => {
    attempts.delete(a.id);
    a.step.attempts.delete(a);
    report('attempt.unsettled', a.seq, `attempt ${a.id} has no attempt/end, so its usage is never settled: ${why}`);
  };

  /** The open turn `e` names; reports `scope.turn` when it names none, or one that is not open. */
  function turnOf(e: ActorEvent): TurnState | null {
    if (e.turn === undefined) {
      if (IN_TURN.has(e.type)) report('scope.turn', e.seq, `${e.type} has no turn ID`);
      return null;
    }
    const t = turns.get(e.turn);
    if (!t) report('scope.turn', e.seq, `${e.type} names turn ${e.turn}, which is not open`);
    return t ?? null;
  }

  /** The open step `e` names inside turn `t`; reports `scope.step` otherwise. */
  function stepOf(e: ActorEvent, t: TurnState): StepState | null {
    if (e.step === undefined) {
      if (IN_STEP.has(e.type)) report('scope.step', e.seq, `${e.type} has no step ID`);
      return null;
    }
    const s = steps.get(e.step);
    if (!s || s.turn !== t) report('scope.step', e.seq, `${e.type} names step ${e.step}, which is not open in turn ${t.id}`);
    return s?.turn === t ? s : null;
  }

  /** An end found its scope by its own ID: the enclosing IDs it carries must be that scope's. */
  function sameTurn(e: ActorEvent, t: TurnState): void {
    if (e.turn !== t.id) report('scope.turn', e.seq, `${e.type} names turn ${e.turn ?? '(none)'}, but ${e.step ?? e.attempt} is in turn ${t.id}`);
  }

  function startTurn(e: EventOf<'turn/start'>): void {
    if (e.turn === undefined) return report('scope.turn', e.seq, 'turn/start has no turn ID');
    // Name one open turn, not all: a log of many unclosed turns must stay O(n) to check.
    const open = turns.keys().next();
    if (!open.done) report('turn.nested', e.seq, `turn ${e.turn} starts while turn ${open.value} is open`);
    turns.set(e.turn, { id: e.turn, seq: e.seq, steps: new Set(), answered: false });
  }

  function endTurn(e: EventOf<'turn/end'>): void {
    const t = e.turn === undefined ? undefined : turns.get(e.turn);
    if (!t) return report('turn.end_without_start', e.seq, `turn/end of turn ${e.turn ?? '(none)'}, which is not open`);
    turns.delete(t.id);
    for (const s of t.steps) {
      report('step.open_at_turn_end', e.seq, `turn ${t.id} ends while step ${s.id} (started at seq ${s.seq}) is open`);
      for (const a of s.attempts) unsettled(a, `its turn ended at seq ${e.seq} with the step open`);
      steps.delete(s.id);
    }
    if (e.data.outcome === 'completed' && !t.answered) {
      report('turn.completed_without_answer', e.seq, `turn ${t.id} completed, but its last step did not end final over an accepted answer`);
    }
  }

  function startStep(e: EventOf<'step/start'>): void {
    const t = e.turn === undefined ? undefined : turns.get(e.turn);
    if (!t) {
      if (turns.size === 0) return report('step.outside_turn', e.seq, `step ${e.step} starts with no turn open`);
      return void turnOf(e);
    }
    if (e.step === undefined) return report('scope.step', e.seq, 'step/start has no step ID');
    const open = t.steps.values().next();
    if (!open.done) report('step.nested', e.seq, `step ${e.step} starts while step ${open.value.id} of turn ${t.id} is open`);
    const s: StepState = { id: e.step, seq: e.seq, turn: t, attempts: new Set(), answer: false, succeeded: null };
    t.steps.add(s);
    steps.set(s.id, s);
  }

  function endStep(e: EventOf<'step/end'>): void {
    const s = e.step === undefined ? undefined : steps.get(e.step);
    if (!s) return report('step.end_without_start', e.seq, `step/end of step ${e.step ?? '(none)'}, which is not open`);
    sameTurn(e, s.turn);
    steps.delete(s.id);
    s.turn.steps.delete(s);
    for (const a of s.attempts) unsettled(a, `its step ended at seq ${e.seq}`);
    // Only the latest step counts: a final answer followed by more steps no longer completes.
    s.turn.answered = e.data.outcome === 'final' && s.answer;
  }

  function startAttempt(e: EventOf<'attempt/start'>): void {
    const s = e.step === undefined ? undefined : steps.get(e.step);
    if (!s) {
      if (steps.size === 0) return report('attempt.outside_step', e.seq, `attempt ${e.attempt} starts with no step open`);
      return report('scope.step', e.seq, `attempt/start names step ${e.step ?? '(none)'}, which is not open`);
    }
    sameTurn(e, s.turn);
    if (e.attempt === undefined) return report('scope.attempt', e.seq, 'attempt/start has no attempt ID');
    const open = s.attempts.values().next();
    if (!open.done) report('attempt.nested', e.seq, `attempt ${e.attempt} starts while attempt ${open.value.id} of step ${s.id} is open`);
    const a: AttemptState = { id: e.attempt, seq: e.seq, step: s, ...(e.data.kind === 'compaction' ? { compaction: true } : {}) };
    s.attempts.add(a);
    attempts.set(a.id, a);
  }

  function endAttempt(e: EventOf<'attempt/end'>): void {
    if (e.attempt === undefined) return report('scope.attempt', e.seq, 'attempt/end has no attempt ID');
    const a = attempts.get(e.attempt);
    if (!a) {
      if (endedAttempts.has(e.attempt)) return report('attempt.ended_twice', e.seq, `attempt ${e.attempt} already ended: its usage would count twice`);
      return report('attempt.end_without_start', e.seq, `attempt/end of attempt ${e.attempt}, which is not open`);
    }
    if (e.step !== a.step.id) report('scope.step', e.seq, `attempt/end names step ${e.step ?? '(none)'}, but attempt ${a.id} is in step ${a.step.id}`);
    sameTurn(e, a.step.turn);
    attempts.delete(a.id);
    a.step.attempts.delete(a);
    endedAttempts.add(a.id);
    // a compaction's summary is no output the step may accept
    if (e.data.outcome === 'succeeded' && a.compaction !== true) a.step.succeeded = a.id;
    // The schema requires usage; this catches events that reached us without being parsed.
    if ((e.data.usage as unknown) == null) report('attempt.unsettled', e.seq, `attempt/end of ${a.id} carries no usage`);
  }

  function accepted(e: EventOf<'assistant/accepted'>, s: StepState): void {
    if (e.attempt !== undefined && e.attempt !== s.succeeded) {
      report('scope.attempt', e.seq, `assistant/accepted names attempt ${e.attempt}, which is not the attempt of step ${s.id} that last succeeded`);
    }
    s.answer = (e.data.content ?? '').trim() !== '' && e.data.toolCalls.length === 0;
  }

  return {
    event(e) {
      switch (e.type) {
        case 'turn/start': return startTurn(e);
        case 'turn/end': return endTurn(e);
        case 'step/start': return startStep(e);
        case 'step/end': return endStep(e);
        case 'attempt/start': return startAttempt(e);
        case 'attempt/end': return endAttempt(e);
        default: {
          // Every other type: only its scope IDs are checked here (calls have their own check).
          const t = turnOf(e);
          const s = t ? stepOf(e, t) : null;
          if (s && e.type === 'assistant/accepted') accepted(e, s);
        }
      }
    },
    end(complete) {
      if (!complete) return;
      for (const a of [...attempts.values()]) unsettled(a, 'the log is complete');
    },
  };
}
