import type { StopInput } from '../../tools/builtins/stop.js';
import type { EffectContext } from '../agent/effect-context.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';

function stageResult(a: EffectContext, r: RuntimeToolRun, reason: string): void {
  a.stage({
    type: 'tool/result',
    ...r.ids,
    data: {
      ok: true,
      output: `The turn stops once this step's calls end: ${reason}`,
      error: null,
      durationMs: 0,
      artifact: null,
      source: 'tool:stop',
      // the model's own decision, carried out by the runtime: nothing from outside the agent
      trust: 'trusted',
    },
  });
}

/**
 * `stop` as the runtime carries it out: `stop/decided` with the model's reason, then the call's
 * result, staged in one tick (one commit). The turn machine ends the turn `stopped` with the
 * reason when the step ends. A rerun after a crash finds the decision in the projection and only
 * stages the result again.
 */
export const stopRuntime: RuntimeTool = {
  name: 'stop',
  async run(a, r) {
    const { reason } = r.input as StopInput;
    const decided = a.projection.openTurn?.stopReason;
    if (decided !== undefined) {
      stageResult(a, r, decided);
      return;
    }
    a.stage({ type: 'stop/decided', ...r.ids, data: { reason, via: 'tool' } });
    stageResult(a, r, reason);
  },
};

/**
 * The stop decision in a final answer under an output schema: a JSON object `{"kind": "stop",
 * "reason": "<non-empty>"}`. Null for anything else, which the schema then judges.
 */
export function stopInAnswer(content: string | null): string | null {
  if (content === null) return null;
  // as the schema check reads an answer: a JSON code fence around it is allowed
  const text = content.trim().replace(/^```(?:json)?\s*|\s*```$/g, '');
  if (!text.startsWith('{')) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const { kind, reason } = value as { kind?: unknown; reason?: unknown };
  return kind === 'stop' && typeof reason === 'string' && reason.trim() !== '' ? reason.trim() : null;
}
