import { describe, expect, it } from 'vitest';
import type { ModelRequest, ModelStreamEvent, PreparedRequest } from '../../src/model/model-port.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { createScriptedModel, ScriptedModelError, type ScriptedModel } from '../../src/model/scripted-model.js';
import { ConfigError, ModelError } from '../../src/protocol/errors.js';

const request: ModelRequest = {
  model: 'scripted',
  instructions: 'You are a careful agent.',
  tools: [{ name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
  messages: [{ role: 'user', content: 'read a.txt' }],
  maxOutputTokens: 1024,
};

async function collect(model: ScriptedModel, prepared: PreparedRequest, signal = new AbortController().signal): Promise<ModelStreamEvent[]> {
  const events: ModelStreamEvent[] = [];
  for await (const event of model.stream(prepared, signal)) events.push(event);
  return events;
}

async function thrown(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
}

function modelOf(responses: ScriptResponse[]): ScriptedModel {
  return createScriptedModel({ responses, source: 'test.json' });
}

describe('ScriptedModel.prepare', () => {
  it('gives the same bytes and digest for the same request, stable parts first', () => {
    const model = modelOf([]);
    const a = model.prepare(request);
    const b = model.prepare(structuredClone(request));
    expect(a.body).toBe(b.body);
    expect(a.digest).toBe(b.digest);
    expect(a.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Object.keys(JSON.parse(a.body) as object)).toEqual(['model', 'instructions', 'tools', 'max_output_tokens', 'messages']);
    expect(model.prepare({ ...request, instructions: 'other' }).digest).not.toBe(a.digest);
  });
});

describe('ScriptedModel.stream', () => {
  it('streams text in at least two deltas, then done with an inferred stop', async () => {
    const model = modelOf([{ content: 'The file says hello world', usage: { input_tokens: 10, output_tokens: 5 } }]);
    const events = await collect(model, model.prepare(request));
    const deltas = events.filter((e) => e.type === 'text_delta');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas.map((d) => d.text).join('')).toBe('The file says hello world');
    expect(deltas[0]!.text.endsWith(' ')).toBe(true); // split at a word boundary
    const done = events.at(-1)!;
    expect(done).toEqual({
      type: 'done',
      output: { content: 'The file says hello world', toolCalls: [], finishReason: 'stop', usage: { inputTokens: 10, outputTokens: 5, estimated: false } },
    });
    expect(model.cursor).toBe(1);
  });

  it('streams tool calls in two deltas each, with stable IDs and tool_calls inferred', async () => {
    const script: ScriptResponse[] = [
      { content: 'ok' },
      {
        tool_calls: [
          { name: 'read_file', arguments: { path: 'a.txt' } },
          { id: 'call_given', name: 'list_dir', arguments: '{"path": ' },
        ],
      },
    ];
    const run = async (): Promise<ModelStreamEvent[]> => {
      const model = modelOf(script);
      await collect(model, model.prepare(request));
      return collect(model, model.prepare(request));
    };
    const events = await run();
    expect(events.map((e) => e.type)).toEqual(['tool_call_delta', 'tool_call_delta', 'tool_call_delta', 'tool_call_delta', 'done']);
    expect(events[0]).toMatchObject({ index: 0, id: 'call_s1_0', name: 'read_file' });
    expect(events[1]).not.toHaveProperty('id');
    const args0 = events.slice(0, 2).map((e) => (e.type === 'tool_call_delta' ? e.argumentsDelta : '')).join('');
    expect(args0).toBe('{"path":"a.txt"}');
    const done = events.at(-1)!;
    if (done.type !== 'done') throw new Error('no done');
    expect(done.output.finishReason).toBe('tool_calls');
    expect(done.output.content).toBeNull();
    expect(done.output.toolCalls).toEqual([
      { id: 'call_s1_0', name: 'read_file', arguments: '{"path":"a.txt"}' },
      { id: 'call_given', name: 'list_dir', arguments: '{"path": ' },
    ]);
    // Same script, fresh model: the same IDs, so a replayed run matches its log.
    expect(await run()).toEqual(events);
  });

  it('keeps a given finish reason and estimates usage when absent', async () => {
    const model = modelOf([{ content: 'truncated answ', finish_reason: 'length' }]);
    const prepared = model.prepare(request);
    const done = (await collect(model, prepared)).at(-1)!;
    if (done.type !== 'done') throw new Error('no done');
    expect(done.output.finishReason).toBe('length');
    expect(done.output.usage).toEqual({
      inputTokens: Math.ceil(prepared.body.length / 4),
      outputTokens: Math.ceil('truncated answ'.length / 4),
      estimated: true,
    });
  });

  it('throws scripted errors with their class, retryability and retryAfterMs, then moves on', async () => {
    const model = modelOf([
      { error: { type: 'rate_limit', retry_after_ms: 10 } },
      { error: { type: 'context_overflow' } },
      { content: 'recovered' },
    ]);
    const prepared = model.prepare(request);
    const first = await thrown(collect(model, prepared));
    expect(first).toBeInstanceOf(ScriptedModelError);
    expect(first).toMatchObject({ code: 'rate_limit', retryable: true, retryAfterMs: 10 });
    expect(model.classifyError(first)).toEqual({
      class: 'rate_limit',
      message: (first as Error).message,
      retryable: true,
      retryAfterMs: 10,
    });
    const second = await thrown(collect(model, prepared));
    expect(model.classifyError(second)).toMatchObject({ class: 'context_overflow', retryable: false, retryAfterMs: null });
    expect((await collect(model, prepared)).at(-1)).toMatchObject({ output: { content: 'recovered' } });
  });

  it('leaves the cursor unchanged when aborted during a delay', async () => {
    const model = modelOf([{ content: 'slow answer', delay_ms: 5_000 }]);
    const prepared = model.prepare(request);
    const controller = new AbortController();
    const pending = thrown(collect(model, prepared, controller.signal));
    setTimeout(() => controller.abort(), 10);
    const err = await pending;
    expect(err).toBeInstanceOf(ModelError);
    expect(model.classifyError(err)).toMatchObject({ class: 'cancelled', retryable: false });
    expect(model.cursor).toBe(0);
  });

  it('leaves the cursor unchanged when the consumer stops between chunks', async () => {
    const model = modelOf([{ content: 'one two three four' }]);
    const prepared = model.prepare(request);
    const controller = new AbortController();
    const seen: ModelStreamEvent[] = [];
    const err = await thrown(
      (async () => {
        for await (const event of model.stream(prepared, controller.signal)) {
          seen.push(event);
          controller.abort(); // a fault lands between the first and second chunk
        }
      })(),
    );
    expect(seen).toHaveLength(1);
    expect(err).toMatchObject({ code: 'cancelled' });
    expect(model.cursor).toBe(0);
    // The resumed run replays the same response.
    expect((await collect(model, prepared)).at(-1)).toMatchObject({ output: { content: 'one two three four' } });
  });

  it('says when the script ran out, records every request, and checks completeness', async () => {
    const model = modelOf([{ content: 'only' }, { content: 'unused' }]);
    const prepared = model.prepare(request);
    await collect(model, prepared);
    expect(() => model.assertComplete()).toThrow(ConfigError);
    await collect(model, prepared);
    model.assertComplete();
    const err = await thrown(collect(model, prepared));
    expect(err).toMatchObject({ code: 'server', retryable: false, message: 'scripted model ran out of responses after 2 (script test.json)' });
    expect(model.requests).toEqual([prepared, prepared, prepared]);
  });

  it('resumes from a given cursor and reports fixed capabilities', async () => {
    const model = createScriptedModel({ responses: [{ content: 'a' }, { content: 'b b' }], cursor: 1 });
    expect((await collect(model, model.prepare(request))).at(-1)).toMatchObject({ output: { content: 'b b' } });
    expect(model.provider).toBe('scripted');
    expect(model.capabilities('scripted')).toEqual({
      contextWindow: 128000,
      maxOutputTokens: 4096,
      parallelToolCalls: true,
      structuredOutput: true,
      vision: false,
    });
  });
});
