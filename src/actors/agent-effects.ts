import { derivedId, newId } from '../protocol/ids.js';
import { assertNever } from '../protocol/errors.js';
import type { TurnRequest, TurnSettings } from '../protocol/events.js';
import { ZERO_USAGE, type Usage } from '../protocol/history.js';
import type { ModelOutput, PreparedRequest } from '../model/model-port.js';
import { parseModelSpec } from '../model/model-spec.js';
import { costOf } from '../model/pricing.js';
import { checkAnswer } from '../model/output-schema.js';
import { executeTool } from '../tools/execute.js';
import { idempotencyKey } from '../tools/idempotency.js';
import type { ExecutionSemantics } from '../tools/tool.js';
import type { AgentActor } from './agent-actor.js';
import type { Effect } from './machine-set.js';

/** Instructions a turn runs with when its request names none. */
export const DEFAULT_INSTRUCTIONS =
  'You are an agent working in a workspace through tools. Read before you change anything, ' +
  'make the smallest change that solves the task, and end with a short final answer.';

/** Defaults of a turn's budgets and retries. */
export const TURN_DEFAULTS = { maxSteps: 100, maxAttempts: 4 } as const;

/** Largest observation committed in `tool/result`; larger output is cut (artifacts come later). */
export const MAX_OBSERVATION_BYTES = 64 * 1024;

/** Resolves a client's turn request into the settings `turn/start` records. */
export function resolveSettings(req: TurnRequest | null, last: TurnSettings | null, nowMs: number, allTools: string[]): TurnSettings {
  if (!req) {
    if (!last) throw new Error('a turn needs a request with a model and a workspace');
    return { ...last, budgets: { ...last.budgets, deadlineAt: null } };
  }
  return {
    ...(req.outputSchema ? { outputSchema: req.outputSchema } : {}),
    ...(req.effort ? { effort: req.effort } : {}),
    ...(req.maxOutputTokens ? { maxOutputTokens: req.maxOutputTokens } : {}),
    ...(req.config ? { config: req.config } : {}),
    model: req.model,
    baseUrl: req.baseUrl,
    workspace: req.workspace,
    tools: req.tools ?? allTools,
    instructions: req.instructions ?? DEFAULT_INSTRUCTIONS,
    budgets: {
      maxSteps: req.maxSteps ?? TURN_DEFAULTS.maxSteps,
      maxToolCalls: req.maxToolCalls,
      deadlineAt: req.deadlineSeconds === null ? null : Math.round(nowMs + req.deadlineSeconds * 1000),
    },
    maxAttempts: req.maxAttempts ?? TURN_DEFAULTS.maxAttempts,
  };
}

/** The model name a spec sends to its provider: `openai:gpt-4.1` → `gpt-4.1`; a script's spec as is. */
export function modelName(spec: string): string {
  const parsed = parseModelSpec(spec);
  return parsed.provider === 'scripted' ? spec : parsed.model;
}

/** How a started call is recovered, from the tool's execution semantics (design §7). */
export function recoveryOf(s: ExecutionSemantics): 'rerun' | 'idempotent' | 'reconcile' | 'manual' {
  if (s.effects === 'none') return s.retry === 'auto' ? 'rerun' : 'manual';
  return s.recovery.kind;
}

/** The cost of an attempt's usage at the turn's model's price; null when the price is unknown. */
function costFor(a: AgentActor, usage: Usage): number | null {
  return costOf(usage, a.ports.pricing?.(modelName(settings(a).model)) ?? null);
}

function estimateUsage(bytesIn: number, charsOut: number): Usage {
  return { inputTokens: Math.ceil(bytesIn / 4), outputTokens: Math.ceil(charsOut / 4), estimated: true };
}

function cutObservation(text: string): string {
  if (Buffer.byteLength(text) <= MAX_OBSERVATION_BYTES) return text;
  const head = Buffer.from(text).subarray(0, MAX_OBSERVATION_BYTES).toString('utf8');
  return `${head}\n[output cut at ${MAX_OBSERVATION_BYTES} bytes of ${Buffer.byteLength(text)}; read a narrower range]`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function abortReason(a: AgentActor): string {
  const r: unknown = a.turnAbort.signal.reason;
  return typeof r === 'string' ? r : 'cancelled';
}

function scope(a: AgentActor): { turn: string; step: string } {
  return { turn: a.projection.openTurn!.id, step: a.projection.openStep!.id };
}

async function ensureModel(a: AgentActor) {
  if (!a.model) a.model = await a.ports.modelFor(a.projection.openTurn!.settings, a.projection.modelResponses);
  return a.model;
}

function settings(a: AgentActor): TurnSettings {
  return a.projection.openTurn!.settings;
}

async function prepare(a: AgentActor): Promise<PreparedRequest> {
  const model = await ensureModel(a);
  const s = settings(a);
  const prepared = model.prepare({
    model: modelName(s.model),
    instructions: s.instructions,
    tools: a.ports.tools.specs(s.tools),
    // A copy: the projection keeps appending to its history, and a prepared request must keep
    // saying what was sent (its body already does; `request` must not drift from it).
    messages: [...a.projection.history],
    maxOutputTokens: s.maxOutputTokens ?? null,
    ...(s.outputSchema ? { outputSchema: s.outputSchema } : {}),
    ...(s.effort ? { effort: s.effort } : {}),
  });
  // Only the step's own request is kept: older ones are in the blob store, and bodies grow with history.
  a.prepared.clear();
  a.prepared.set(prepared.digest, prepared);
  return prepared;
}

/** Runs one effect a machine asked for; I/O effects first commit what is staged. */
export async function performEffect(a: AgentActor, effect: Effect): Promise<void> {
  const p = effect.params;
  const name = effect.name as EffectName;
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
      a.ports.blobs.put(prepared.body).catch((err: unknown) =>
        a.ports.logger.warn({ err, digest: prepared.digest }, 'prepared request blob not stored'),
      );
      a.stage({
        type: 'request/prepared',
        ...scope(a),
        data: { digest: prepared.digest, bytes: Buffer.byteLength(prepared.body), messages: a.projection.history.length },
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
      // Policy rules arrive with the tool pipeline; until then every visible, valid call is allowed.
      a.stage({
        type: 'policy/decided',
        ...scope(a),
        call: p.callId,
        data: { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null },
      });
      return;
    case 'startTool':
      return startTool(a, p.callId, p.rerun);
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
    case 'markOutcomeUnknown':
      a.stage({ type: 'tool/outcome_unknown', ...scope(a), call: p.callId, data: { reason: p.reason } });
      a.noteRecovered(`call ${p.callId} outcome unknown`);
      return;
    case 'endStep': {
      const open = a.projection.openStep!;
      a.stage({ type: 'step/end', ...scope(a), data: { ...p, usage: open.usage ?? ZERO_USAGE, costUsd: open.costUsd ?? null } });
      return;
    }
    case 'endTurn':
      a.stage({ type: 'turn/end', turn: a.projection.openTurn!.id, data: { ...p, costUsd: a.projection.openTurn!.costUsd } });
      return;
    default:
      assertNever(name, 'effect');
  }
}

type EffectName =
  | 'startTurn' | 'turnEnded' | 'startStep' | 'prepareRequest' | 'startAttempt' | 'callModel'
  | 'interruptAttempt' | 'dispatchCalls' | 'decidePolicy' | 'startTool' | 'rejectCall' | 'denyCall'
  | 'cancelCall' | 'markOutcomeUnknown' | 'endStep' | 'endTurn';

async function callModel(a: AgentActor, attemptId: string, digest: string): Promise<void> {
  // Intent before act: the attempt (and the step that holds it) is in the log before any byte is sent.
  await a.flush();
  const ids = { ...scope(a), attempt: attemptId };
  let prepared = a.prepared.get(digest);
  if (!prepared) {
    // After a rehydrate: the closed history has not changed since the step began, so preparing
    // again gives the same bytes; the digest check proves it.
    prepared = await prepare(a);
    if (prepared.digest !== digest) {
      a.ports.logger.warn({ expected: digest, got: prepared.digest }, 're-prepared request differs from the recorded one');
    }
  }
  const model = await ensureModel(a);
  const started = a.ports.clock.nowMs();
  const signal = a.turnAbort.signal;
  // A signal of this attempt alone, unlinked when it ends: clients add listeners to the signal
  // they are given and keep them, so the turn's own signal would collect one per attempt.
  const attempt = new AbortController();
  const forward = (): void => attempt.abort(signal.reason);
  signal.addEventListener('abort', forward, { once: true });
  let streamed = 0;
  let output: ModelOutput | null = null;
  try {
    if (signal.aborted) throw new Error('aborted before the request was sent');
    let first = true;
    for await (const ev of model.stream(prepared, attempt.signal)) {
      if (ev.type === 'done') {
        output = ev.output;
        break;
      }
      streamed += ev.type === 'text_delta' ? ev.text.length : ev.argumentsDelta.length;
      a.ports.onDelta?.(ev);
      if (first) {
        first = false;
        a.ports.faults.hit('mid:model-stream', a.actorId);
      }
    }
    if (!output) throw new Error('model stream ended without a final output');
  } catch (err) {
    signal.removeEventListener('abort', forward);
    if ((err as { code?: string }).code === 'actor.dropped') throw err;
    const latencyMs = Math.round(a.ports.clock.nowMs() - started);
    const bytes = Buffer.byteLength(prepared.body);
    if (signal.aborted) {
      a.stage({
        type: 'attempt/end',
        ...ids,
        data: {
          outcome: 'aborted',
          error: { class: 'cancelled', message: abortReason(a), retryable: false },
          usage: estimateUsage(bytes, streamed),
          backoffMs: null,
          latencyMs,
          costUsd: costFor(a, estimateUsage(bytes, streamed)),
        },
      });
      return;
    }
    const info = model.classifyError(err);
    const index = a.projection.openAttempt?.index ?? 1;
    const backoffMs = info.retryable
      ? (info.retryAfterMs ?? Math.round(Math.min(8000, 250 * 2 ** (index - 1)) * (0.5 + Math.random() / 2)))
      : null;
    const usage: Usage = streamed > 0 ? estimateUsage(bytes, streamed) : { inputTokens: 0, outputTokens: 0, estimated: false };
    a.stage({
      type: 'attempt/end',
      ...ids,
      data: {
        outcome: info.class === 'context_overflow' ? 'overflow' : 'failed',
        error: { class: info.class, message: info.message, retryable: info.retryable },
        usage,
        backoffMs,
        latencyMs,
        costUsd: costFor(a, usage),
      },
    });
    return;
  }
  signal.removeEventListener('abort', forward);
  const latencyMs = Math.round(a.ports.clock.nowMs() - started);
  // An accepted output and its attempt/end are one commit: both are staged before any flush.
  a.stage({
    type: 'attempt/end',
    ...ids,
    data: { outcome: 'succeeded', error: null, usage: output.usage, backoffMs: null, latencyMs, costUsd: costFor(a, output.usage) },
  });
  // A final answer must match the turn's output schema; a refused one goes back to the model.
  const refusal = output.toolCalls.length === 0 ? checkAnswer(settings(a).outputSchema ?? null, output.content) : null;
  if (refusal !== null) {
    a.stage({ type: 'assistant/rejected', ...ids, data: { reason: refusal, content: output.content } });
    return;
  }
  a.stage({
    type: 'assistant/accepted',
    ...ids,
    data: { content: output.content, toolCalls: output.toolCalls, finishReason: output.finishReason },
  });
}

function dispatchCalls(a: AgentActor, calls: Array<{ id: string; name: string; arguments: string }>, budget: number | null): void {
  const s = settings(a);
  const { step } = scope(a);
  const known = new Set(a.projection.pending.calls.map((c) => c.callId));
  let valid = 0;
  calls.forEach((call, index) => {
    const callId = derivedId('call', step, String(index));
    const r = a.ports.tools.resolveCall(call.name, call.arguments, s.tools);
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
        status: r.status,
        error: r.status === 'valid' ? null : r.error,
        effects: r.status === 'valid' ? r.effects.effects : null,
        recovery: r.status === 'valid' ? recoveryOf(r.effects) : null,
        withinBudget,
      },
    });
  });
}

async function startTool(a: AgentActor, callId: string, rerun: boolean): Promise<void> {
  const call = a.projection.pending.calls.find((c) => c.callId === callId);
  if (!call) throw new Error(`tool call ${callId} is not in the open step`);
  const s = settings(a);
  const r = a.ports.tools.resolveCall(call.name, call.arguments, s.tools);
  if (r.status !== 'valid') throw new Error(`tool call ${callId} no longer resolves: ${r.error}`);
  const key = idempotencyKey(callId, call.name, r.input);
  const ids = { ...scope(a), call: callId };
  a.stage({
    type: 'tool/start',
    ...ids,
    data: { name: call.name, input: r.input, effects: r.effects.effects, idempotencyKey: key, rerun },
  });
  if (rerun) {
    const why = r.effects.effects === 'none' ? 'it has no side effects' : `it is idempotent under key ${key}`;
    a.noteRecovered(`call ${callId} (${call.name}) run again: ${why}`);
  }
  // No effect starts without a committed tool/start.
  await a.flush();
  if (a.turnAbort.signal.aborted) {
    a.stage({ type: 'tool/cancelled', ...ids, data: { reason: abortReason(a) } });
    return;
  }
  const result = await executeTool(
    r.tool,
    r.input,
    { workspace: s.workspace, callId, idempotencyKey: key, epoch: a.ports.log.epoch, logger: a.ports.logger, signal: a.turnAbort.signal },
    r.tool.timeoutMs ?? 120_000,
  );
  a.ports.faults.hit('before:tool/result', a.actorId);
  if (result.errorClass === 'cancelled') {
    a.stage({ type: 'tool/cancelled', ...ids, data: { reason: abortReason(a) } });
    return;
  }
  a.stage({
    type: 'tool/result',
    ...ids,
    data: {
      ok: result.ok,
      output: cutObservation(result.output),
      error: result.error ? { code: result.error.code, message: result.error.message, retryable: false } : null,
      durationMs: result.durationMs,
    },
  });
}
