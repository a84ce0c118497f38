import type { ModelAdapter, ModelOutput, ModelRequest, ModelStreamEvent } from '../../src/model/model-port.js';

/** What one attempt of an adapter produced: its deltas, its final output, or what it threw. */
export interface Drained {
  events: ModelStreamEvent[];
  output: ModelOutput | null;
  error: unknown;
}

/** Prepares `request` and streams it to the end, catching the error instead of throwing it. */
export async function drainModel(model: ModelAdapter, request: ModelRequest, signal: AbortSignal = new AbortController().signal): Promise<Drained> {
  const events: ModelStreamEvent[] = [];
  let output: ModelOutput | null = null;
  try {
    for await (const ev of model.stream(model.prepare(request), signal)) {
      if (ev.type === 'done') output = ev.output;
      else events.push(ev);
    }
    return { events, output, error: null };
  } catch (error) {
    return { events, output, error };
  }
}
