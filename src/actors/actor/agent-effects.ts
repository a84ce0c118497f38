import { derivedId, newId } from '../../protocol/ids.js';
import { ZERO_USAGE, type ToolCallRequest } from '../../protocol/history.js';
import { abortReason, scope, settings, type EffectContext } from '../agent/effect-context.js';
import { assemblyOf, ensureModel, estimateUsage, costFor, prepare } from '../agent/model-request.js';
import { loadTurnContext } from '../agent/context-load.js';
import { maybeCompact, runCompactionAttempt, startCompactionAttempt } from '../effects/compaction.js';
import { sleep } from '../../protocol/sleep.js';
import type { EffectParams, MachineEffect } from './machine-effects.js';
import { callModel } from '../effects/model-call.js';
import type { ApprovalMode, EventData } from '../../protocol/events.js';
import { NOTICE_KINDS } from '../../protocol/subagents.js';
import { childRequest, modelText, parseChildTask } from '../tree/child-task.js';
import { endChildren } from '../tree/subagent-messages.js';
import { endJobs } from '../effects/job-tools.js';
import type { ExecutionSemantics } from '../../tools/tool.js';
import { answerApproval, decideCall, expireApproval, requestApproval } from '../effects/tool-policy.js';
import { reconcileCall, settleReconciled } from '../effects/reconcile.js';
import { answerQuestion } from '../effects/questions.js';
import { recoveryOf, resolveSettings } from '../agent/turn-settings.js';
import { modelName } from '../../model/model-spec.js';
import { goalRoom, reserveAttempt, reservesAttempt, reserveToolCalls, settleAttempt, settleOrphans, settleToolCalls, toolReservation, turnRoom } from '../goals/budget.js';
import { completionMissing, policyOf } from '../../store/completion-check.js';
import { continuationMessage, controlGoal, createGoal, settleGoalAtTurnEnd } from '../goals/goals.js';

/**
 * The source a claimed turn records: the machine names who claimed it (a person's message, a
 * follow-up, the goal), and the messages refine it — a parent's task starts a child's turn, and
 * a turn that only a child's report or notice woke is that notice's.
 */
function sourceOf(claimed: 'user_message' | 'follow_up' | 'goal_continuation', kinds: Array<string | undefined>): EventData<'turn/start'>['source'] {
  if (kinds.includes('subagent_task')) return 'subagent_task';
  if (kinds.length > 0 && kinds.every((k) => k === 'job_notice')) return 'job_notice';
  if (kinds.length > 0 && kinds.every((k) => k !== undefined && (NOTICE_KINDS.has(k) || k === 'job_notice'))) return 'subagent_notice';
  return claimed;
}

/** Effects the actor's sink carries out at once, never queued behind the one in flight. */
type ImmediateEffect = 'abortWork' | 'interruptTurn';

/** An effect that waits its turn in the actor's effect queue. */
export type QueuedEffect = Exclude<MachineEffect, { name: ImmediateEffect }>;

type QueuedName = QueuedEffect['name'];

/** One handler per effect slot the machines declare: a slot without one, or a misspelled one, does not compile. */
type EffectTable = { [N in QueuedName]: (ctx: EffectContext, params: EffectParams<N>) => void | Promise<void> };

const EFFECTS: EffectTable = {
  startTurn(ctx, p) {
    const items = p.messageIds.map((id) => ({ id, item: ctx.projection.inbox[id] }));
    // a child's task carries the settings its parent fixed (recorded in the parent's spawn_requested)
    const task = items.find((x) => x.item?.kind === 'subagent_task');
    const childTask = task?.item ? parseChildTask(task.item.content) : null;
    const nowMs = ctx.ports.clock.nowMs();
    const request = childTask ? childRequest(childTask, nowMs) : (items.find((x) => x.item?.request)?.item?.request ?? null);
    const turn = newId('turn');
    const s = resolveSettings(request, ctx.projection.lastSettings, nowMs, ctx.ports.tools.names());
    // a child's deadline is its parent's carve, to the millisecond (the request carries it in seconds)
    const carved = childTask?.budget.deadlineAt ?? null;
    if (carved !== null && (s.budgets.deadlineAt === null || s.budgets.deadlineAt > carved)) s.budgets = { ...s.budgets, deadlineAt: carved };
    ctx.stage({ type: 'turn/start', turn, data: { source: sourceOf(p.source, items.map((x) => x.item?.kind)), messageIds: p.messageIds, settings: s } });
    for (const { id, item } of items) {
      // a forked child reads its parent's history first, then its task as a message of its own
      const forked = item?.kind === 'subagent_task' ? childTask?.forkTranscript : null;
      if (forked) ctx.stage({ type: 'user/message', turn, data: { messageId: `${id}#fork`, content: forked } });
      ctx.stage({ type: 'user/message', turn, data: { messageId: id, content: modelText(item) } });
    }
    createGoal(ctx, turn, request);
    // a continuation claims no message: the goal is its work, said to the model in the same commit
    const goal = ctx.projection.goal;
    if (p.source === 'goal_continuation' && goal) ctx.stage({ type: 'user/message', turn, data: continuationMessage(turn, goal) });
  },
  controlGoal: (ctx, p) => controlGoal(ctx, p.messageId, p.content),
  turnEnded() {},
  refuseMessage: (ctx, p) => void ctx.stage({ type: 'inbox/cancelled', data: { messageId: p.messageId, reason: p.reason } }),
  async startStep(ctx, p) {
    const s = settings(ctx);
    const model = await ensureModel(ctx);
    // the step claims every steer and inject waiting, in the same commit as its start (design §6)
    const claims = ctx.projection.nextStep;
    const messageIds = claims && claims.length > 0 ? [...claims] : null;
    ctx.stage({
      type: 'step/start',
      turn: ctx.projection.openTurn!.id,
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
        ...(messageIds ? { messageIds } : {}),
      },
    });
    if (messageIds) {
      // committed on its own, so a crash before the request is prepared leaves the claim in the log to give back
      await ctx.flush();
      ctx.ports.faults.hit('after:inbox-reserved', ctx.actorId);
    }
  },
  async prepareRequest(ctx) {
    // What the step claimed enters the history in the commit of the request that includes it: the
    // request is prepared with it, then both are staged in one tick (no commit can split them).
    const turn = ctx.projection.openTurn!.id;
    // a turn's first request: its docs, skill index and memory are loaded and recorded first
    await loadTurnContext(ctx);
    const claimed = (ctx.projection.claimed ?? []).map((id) => ({ messageId: id, content: modelText(ctx.projection.inbox[id]) }));
    const prepared = await prepare(ctx, claimed.map((c) => ({ role: 'user' as const, content: c.content })));
    const assembly = assemblyOf(ctx, prepared.digest);
    // a request that would not fit (or a person's ask) compacts first: no request is recorded yet
    if (await maybeCompact(ctx, assembly)) return;
    for (const c of claimed) ctx.stage({ type: 'user/message', turn, data: c });
    const included = ctx.projection.unsent && ctx.projection.unsent.length > 0 ? [...ctx.projection.unsent] : null;
    // A body that continues the last one's is stored as what it adds (`BlobDelta`). The step
    // goes on while it is written: a store other hosts read (the Object Store) holds back the
    // commit of request/prepared until it is acked, so no host reads a digest it cannot find.
    // A store only this host reads is not waited for (a synced LMDB batch waits for the disk): a
    // crash before it lands loses nothing, since preparing again from the log gives the same
    // bytes, and the digest in request/prepared proves it.
    const write = ctx.ports.blobs.put(prepared.body, prepared.digest, prepared.delta);
    if (ctx.ports.blobs.shared) ctx.holdCommit(write);
    else write.catch((err: unknown) => ctx.logger.warn({ err, digest: prepared.digest }, 'prepared request blob not stored'));
    ctx.stage({
      type: 'request/prepared',
      ...scope(ctx),
      data: {
        digest: prepared.digest,
        bytes: prepared.bytes ?? Buffer.byteLength(prepared.body),
        messages: ctx.projection.history.length,
        ...(included ? { messageIds: included } : {}),
        ...(assembly ? { contributions: assembly.contributions, budget: assembly.budget } : {}),
      },
    });
  },
  async startAttempt(ctx, p) {
    if (p.notBeforeMs !== null) {
      // Commit the failed attempt before waiting, so a crash during backoff re-arms it.
      await ctx.flush();
      // the clock's own sleep when it has one: a fake clock lets tests wait minutes in no time
      const wait = p.notBeforeMs - ctx.ports.clock.nowMs();
      await (ctx.ports.clock.sleep ? ctx.ports.clock.sleep(wait, ctx.signal) : sleep(wait, ctx.signal));
    }
    if (ctx.signal.aborted) {
      ctx.send({ type: 'abort', reason: abortReason(ctx) });
      return;
    }
    const attempt = newId('attempt');
    const digest = ctx.projection.lastPrepared!.digest;
    // the worst case is reserved in the commit that opens the attempt (the turn's and the goal's), before any byte is sent
    const reserved = !reservesAttempt(ctx.projection)
      ? { room: null }
      : await reserveAttempt(ctx, attempt, ctx.turn.prepared.get(digest) ?? (await prepare(ctx)));
    if ('stop' in reserved) {
      const room = { turn: turnRoom(ctx.projection), goal: goalRoom(ctx.projection) };
      ctx.logger.info({ budget: reserved.stop, room }, 'the next attempt\'s worst case does not fit its budget: the turn stops');
      ctx.send({ type: 'abort', reason: reserved.stop });
      return;
    }
    ctx.turn.outputRoom = reserved.room ? { attemptId: attempt, ...reserved.room } : null;
    ctx.stage({ type: 'attempt/start', ...scope(ctx), attempt, data: { index: p.index, requestDigest: digest } });
    if (reserved.room) {
      await ctx.flush();
      ctx.ports.faults.hit('after:budget-reserved', ctx.actorId);
    }
  },
  callModel: (ctx, p) => (p.kind === 'compaction' ? runCompactionAttempt(ctx, p.attemptId, p.requestDigest) : callModel(ctx, p.attemptId, p.requestDigest)),
  compact: (ctx) => startCompactionAttempt(ctx),
  interruptAttempt(ctx, p) {
    const usage = estimateUsage(ctx.projection.lastPrepared?.bytes ?? 0, 0);
    ctx.stage({
      type: 'attempt/end',
      ...scope(ctx),
      attempt: p.attemptId,
      data: { outcome: 'interrupted', error: null, usage, backoffMs: null, latencyMs: null, costUsd: costFor(ctx, usage) },
    });
    // the request may have been sent before the crash: what it may have used is charged, once
    settleAttempt(ctx, p.attemptId, usage);
    ctx.noteRecovered(`attempt ${p.attemptId} interrupted`);
  },
  dispatchCalls: (ctx, p) => dispatchCalls(ctx, p.calls, p.toolBudgetLeft),
  decidePolicy: (ctx, p) => decideCall(ctx, p.callId, p.recheck === true),
  requestApproval: (ctx, p) => requestApproval(ctx, p.callId, p.confirmUnknown === true, p.reason),
  expireApproval: (ctx, p) => expireApproval(ctx, p.callId, p.approvalId),
  answerApproval: (ctx, p) => answerApproval(ctx, p.messageId, p.from, p.content),
  answerQuestion: (ctx, p) => answerQuestion(ctx, p.messageId, p.from, p.content),
  startTool: (ctx, p) => ctx.startCall(p.callId, p.rerun),
  rejectCall(ctx, p) {
    ctx.stage({
      type: 'tool/result',
      ...scope(ctx),
      call: p.callId,
      data: { ok: false, output: p.error, error: { code: 'invalid_call', message: p.error, retryable: false }, durationMs: 0 },
    });
  },
  denyCall: (ctx, p) => void ctx.stage({ type: 'tool/denied', ...scope(ctx), call: p.callId, data: { reason: p.reason } }),
  // The machine cancels only calls that are not running: never started (budget, abort while deciding,
  // awaiting approval or waiting to start), or reconciled as not applied and not started again.
  cancelCall(ctx, p) {
    const started = ctx.projection.pending.calls.find((c) => c.callId === p.callId)?.started ?? false;
    const reason = p.reason === 'tool_budget' ? toolBudgetReason(ctx) : p.reason;
    ctx.stage({ type: 'tool/cancelled', ...scope(ctx), call: p.callId, data: { reason, started, confirmed: true } });
  },
  reconcileCall: (ctx, p) => reconcileCall(ctx, p.callId),
  settleReconciled: (ctx, p) => settleReconciled(ctx, p.callId, p.output),
  markOutcomeUnknown(ctx, p) {
    ctx.stage({ type: 'tool/outcome_unknown', ...scope(ctx), call: p.callId, data: { reason: p.reason } });
    ctx.noteRecovered(`call ${p.callId} outcome unknown`);
  },
  async endStep(ctx, p) {
    const open = ctx.projection.openStep!;
    // a final answer meets the completion policy first: a refusal and the step's end are one commit
    if (p.outcome === 'final') {
      const answer = ctx.projection.pending.assistant;
      // a blob-stored answer is read first; the refusal and step/end are then staged in one tick
      const text = answer?.role !== 'assistant' ? '' : answer.contentRef ? await ctx.outputs.load(answer.contentRef) : (answer.content ?? '');
      checkCompletion(ctx, text);
    }
    // the step's tool-call reservation is settled in the commit of its end
    settleToolCalls(ctx);
    ctx.stage({ type: 'step/end', ...scope(ctx), data: Object.assign({}, p, { usage: open.usage ?? ZERO_USAGE, costUsd: open.costUsd ?? null }) });
  },
  async endTurn(ctx, params) {
    const { blockGoal, ...p } = params;
    // a parent's cancelled or failed turn stops its running children first (on_parent_end)
    await endChildren(ctx, p.outcome);
    // and the jobs it started that said on_owner_end = "cancel"
    await endJobs(ctx, p.outcome);
    // nothing of the turn is open any more: a reservation left unsettled would never be
    settleOrphans(ctx, { turnEnd: true });
    // the goal's updates first, in the same commit: a crash leaves both or neither
    const goalContinues = settleGoalAtTurnEnd(ctx, p.outcome, p.reason, blockGoal ?? null);
    ctx.stage({
      type: 'turn/end',
      turn: ctx.projection.openTurn!.id,
      data: Object.assign(
        {}, p, { costUsd: ctx.projection.openTurn!.costUsd }, goalContinues ? { goalContinues } : {},
        // a child's turn owes its parent the notice until `subagent/notified`
        ctx.projection.parentLink ? { noticeOwed: true } : {},
      ),
    });
  },
};

/** Effects that plan the open step's calls, and so need their whole arguments in memory. */
const PLANS_CALLS: ReadonlySet<QueuedName> = new Set<QueuedName>([
  'decidePolicy', 'requestApproval', 'startTool', 'reconcileCall', 'settleReconciled',
]);

/** Runs one effect a machine asked for; I/O effects first commit what is staged. */
export async function performEffect(ctx: EffectContext, effect: QueuedEffect): Promise<void> {
  // Calls are planned synchronously (policy, scheduling): blob-stored arguments of the open step
  // are read first (after a rehydrate nothing of them is in memory yet).
  if (PLANS_CALLS.has(effect.name)) await ctx.outputs.loadCalls(ctx.projection.pending.calls);
  await run(ctx, effect);
}

function run<N extends QueuedName>(ctx: EffectContext, effect: { name: N; params: EffectParams<N> }): void | Promise<void> {
  return EFFECTS[effect.name](ctx, effect.params);
}

async function dispatchCalls(a: EffectContext, calls: ToolCallRequest[], budget: number | null): Promise<void> {
  const s = settings(a);
  const { step } = scope(a);
  const known = new Set(a.projection.pending.calls.map((c) => c.callId));
  let valid = 0;
  // the tool is judged on the whole arguments, the log keeps the blob's reference (and a preview)
  await a.outputs.loadCalls(calls);
  const resolved = calls.map((call) => a.ports.tools.resolveCall(call.name, a.outputs.argumentsOf(call), s.tools, { workspace: s.workspace }));
  // the calls that may run are reserved against the tool budget before any is dispatched (same commit)
  if (budget !== null) reserveToolCalls(a, Math.min(budget, resolved.filter((r) => r.status === 'valid').length));
  calls.forEach((call, index) => {
    const callId = derivedId('call', step, String(index));
    const r = resolved[index]!;
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

/** What the model reads for a call the tool budget left out: the budget, and how much of it this step had. */
function toolBudgetReason(a: EffectContext): string {
  const max = settings(a).budgets.maxToolCalls;
  const left = toolReservation(a)?.calls ?? 0;
  // what running children were given is the turn's too: say so, or the count reads wrong
  const held = Object.values(a.projection.reservations ?? {}).reduce((n, r) => n + (r.kind === 'subagent' ? (r.calls ?? 0) : 0), 0);
  return `tool_budget: not run. The turn may start ${max ?? 0} tool calls in all (--max-tool-calls ${max ?? 0}${held > 0 ? `, ${held} of them given to your running subagents` : ''}), `
    + `and the ${left} this step had left went to the calls before this one`;
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

/**
 * Stages `completion/rejected` when the open step's final answer does not meet the turn's
 * completion policy; the turn machine then takes another step or fails the turn. Decided from
 * the projection alone: after a crash before the commit, the same log gives the same verdict.
 */
function checkCompletion(a: EffectContext, answer: string): void {
  const s = settings(a);
  const policy = policyOf(s);
  if (policy === 'answer') return;
  const missing = completionMissing(s, a.projection.completion, answer);
  if (missing.length === 0) return;
  // under `block` the turn's machine blocks this goal at the limit: it must be active to be blocked
  const goalActive = a.projection.goal?.phase === 'active';
  a.stage({ type: 'completion/rejected', ...scope(a), data: { policy, missing, goalRevision: a.projection.goal?.revision ?? null, ...(goalActive ? { goalActive } : {}) } });
}
