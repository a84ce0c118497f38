import type { ActorEvent, EventData, EventOf } from '../protocol/events.js';
import type { Check, Report } from './violations.js';

type CallIntent = EventData<'tool/call'>;

interface CallState {
  id: string;
  seq: number;
  intent: CallIntent;
  starts: number;
  /** Key of the first `tool/start`: a rerun of an effectful call must carry the same one. */
  key: string | null;
  /** The end event's type and seq, once one was recorded. */
  ended: { type: string; seq: number } | null;
  /** Already reported as unended, so a later check does not report it again. */
  flagged: boolean;
  /** The last policy decision on the call; a first start needs `allow`. */
  decision: string | null;
  /** The `tool/reconciled` verdict on the call's last start, if recovery asked its tool. */
  reconciled: { verdict: string; seq: number } | null;
  /** Seq of the first `tool/start` that says its call may have effects. */
  effectfulStart: number | null;
}

const ENDS = new Set(['tool/result', 'tool/denied', 'tool/cancelled', 'tool/outcome_unknown']);
const CALL_SCOPED = new Set([
  ...ENDS, 'tool/call', 'tool/start', 'tool/reconciled', 'policy/decided', 'approval/requested', 'approval/granted', 'approval/denied',
]);

/**
 * Tool calls: every call ends exactly once, a started one never as denied; no `tool/start`
 * without a valid `tool/call` before it; no result of a valid call without a `tool/start` (its
 * effect would have run unrecorded); an effectful call starts once, unless it is idempotent and
 * reruns with the same key, or its tool reconciled it as not applied (`tool/reconciled`) and it
 * reruns with the same key. A call is reconciled only when its recovery says reconcile, only
 * between a start and its end, once per start; after `not_applied` its result needs a new start.
 * A started effectful call is cancelled only when the cancel says its executor confirmed it stopped.
 */
export function createCallCheck(report: Report): Check {
  const calls = new Map<string, CallState>();
  /** Calls by the turn they belong to, so a turn's end finds its unended calls without a scan. */
  const byTurn = new Map<string, CallState[]>();

  const unended = (c: CallState, why: string) => {
    c.flagged = true;
    report('call.unended', c.seq, `call ${c.id} (${c.intent.name}) never ended in result, denied, cancelled or outcome_unknown: ${why}`);
  };

  function intent(e: EventOf<'tool/call'>, id: string): void {
    const first = calls.get(id);
    if (first) return report('call.duplicate', e.seq, `call ${id} was already recorded at seq ${first.seq}`);
    const c: CallState = { id, seq: e.seq, intent: e.data, starts: 0, key: null, ended: null, flagged: false, decision: null, reconciled: null, effectfulStart: null };
    calls.set(id, c);
    if (e.turn === undefined) return;
    const list = byTurn.get(e.turn);
    if (list) list.push(c);
    else byTurn.set(e.turn, [c]);
  }

  function start(e: EventOf<'tool/start'>, id: string): void {
    const c = calls.get(id);
    if (!c || c.intent.status !== 'valid') {
      const why = c ? `its tool/call at seq ${c.seq} is ${c.intent.status}` : 'no tool/call came before it';
      return report('call.start_without_intent', e.seq, `tool/start of call ${id}: ${why}`);
    }
    // no effect after the policy said ask or deny without a later allow (a rerun was allowed before)
    if (!e.data.rerun && c.decision !== null && c.decision !== 'allow') {
      report('call.start_without_allow', e.seq, `call ${id} (${c.intent.name}) starts though its last policy decision is ${c.decision ?? 'missing'}`);
    }
    if (c.ended) {
      report('call.start_after_end', e.seq, `call ${id} starts again after its ${c.ended.type} at seq ${c.ended.seq}: the run is not recorded`);
    }
    // The stricter of what the call and the start say: a start may not talk itself into a rerun.
    const effectful = c.intent.effects === 'possible' || e.data.effects === 'possible';
    if (c.starts > 0 && effectful) {
      const sameKey = e.data.idempotencyKey === c.key;
      const notApplied = c.intent.recovery === 'reconcile' && c.reconciled?.verdict === 'not_applied';
      const allowed = e.data.rerun && sameKey && (c.intent.recovery === 'idempotent' || notApplied);
      if (!allowed) {
        const why = !sameKey ? 'with a different idempotency key'
          : !e.data.rerun ? 'without rerun'
          : c.intent.recovery === 'reconcile' ? `though its tool's reconcile did not find it not applied (${c.reconciled?.verdict ?? 'never asked'})`
          : `though its recovery is ${c.intent.recovery ?? 'unknown'}, not idempotent`;
        report('call.effect_twice', e.seq, `effectful call ${id} (${c.intent.name}) starts a second time ${why}`);
      }
    }
    c.starts += 1;
    if (effectful) c.effectfulStart ??= e.seq;
    c.key ??= e.data.idempotencyKey;
    c.reconciled = null;
  }

  function reconciled(e: EventOf<'tool/reconciled'>, id: string): void {
    const c = calls.get(id);
    if (!c) return report('call.reconcile_without_start', e.seq, `tool/reconciled of call ${id}, which has no tool/call`);
    if (c.intent.recovery !== 'reconcile') {
      return report('call.reconcile_without_start', e.seq, `call ${id} (${c.intent.name}) is reconciled though its recovery is ${c.intent.recovery ?? 'unknown'}`);
    }
    if (c.starts === 0 || c.ended) {
      const why = c.ended ? `after its ${c.ended.type} at seq ${c.ended.seq}` : 'before any tool/start';
      return report('call.reconcile_without_start', e.seq, `call ${id} (${c.intent.name}) is reconciled ${why}: there is nothing to settle`);
    }
    if (c.reconciled) {
      return report('call.reconciled_twice', e.seq, `call ${id} was already reconciled (${c.reconciled.verdict}) at seq ${c.reconciled.seq} with no start since`);
    }
    c.reconciled = { verdict: e.data.verdict, seq: e.seq };
  }

  function finish(e: ActorEvent, id: string): void {
    const c = calls.get(id);
    if (!c) return report('call.end_without_intent', e.seq, `${e.type} of call ${id}, which has no tool/call`);
    if (c.ended) return report('call.ended_twice', e.seq, `call ${id} already ended with ${c.ended.type} at seq ${c.ended.seq}`);
    c.ended = { type: e.type, seq: e.seq };
    // Denied means it never ran; a started call may have had its effect, so it must not say so.
    if (e.type === 'tool/denied' && c.starts > 0) {
      report('call.denied_after_start', e.seq, `call ${id} (${c.intent.name}) is denied after its tool/start: the log would hide an effect that may have run`);
    }
    // Invalid calls answer the model directly; a valid one has a result only if it ran.
    if (e.type === 'tool/result' && c.intent.status === 'valid' && c.starts === 0) {
      report('call.result_without_start', e.seq, `tool/result of valid call ${id} with no tool/start: its effect ran unrecorded`);
    }
    if (e.type === 'tool/cancelled') cancelled(e, c);
    // reconcile said it never took effect: a result now would be of a run nobody recorded
    if (e.type === 'tool/result' && c.reconciled?.verdict === 'not_applied') {
      report('call.result_without_start', e.seq, `tool/result of call ${id} after reconcile found it not applied at seq ${c.reconciled.seq}, with no tool/start since`);
    }
  }

  /**
   * A started effectful call is cancelled only once its executor confirmed it stopped (design
   * §6a); otherwise it may have taken effect and must end `outcome_unknown`. A cancel that says
   * the call never started while a start of it is in the log hides that start. Logs written
   * before `started` and `confirmed` existed carry neither and are not judged.
   */
  function cancelled(e: EventOf<'tool/cancelled'>, c: CallState): void {
    if (c.effectfulStart === null) return;
    const { started, confirmed } = e.data;
    if (started === true && confirmed === false) {
      report('call.cancelled_unconfirmed', e.seq, `effectful call ${c.id} (${c.intent.name}) is cancelled though its executor never confirmed it stopped: it may have taken effect, so it must end outcome_unknown`);
    } else if (started === false) {
      report('call.cancelled_unconfirmed', e.seq, `effectful call ${c.id} (${c.intent.name}) is cancelled as never started, but its tool/start is at seq ${c.effectfulStart}`);
    }
  }

  /** Approvals by ID: asked once, answered at most once, and only for the call that asked. */
  const approvals = new Map<string, { call: string; seq: number; answered: number | null }>();
  function approval(e: ActorEvent, id: string): void {
    if (e.type === 'approval/requested') {
      if (approvals.has(e.data.approvalId)) return report('approval.duplicate', e.seq, `approval ${e.data.approvalId} was requested twice`);
      approvals.set(e.data.approvalId, { call: id, seq: e.seq, answered: null });
      return;
    }
    if (e.type !== 'approval/granted' && e.type !== 'approval/denied') return;
    const a = approvals.get(e.data.approvalId);
    if (!a) return report('approval.unknown', e.seq, `${e.type} of approval ${e.data.approvalId}, which was never requested`);
    if (a.call !== id) return report('approval.other_call', e.seq, `approval ${e.data.approvalId} of call ${a.call} answered for call ${id}`);
    if (a.answered !== null) return report('approval.answered_twice', e.seq, `approval ${e.data.approvalId} was already answered at seq ${a.answered}`);
    a.answered = e.seq;
  }

  return {
    event(e) {
      if (e.type === 'turn/end' && e.turn !== undefined) {
        for (const c of byTurn.get(e.turn) ?? []) if (!c.ended && !c.flagged) unended(c, `its turn ended at seq ${e.seq}`);
        byTurn.delete(e.turn);
        return;
      }
      if (!CALL_SCOPED.has(e.type)) return;
      if (e.call === undefined) return report('scope.call', e.seq, `${e.type} has no call ID`);
      if (e.type === 'tool/call') intent(e, e.call);
      else if (e.type === 'tool/start') start(e, e.call);
      else if (e.type === 'tool/reconciled') reconciled(e, e.call);
      else if (ENDS.has(e.type)) finish(e, e.call);
      else if (e.type === 'policy/decided') {
        const c = calls.get(e.call);
        if (c) c.decision = e.data.decision;
      } else approval(e, e.call);
    },
    end(complete) {
      if (!complete) return;
      for (const c of calls.values()) if (!c.ended && !c.flagged) unended(c, 'the log is complete');
    },
  };
}
