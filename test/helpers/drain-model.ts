import { expect } from 'vitest';
import type { FakeOpenAI } from './fake-openai.js';
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

/**
 * Streams `request`'s prepared body rewritten with spaces and a `1.0` (bytes a JSON parse and
 * stringify would change) through `model`, served by `fake` answering `ok`, and requires the
 * server to have received that body verbatim, as JSON.
 */
export async function expectVerbatimWire(model: ModelAdapter, fake: FakeOpenAI, request: ModelRequest): Promise<void> {
  const prepared = model.prepare(request);
  const odd = prepared.body.replace('{', '{ ').replace('"stream":true', '"stream" : true, "temperature": 1.0');
  expect(JSON.stringify(JSON.parse(odd))).not.toBe(odd);
  let last: ModelStreamEvent | undefined;
  for await (const ev of model.stream({ ...prepared, body: odd }, new AbortController().signal)) last = ev;
  expect(last).toMatchObject({ type: 'done', output: { content: 'ok' } });
  expect(fake.requests.at(-1)!.rawBody).toBe(odd);
  expect(fake.requests.at(-1)!.headers['content-type']).toBe('application/json');
}
