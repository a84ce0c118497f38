import { performance } from 'node:perf_hooks';
import { ToolError } from '../../protocol/errors.js';
import type { OpenCall } from '../../store/projection.js';
import { idempotencyKey } from '../../tools/idempotency.js';
import type { ReconcileVerdict } from '../../tools/tool.js';
import { scope, settings, type EffectContext } from '../agent/effect-context.js';
import { planCall } from './tool-policy.js';

// Recovery `reconcile` (design §7): a call with reconcile semantics that a crash left between
// `tool/start` and its end is settled by asking its tool what became of it. The answer is a fact
// of its own, `tool/reconciled`, committed before what follows from it (the result, a run again,
// or an unknown outcome), so the log says why the call was settled as it was.

/** How long a tool's `reconcile` may look before its answer counts as unknown. */
const DEFAULT_RECONCILE_TIMEOUT_MS = 30_000;

const VERDICTS = new Set(['applied', 'not_applied', 'unknown']);

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Asks the call's tool and stages `tool/reconciled` with its verdict. Nothing is committed here:
 * the verdict goes out with the recovery batch, and a crash before that asks again (reconcile
 * changes nothing, so asking twice is harmless). A throw, a timeout or a malformed answer is an
 * `unknown` verdict naming what went wrong.
 */
export async function reconcileCall(a: EffectContext, callId: string): Promise<void> {
  const call = a.projection.pending.calls.find((c) => c.callId === callId);
  if (!call || call.observation !== null) return;
  const started = performance.now();
  const verdict = await ask(a, call);
  // the tool has answered and nothing of it is staged yet: a crash here must ask again
  a.ports.faults.hit('during:reconcile', a.actorId);
  // an abort while the tool looked closed the call already (as unknown): its late answer is dropped
  if (a.halted || a.callState(callId) !== 'reconciling') return;
  const t = a.ports.tooling;
  let output: string | null = null;
  let redactions = 0;
  if (verdict.status === 'applied') {
    const redacted = t.redactor.redact(verdict.output);
    output = cut(redacted.text, t.observationBudgetBytes);
    redactions = redacted.count;
  }
  const reason = verdict.status === 'unknown' ? t.redactor.redact(verdict.reason).text : null;
  a.stage({
    type: 'tool/reconciled',
    ...scope(a),
    call: callId,
    data: { verdict: verdict.status, reason, output, durationMs: Math.round(performance.now() - started), redactions },
  });
  if (verdict.status === 'unknown') a.noteRecovered(`call ${callId} (${call.name}) reconciled: outcome unknown (${reason})`);
}

/** Stages the result of a call reconcile found applied, with the output its verdict carried. */
export function settleReconciled(a: EffectContext, callId: string, output: string): void {
  const call = a.projection.pending.calls.find((c) => c.callId === callId);
  if (!call || call.observation !== null) return;
  a.stage({
    type: 'tool/result',
    ...scope(a),
    call: callId,
    data: { ok: true, output, error: null, durationMs: 0, artifact: null, source: `tool:${call.name}`, trust: 'untrusted', redactions: 0 },
  });
  a.noteRecovered(`call ${callId} (${call.name}) reconciled: it had taken effect; its result is recorded`);
}

async function ask(a: EffectContext, call: OpenCall): Promise<ReconcileVerdict> {
  let planned;
  try {
    planned = planCall(a, call);
  } catch (err) {
    // the tool went away (a resume with another registry): nobody can ask it
    if (!(err instanceof ToolError)) throw err;
    return { status: 'unknown', reason: err.message };
  }
  const tool = planned.tool;
  // the registry refuses such a tool; a definition changed under a resumed log could still get here
  if (!tool.reconcile) return { status: 'unknown', reason: `${tool.name} has no reconcile operation` };
  const timeoutMs = tool.timeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(a.signal.reason);
  a.signal.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<ReconcileVerdict>((resolve) => {
    timer = setTimeout(() => {
      ctl.abort(new ToolError('timeout', `reconcile timed out after ${timeoutMs} ms`));
      resolve({ status: 'unknown', reason: `${tool.name}'s reconcile gave no answer within ${timeoutMs} ms` });
    }, timeoutMs);
  });
  try {
    const answer = Promise.resolve().then(() =>
      tool.reconcile!(planned.input, {
        workspace: settings(a).workspace,
        callId: call.callId,
        idempotencyKey: idempotencyKey(call.callId, call.name, planned.input),
        epoch: a.epoch,
        preimage: call.preimage,
        signal: ctl.signal,
        logger: a.logger,
      }),
    );
    return checked(tool.name, await Promise.race([answer, timedOut]));
  } catch (err) {
    return { status: 'unknown', reason: `${tool.name}'s reconcile failed: ${message(err)}` };
  } finally {
    clearTimeout(timer);
    a.signal.removeEventListener('abort', onAbort);
  }
}

/** A verdict as the log takes it; anything else a tool returns is an unknown outcome, saying so. */
function checked(tool: string, v: ReconcileVerdict): ReconcileVerdict {
  if (v === null || typeof v !== 'object' || !VERDICTS.has(v.status)) {
    return { status: 'unknown', reason: `${tool}'s reconcile answered ${JSON.stringify(v)}, not applied, not_applied or unknown` };
  }
  if (v.status === 'applied' && typeof v.output !== 'string') return { status: 'applied', output: '' };
  if (v.status === 'unknown' && typeof v.reason !== 'string') return { status: 'unknown', reason: 'no reason given' };
  return v;
}

/** The output cut to the observation budget (a reconcile's output is a summary, never an artifact). */
function cut(text: string, budgetBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= budgetBytes) return text;
  const head = Buffer.from(text, 'utf8').subarray(0, budgetBytes).toString('utf8');
  return `${head}\n[reconcile output cut at ${budgetBytes} bytes]`;
}
