import { derivedId, newId } from '../protocol/ids.js';
import { assertNever } from '../protocol/errors.js';
import { ZERO_USAGE, type ToolCallRequest } from '../protocol/history.js';
import type { AgentActor } from './agent-actor.js';
import { abortReason, ensureModel, estimateUsage, costFor, prepare, scope, settings } from './effect-helpers.js';
import { sleep } from '../protocol/sleep.js';
import type { Effect } from './machine-set.js';
import { callModel } from './model-call.js';
import type { ApprovalMode } from '../protocol/events.js';
import type { ExecutionSemantics } from '../tools/tool.js';
import { answerApproval, decideCall, expireApproval, requestApproval } from './tool-policy.js';
import { reconcileCall, settleReconciled } from './reconcile.js';
import { modelName, recoveryOf, resolveSettings } from './turn-settings.js';

export { DEFAULT_INSTRUCTIONS, MAX_OBSERVATION_BYTES, TURN_DEFAULTS, modelName, recoveryOf, resolveSettings } from './turn-settings.js';

/** Runs one effect a machine asked for; I/O effects first commit what is staged. */
export async function performEffect(a: AgentActor, effect: Effect): Promise<void> {
  const p = effect.params;
  const name = effect.name as EffectName;
  // Calls are planned synchronously (policy, scheduling): blob-stored arguments of the open step
  // are read first (after a rehydrate nothing of them is in memory yet).
  if (PLANS_CALLS.has(name)) await a.outputs.loadCalls(a.projection.pending.calls);
  switch (name) {
    case 'startTurn': {
      const items = (p.messageIds as string[]).map((id) => ({ id, item: a.projection.inbox[id] }));
      const request = items.find((x) => x.item?.request)?.item?.request ?? null;
      const turn = newId('turn');
      const s = resolveSettings(request, a.projection.lastSettings, a.ports.clock.nowMs(), a.ports.tools.names());
      a.stage({ type: 'turn/start', turn, data: { source: p.source, messageIds: p.messageIds, settings: s } });
      for (const { id, item } of items) {
        a.stage({ type: 'user/message', turn, data: { messageId: id, content: item?.content ?? '' } });
      }
      return;
    }
    case 'turnEnded':
      return;
    case 'startStep': {
      const s = settings(a);
      const model = await ensureModel(a);
      a.stage({
        type: 'step/start',
        turn: a.projection.openTurn!.id,
        step: newId('step'),
        data: {
          index: p.index,
          model: s.model,
          maxOutputTokens: s.maxOutputTokens ?? null,
          effort: s.effort ?? null,
          maxAttempts: s.maxAttempts,
          toolBudgetLeft: p.toolBudgetLeft,
          // frozen for the step: what the model was taken to be able to do when it began
          provider: model.provider,
          capabilities: model.capabilities(modelName(s.model)),
        },
      });
      return;
    }
    case 'prepareRequest': {
      const prepared = await prepare(a);
      // The blob is written off the step's critical path, in the blob store's next batch (a
      // synced LMDB commit costs ~1 ms of disk). A crash before it lands loses nothing: preparing
      // again from the log gives the same bytes, and the digest in request/prepared proves it.
      // A body that continues the last one's is stored as what it adds (`BlobDelta`).
      a.ports.blobs.put(prepared.body, prepared.digest, prepared.delta).catch((err: unknown) =>
        a.ports.logger.warn({ err, digest: prepared.digest }, 'prepared request blob not stored'),
      );
      a.stage({
        type: 'request/prepared',
        ...scope(a),
        data: { digest: prepared.digest, bytes: prepared.bytes ?? Buffer.byteLength(prepared.body), messages: a.projection.history.length },
      });
      return;
    }
    case 'startAttempt': {
      if (p.notBeforeMs !== null) {
        // Commit the failed attempt before waiting, so a crash during backoff re-arms it.
        await a.flush();
        // the clock's own sleep when it has one: a fake clock lets tests wait minutes in no time
        const wait = p.notBeforeMs - a.ports.clock.nowMs();
        await (a.ports.clock.sleep ? a.ports.clock.sleep(wait, a.turnAbort.signal) : sleep(wait, a.turnAbort.signal));
      }
      if (a.turnAbort.signal.aborted) {
        a.machines.signal({ type: 'abort', reason: abortReason(a) });
        return;
      }
      a.stage({
        type: 'attempt/start',
        ...scope(a),
        attempt: newId('attempt'),
        data: { index: p.index, requestDigest: a.projection.lastPrepared!.digest },
      });
      return;
    }
    case 'callModel':
      return callModel(a, p.attemptId, p.requestDigest);
    case 'interruptAttempt': {
      a.stage({
        type: 'attempt/end',
        ...scope(a),
        attempt: p.attemptId,
        data: {
          outcome: 'interrupted',
          error: null,
          usage: estimateUsage(a.projection.lastPrepared?.bytes ?? 0, 0),
          backoffMs: null,
          latencyMs: null,
          costUsd: costFor(a, estimateUsage(a.projection.lastPrepared?.bytes ?? 0, 0)),
        },
      });
      a.noteRecovered(`attempt ${p.attemptId} interrupted`);
      return;
    }
    case 'dispatchCalls':
      return dispatchCalls(a, p.calls, p.toolBudgetLeft);
    case 'decidePolicy':
      return decideCall(a, p.callId, p.recheck === true);
    case 'requestApproval':
      return requestApproval(a, p.callId, p.confirmUnknown === true, p.reason);
    case 'expireApproval':
      return expireApproval(a, p.callId, p.approvalId);
    case 'answerApproval':
      return answerApproval(a, p.messageId, p.from, p.content);
    case 'startTool':
      a.runner.request(p.callId, p.rerun);
      return;
    case 'rejectCall':
      a.stage({
        type: 'tool/result',
        ...scope(a),
        call: p.callId,
        data: { ok: false, output: p.error, error: { code: 'invalid_call', message: p.error, retryable: false }, durationMs: 0 },
      });
      return;
    case 'denyCall':
      a.stage({ type: 'tool/denied', ...scope(a), call: p.callId, data: { reason: p.reason } });
      return;
    case 'cancelCall':
      a.stage({ type: 'tool/cancelled', ...scope(a), call: p.callId, data: { reason: p.reason } });
      return;
    case 'reconcileCall':
      return reconcileCall(a, p.callId);
    case 'settleReconciled':
      return settleReconciled(a, p.callId, p.output);
    case 'markOutcomeUnknown':
      a.stage({ type: 'tool/outcome_unknown', ...scope(a), call: p.callId, data: { reason: p.reason } });
      a.noteRecovered(`call ${p.callId} outcome unknown`);
      return;
    case 'endStep': {
      const open = a.projection.openStep!;
      a.stage({ type: 'step/end', ...scope(a), data: Object.assign({}, p, { usage: open.usage ?? ZERO_USAGE, costUsd: open.costUsd ?? null }) });
      return;
    }
    case 'endTurn':
      a.stage({ type: 'turn/end', turn: a.projection.openTurn!.id, data: Object.assign({}, p, { costUsd: a.projection.openTurn!.costUsd }) });
      return;
    default:
      assertNever(name, 'effect');
  }
}

type EffectName =
  | 'startTurn' | 'turnEnded' | 'startStep' | 'prepareRequest' | 'startAttempt' | 'callModel'
  | 'interruptAttempt' | 'dispatchCalls' | 'decidePolicy' | 'requestApproval' | 'expireApproval' | 'answerApproval'
  | 'startTool' | 'rejectCall' | 'denyCall' | 'reconcileCall' | 'settleReconciled'
  | 'cancelCall' | 'markOutcomeUnknown' | 'endStep' | 'endTurn';

/** Effects that plan the open step's calls, and so need their whole arguments in memory. */
const PLANS_CALLS: ReadonlySet<EffectName> = new Set<EffectName>([
  'decidePolicy', 'requestApproval', 'startTool', 'reconcileCall', 'settleReconciled',
]);

async function dispatchCalls(a: AgentActor, calls: ToolCallRequest[], budget: number | null): Promise<void> {
  const s = settings(a);
  const { step } = scope(a);
  const known = new Set(a.projection.pending.calls.map((c) => c.callId));
  let valid = 0;
  // the tool is judged on the whole arguments, the log keeps the blob's reference (and a preview)
  await a.outputs.loadCalls(calls);
  calls.forEach((call, index) => {
    const callId = derivedId('call', step, String(index));
    const r = a.ports.tools.resolveCall(call.name, a.outputs.argumentsOf(call), s.tools, { workspace: s.workspace });
    const withinBudget = r.status !== 'valid' || budget === null || valid < budget;
    if (r.status === 'valid') valid += 1;
    if (known.has(callId)) return;
    a.stage({
      type: 'tool/call',
      ...scope(a),
      call: callId,
      data: {
        index,
        providerId: call.id,
        name: call.name,
        arguments: call.arguments,
        ...(call.argumentsRef ? { argumentsRef: call.argumentsRef } : {}),
        status: r.status,
        error: r.status === 'valid' ? null : r.error,
        effects: r.status === 'valid' ? r.effects.effects : null,
        recovery: r.status === 'valid' ? recoveryOf(r.effects) : null,
        withinBudget,
        confirmUnknown: r.status === 'valid' && confirmsUnknown(r.effects, s.approvalMode ?? 'ask'),
      },
    });
  });
}

/**
 * Whether a crash mid-call makes the turn wait for a person: `manual: block` always; `manual:
 * ask` when the run mode asks about effects at all (auto-edit and full-auto said not to ask);
 * `reconcile` always, for the outcome its tool could not tell (as `manual: block`: the tool was
 * asked and has no answer, so a person looks before the model is told).
 */
function confirmsUnknown(semantics: ExecutionSemantics, mode: ApprovalMode): boolean {
  if (semantics.effects !== 'possible') return false;
  if (semantics.recovery.kind === 'reconcile') return true;
  if (semantics.recovery.kind !== 'manual') return false;
  return semantics.recovery.on === 'block' || mode === 'ask';
}
