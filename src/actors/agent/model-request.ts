import type { HistoryItem, Usage } from '../../protocol/history.js';
import type { PreparedRequest } from '../../model/model-port.js';
import { costOf } from '../../model/pricing.js';
import { modelName } from '../../model/model-spec.js';
import { settings, type EffectContext } from './effect-context.js';

// The open step's model request: the turn's model, the request prepared from the history, and
// what an attempt's usage costs.

/** The cost of an attempt's usage at the turn's model's price; null when the price is unknown. */
export function costFor(a: EffectContext, usage: Usage): number | null {
  return costOf(usage, a.ports.pricing?.(modelName(settings(a).model)) ?? null);
}

/** Usage estimated from what was sent and received (about 4 of each per token), marked `estimated`: for a provider that reports none. */
export function estimateUsage(bytesIn: number, charsOut: number): Usage {
  return { inputTokens: Math.ceil(bytesIn / 4), outputTokens: Math.ceil(charsOut / 4), estimated: true };
}

/** The open turn's model adapter, made once per turn. */
export async function ensureModel(a: EffectContext) {
  a.turn.model ??= await a.ports.modelFor(a.projection.openTurn!.settings, a.projection.modelResponses);
  return a.turn.model;
}

/** Prepares the open step's request from the history, and `extra` items after it (what the step's prepare adds). */
export async function prepare(a: EffectContext, extra: HistoryItem[] = []): Promise<PreparedRequest> {
  const model = await ensureModel(a);
  const s = settings(a);
  const prepared = model.prepare({
    model: modelName(s.model),
    instructions: s.instructions,
    tools: a.ports.tools.specs(s.tools),
    // A copy: the projection keeps appending to its history, and a prepared request must keep
    // saying what was sent (its body already does; `request` must not drift from it). Model
    // output the log keeps as a blob is sent whole.
    messages: extra.length > 0 ? [...(await a.outputs.history(a.projection.history)), ...extra] : await a.outputs.history(a.projection.history),
    maxOutputTokens: s.maxOutputTokens ?? null,
    ...(s.outputSchema ? { outputSchema: s.outputSchema } : {}),
    ...(s.effort ? { effort: s.effort } : {}),
  });
  // Only the step's own request is kept: older ones are in the blob store, and bodies grow with history.
  a.turn.prepared.clear();
  a.turn.prepared.set(prepared.digest, prepared);
  return prepared;
}
