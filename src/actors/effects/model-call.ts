import type { ModelOutput } from '../../model/model-port.js';
import { checkAnswer } from '../../model/output-schema.js';
import { hasCode, ModelError } from '../../protocol/errors.js';
import type { Usage } from '../../protocol/history.js';
import type { ModelErrorClass } from '../../protocol/events.js';
import { StreamedTokens } from '../../model/tokens.js';
import { settleAttempt, type BudgetStop } from '../goals/budget.js';
import { stopInAnswer } from './stop-decision.js';
import { modelName } from '../../model/model-spec.js';
import { abortReason, scope, settings, type EffectContext } from '../agent/effect-context.js';
import { assemblyOf, costFor, ensureModel, estimateUsage, prepare } from '../agent/model-request.js';
import { maxOutputBytesOf, OUTPUT_TOO_LARGE, outputBytes, outputTooLarge, storeOutput } from '../agent/output-blobs.js';

/** The error that cuts a stream at its reservation's output room: classed by the budget, never retried. */
function budgetCut(budget: BudgetStop, tokens: number): ModelError {
  const which = { token_budget: "the turn's budget (--max-tokens)", cost_budget: "the turn's budget (--max-cost)", goal_token_budget: "the goal's budget (--goal-tokens)", goal_cost_budget: "the goal's budget (--goal-cost)" }[budget];
  return new ModelError(budget, `the output ran past the ${tokens} tokens ${which} had left for it, and was cut; its partial output is not accepted`, { retryable: false });
}

/**
 * One model attempt: commits what is staged (the attempt's intent), streams the prepared request,
 * publishes deltas live, and stages the outcome: an accepted (or, against an output schema,
 * refused) answer with its attempt/end, or a classified failure with its backoff.
 */
export async function callModel(a: EffectContext, attemptId: string, digest: string): Promise<void> {
  // Intent before act: the attempt (and the step that holds it) is in the log before any byte is sent.
  await a.flush();
  const ids = Object.assign(scope(a), { attempt: attemptId });
  let prepared = a.turn.prepared.get(digest);
  if (!prepared) {
    // After a rehydrate: the closed history has not changed since the step began, so preparing
    // again gives the same bytes; the digest check proves it.
    prepared = await prepare(a);
    if (prepared.digest !== digest) {
      a.logger.warn({ expected: digest, got: prepared.digest }, 're-prepared request differs from the recorded one');
    }
  }
  const model = await ensureModel(a);
  const started = a.ports.clock.nowMs();
  const signal = a.signal;
  // A signal of this attempt alone, unlinked when it ends: clients add listeners to the signal
  // they are given and keep them, so the turn's own signal would collect one per attempt.
  const attempt = new AbortController();
  const forward = (): void => attempt.abort(signal.reason);
  signal.addEventListener('abort', forward, { once: true });
  let streamed = 0;
  // The cap is checked as the output streams in: an endless answer is stopped, never held whole.
  const cap = maxOutputBytesOf(settings(a));
  let outBytes = 0;
  // a budget reservation's output room, counted in tokens as the output streams in
  const room = a.turn.outputRoom?.attemptId === attemptId ? a.turn.outputRoom : null;
  const outTokens = room ? new StreamedTokens(modelName(settings(a).model)) : null;
  let output: ModelOutput | null = null;
  try {
    if (signal.aborted) throw new Error('aborted before the request was sent');
    // known before it is sent: a request that cannot fit the window ends the step (design §10)
    const overflow = assemblyOf(a, prepared.digest)?.overflow ?? null;
    if (overflow !== null) throw new ModelError('context_overflow', overflow, { retryable: false });
    let first = true;
    for await (const ev of model.stream(prepared, attempt.signal)) {
      if (ev.type === 'done') {
        output = ev.output;
        break;
      }
      const text = ev.type === 'text_delta' ? ev.text : ev.argumentsDelta;
      streamed += text.length;
      outBytes += Buffer.byteLength(text);
      if (outBytes > cap) {
        const tooLarge = outputTooLarge(cap, outBytes);
        attempt.abort(tooLarge);
        throw tooLarge;
      }
      if (room && outTokens!.add(text, room.tokens)) {
        const cut = budgetCut(room.budget, room.tokens);
        attempt.abort(cut);
        throw cut;
      }
      a.ports.onDelta?.(ev);
      if (first) {
        first = false;
        a.ports.faults.hit('mid:model-stream', a.actorId);
      }
    }
    if (!output) throw new Error('model stream ended without a final output');
    // an adapter may hand the output over whole, with no deltas
    if (outputBytes(output) > cap) throw outputTooLarge(cap, outputBytes(output));
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
      settleAttempt(a, attemptId, estimateUsage(bytes, streamed));
      return;
    }
    // our own stop at the cap is no adapter's error to classify: final, since a retry would do it again
    const info = hasCode(err, OUTPUT_TOO_LARGE) || (err instanceof ModelError && err.code === 'context_overflow' && streamed === 0 && latencyMs >= 0 && !err.retryable && err.message.startsWith('the request needs')) || hasCode(err, 'token_budget') || hasCode(err, 'cost_budget') || hasCode(err, 'goal_token_budget') || hasCode(err, 'goal_cost_budget')
      ? { class: err.code as ModelErrorClass, message: err.message, retryable: false, retryAfterMs: null }
      : model.classifyError(err);
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
    // a cut stream's partial output is not accepted (no assistant/accepted, no tool call), its usage charged
    settleAttempt(a, attemptId, usage);
    return;
  }
  signal.removeEventListener('abort', forward);
  const latencyMs = Math.round(a.ports.clock.nowMs() - started);
  // Output too big for a commit goes to the blob store first: the events name it by digest.
  const stored = await storeOutput(output, a.ports.blobs, a.outputs);
  // An accepted output and its attempt/end are one commit: both are staged before any flush.
  a.stage({
    type: 'attempt/end',
    ...ids,
    data: { outcome: 'succeeded', error: null, usage: output.usage, backoffMs: null, latencyMs, costUsd: costFor(a, output.usage) },
  });
  settleAttempt(a, attemptId, output.usage);
  const schema = settings(a).outputSchema ?? null;
  // Under an output schema the model may answer its stop decision instead (seed 004 §3.1): the
  // decision is committed with the answer, and the turn ends `stopped` with the reason.
  const stop = schema !== null && output.toolCalls.length === 0 ? stopInAnswer(output.content) : null;
  if (stop !== null) a.stage({ type: 'stop/decided', ...ids, data: { reason: stop, via: 'answer' } });
  // A final answer must match the turn's output schema; a refused one goes back to the model.
  const refusal = output.toolCalls.length === 0 && stop === null ? checkAnswer(schema, output.content) : null;
  if (refusal !== null) {
    const data = { reason: refusal, content: stored.content, ...(stored.contentRef ? { contentRef: stored.contentRef } : {}) };
    a.stage({ type: 'assistant/rejected', ...ids, data });
    return;
  }
  a.stage({
    type: 'assistant/accepted',
    ...ids,
    data: {
      content: stored.content,
      toolCalls: stored.toolCalls,
      finishReason: output.finishReason,
      ...(stored.contentRef ? { contentRef: stored.contentRef } : {}),
    },
  });
}
