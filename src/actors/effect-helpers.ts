import type { TurnSettings } from '../protocol/events.js';
import type { Usage } from '../protocol/history.js';
import type { PreparedRequest } from '../model/model-port.js';
import { costOf } from '../model/pricing.js';
import type { AgentActor } from './agent-actor.js';
import { MAX_OBSERVATION_BYTES, modelName } from './turn-settings.js';

// Helpers the effect handlers share: the open turn's settings and scope, its model, time.

/** The cost of an attempt's usage at the turn's model's price; null when the price is unknown. */
export function costFor(a: AgentActor, usage: Usage): number | null {
  return costOf(usage, a.ports.pricing?.(modelName(settings(a).model)) ?? null);
}

export function estimateUsage(bytesIn: number, charsOut: number): Usage {
  return { inputTokens: Math.ceil(bytesIn / 4), outputTokens: Math.ceil(charsOut / 4), estimated: true };
}

export function cutObservation(text: string): string {
  if (Buffer.byteLength(text) <= MAX_OBSERVATION_BYTES) return text;
  const head = Buffer.from(text).subarray(0, MAX_OBSERVATION_BYTES).toString('utf8');
  return `${head}\n[output cut at ${MAX_OBSERVATION_BYTES} bytes of ${Buffer.byteLength(text)}; read a narrower range]`;
}


export function abortReason(a: AgentActor): string {
  const r: unknown = a.turnAbort.signal.reason;
  return typeof r === 'string' ? r : 'cancelled';
}

export function scope(a: AgentActor): { turn: string; step: string } {
  return { turn: a.projection.openTurn!.id, step: a.projection.openStep!.id };
}

export async function ensureModel(a: AgentActor) {
  if (!a.model) a.model = await a.ports.modelFor(a.projection.openTurn!.settings, a.projection.modelResponses);
  return a.model;
}

export function settings(a: AgentActor): TurnSettings {
  return a.projection.openTurn!.settings;
}

export async function prepare(a: AgentActor): Promise<PreparedRequest> {
  const model = await ensureModel(a);
  const s = settings(a);
  const prepared = model.prepare({
    model: modelName(s.model),
    instructions: s.instructions,
    tools: a.ports.tools.specs(s.tools),
    // A copy: the projection keeps appending to its history, and a prepared request must keep
    // saying what was sent (its body already does; `request` must not drift from it). Model
    // output the log keeps as a blob is sent whole.
    messages: await a.outputs.history(a.projection.history),
    maxOutputTokens: s.maxOutputTokens ?? null,
    ...(s.outputSchema ? { outputSchema: s.outputSchema } : {}),
    ...(s.effort ? { effort: s.effort } : {}),
  });
  // Only the step's own request is kept: older ones are in the blob store, and bodies grow with history.
  a.prepared.clear();
  a.prepared.set(prepared.digest, prepared);
  return prepared;
}
