import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createOpenAIResponsesModel, prepareOpenAIResponses } from '../../src/model/openai-responses.js';
import type { ModelAdapter, ModelRequest, ModelStreamEvent } from '../../src/model/model-port.js';
import { ModelError } from '../../src/protocol/errors.js';
import { FAULTS, startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';
import { estimateUsage } from '../../src/model/tokens.js';
import { drainModel, expectVerbatimWire, type Drained } from '../helpers/drain-model.js';

const API_KEY = 'sk-test-SECRETSECRET1234567890';
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
});

async function serve(turns: FakeTurn[], timeoutMs?: number): Promise<{ fake: FakeOpenAI; model: ModelAdapter }> {
  const fake = await startFakeOpenAI({ turns });
  closers.push(() => fake.close());
  const model = createOpenAIResponsesModel({ apiKey: API_KEY, baseURL: fake.baseURL, model: 'test-model', ...(timeoutMs ? { timeoutMs } : {}) });
  return { fake, model };
}

const REQUEST: ModelRequest = {
  model: 'test-model',
  instructions: 'You are a careful coding agent.',
  tools: [
    { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
    { name: 'search', description: 'Search the workspace', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
  ],
  messages: [
    { role: 'user', content: 'Fix the failing test.' },
    { role: 'assistant', content: 'Reading it.', toolCalls: [{ id: 'call_1', name: 'read_file', arguments: '{"path":"a.ts"}' }] },
    { role: 'tool', callId: 'call_1', name: 'read_file', content: 'export const a = 1;' },
  ],
  maxOutputTokens: 1000,
};

function drain(model: ModelAdapter, request: ModelRequest = REQUEST, signal: AbortSignal = new AbortController().signal): Promise<Drained> {
  return drainModel(model, request, signal);
}

async function failure(turn: FakeTurn): Promise<{ error: ModelError; info: ReturnType<ModelAdapter['classifyError']> }> {
  const { model } = await serve([turn]);
  const { error, output } = await drain(model);
  expect(output).toBeNull();
  expect(error).toBeInstanceOf(ModelError);
  const info = model.classifyError(error);
  expect((error as ModelError).code).toBe(info.class);
  expect(info.message).not.toContain(API_KEY);
  expect((error as ModelError).message).not.toContain(API_KEY);
  expect(info.message).not.toMatch(/\n/);
  return { error: error as ModelError, info };
}

describe('openai-responses: prepare', () => {
  it('builds the Responses body in a fixed order, stateless, deterministically', () => {
    const a = prepareOpenAIResponses(REQUEST);
    const b = prepareOpenAIResponses(structuredClone(REQUEST));
    expect(a.body).toBe(b.body);
    expect(a.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(a.digest).toBe(b.digest);
    const body = JSON.parse(a.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['model', 'instructions', 'tools', 'input', 'max_output_tokens', 'stream', 'store']);
    expect(body).toMatchObject({ model: 'test-model', instructions: 'You are a careful coding agent.', max_output_tokens: 1000, stream: true, store: false });
    expect(body).not.toHaveProperty('previous_response_id');
    expect(body['input']).toEqual([
      { role: 'user', content: 'Fix the failing test.' },
      { role: 'assistant', content: 'Reading it.' },
      { type: 'function_call', call_id: 'call_1', name: 'read_file', arguments: '{"path":"a.ts"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'export const a = 1;' },
    ]);
    expect((body['tools'] as unknown[])[0]).toEqual({
      type: 'function',
      name: 'read_file',
      description: 'Read a file',
      parameters: REQUEST.tools[0]!.parameters,
      strict: false,
    });
    expect(Object.keys((body['tools'] as Array<Record<string, unknown>>)[1]!)).toEqual(['type', 'name', 'description', 'parameters', 'strict']);
  });

  it('omits tools and the output cap when there are none; a calls-only turn is just its calls', () => {
    const bare = prepareOpenAIResponses({
      ...REQUEST,
      tools: [],
      maxOutputTokens: null,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, toolCalls: [{ id: 'c', name: 'f', arguments: '{}' }] },
        { role: 'tool', callId: 'c', name: 'f', content: 'ok' },
        { role: 'assistant', content: null, toolCalls: [] },
      ],
    });
    const body = JSON.parse(bare.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['model', 'instructions', 'input', 'stream', 'store']);
    expect(body['input']).toEqual([
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c', output: 'ok' },
      { role: 'assistant', content: '' },
    ]);
  });
});

describe('openai-responses: streaming against the fake server', () => {
  it('sends the prepared bytes exactly, and assembles text and parallel function calls from many chunks', async () => {
    const args0 = JSON.stringify({ path: 'src/very/long/path/to/a/file.ts' });
    const args1 = JSON.stringify({ query: 'function handleRequest', glob: '**/*.ts' });
    const { fake, model } = await serve([
      {
        content: 'Reading two files.',
        toolCalls: [
          { id: 'call_x', name: 'read_file', arguments: args0 },
          { id: 'call_y', name: 'search', arguments: args1 },
        ],
        chunkChars: 3,
        usage: { prompt_tokens: 120, completion_tokens: 33 },
      },
    ]);
    const { events, output, error } = await drain(model);
    expect(error).toBeNull();
    expect(fake.requests[0]!.path).toBe('/v1/responses');
    expect(fake.requests[0]!.rawBody).toBe(model.prepare(REQUEST).body);
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(output).toEqual({
      content: 'Reading two files.',
      toolCalls: [
        { id: 'call_x', name: 'read_file', arguments: args0 },
        { id: 'call_y', name: 'search', arguments: args1 },
      ],
      finishReason: 'tool_calls',
      usage: { inputTokens: 120, outputTokens: 33, estimated: false },
    });
    const text = events.flatMap((e) => (e.type === 'text_delta' ? [e.text] : []));
    expect(text.length).toBeGreaterThan(3);
    expect(text.join('')).toBe('Reading two files.');
    const calls = events.flatMap((e) => (e.type === 'tool_call_delta' ? [e] : []));
    expect(calls.length).toBeGreaterThan(20);
    // Keyed by call order, not output index (the message is output 0).
    expect(calls.filter((c) => c.id !== undefined).map((c) => [c.index, c.id, c.name])).toEqual([
      [0, 'call_x', 'read_file'],
      [1, 'call_y', 'search'],
    ]);
    expect(calls.filter((c) => c.index === 0).map((c) => c.argumentsDelta).join('')).toBe(args0);
    expect(calls.filter((c) => c.index === 1).map((c) => c.argumentsDelta).join('')).toBe(args1);
  });

  it('puts the prepared bytes on the wire verbatim, even ones a parse and stringify would change', async () => {
    const { fake, model } = await serve([{ content: 'ok' }]);
    await expectVerbatimWire(model, fake, REQUEST);
  });

  it('estimates usage when the server sends none', async () => {
    const { model } = await serve([{ content: 'twelve chars', usage: null }]);
    const { output } = await drain(model);
    expect(output).toEqual({
      content: 'twelve chars',
      toolCalls: [],
      finishReason: 'stop',
      usage: estimateUsage(REQUEST, 'twelve chars', []),
    });
  });

  it('maps response.incomplete to length and content_filter', async () => {
    const { model } = await serve([
      { content: 'cut', finishReason: 'length' },
      { content: '', finishReason: 'content_filter' },
    ]);
    expect((await drain(model)).output).toMatchObject({ content: 'cut', finishReason: 'length' });
    expect((await drain(model)).output).toMatchObject({ content: null, finishReason: 'content_filter' });
  });

  it('a second step sends the first step input unchanged, then appends to it', async () => {
    const { fake, model } = await serve([{ toolCalls: [{ id: 'call_r', name: 'read_file', arguments: '{"path":"b.ts"}' }] }, { content: 'Fixed.' }]);
    const step1 = await drain(model);
    const calls = step1.output!.toolCalls;
    const next: ModelRequest = {
      ...REQUEST,
      messages: [
        ...REQUEST.messages,
        { role: 'assistant', content: step1.output!.content, toolCalls: calls },
        { role: 'tool', callId: 'call_r', name: 'read_file', content: 'export const b = 2;' },
      ],
    };
    const step2 = await drain(model, next);
    expect(step2.output!.content).toBe('Fixed.');
    const [first, second] = fake.requests.map((r) => r.body as { input: unknown[] });
    expect(second!.input.slice(0, first!.input.length)).toEqual(first!.input);
    expect(second!.input.slice(first!.input.length)).toEqual([
      { type: 'function_call', call_id: 'call_r', name: 'read_file', arguments: '{"path":"b.ts"}' },
      { type: 'function_call_output', call_id: 'call_r', output: 'export const b = 2;' },
    ]);
    // Byte for byte: everything up to the end of the first input is a shared prefix, for prompt caching.
    const raw1 = fake.requests[0]!.rawBody;
    const prefix = raw1.slice(0, raw1.indexOf(',"max_output_tokens"') - 1);
    expect(fake.requests[1]!.rawBody.startsWith(prefix)).toBe(true);
  });
});

describe('openai-responses: failures', () => {
  it('429 with Retry-After seconds is a retryable rate_limit waiting that long', async () => {
    const { info } = await failure({ fault: FAULTS.rateLimited({ retryAfter: '2' }) });
    expect(info).toMatchObject({ class: 'rate_limit', retryable: true, retryAfterMs: 2000 });
    expect(info.message).toMatch(/^openai-responses 429: Rate limit reached/);
  });

  it('500 is server, 503 is overloaded, both retryable', async () => {
    expect((await failure({ fault: FAULTS.serverError() })).info).toMatchObject({ class: 'server', retryable: true, retryAfterMs: null });
    expect((await failure({ fault: FAULTS.overloaded() })).info).toMatchObject({ class: 'overloaded', retryable: true });
  });

  it('400 context_length_exceeded is context_overflow, not retryable', async () => {
    const { info } = await failure({ fault: FAULTS.contextLengthExceeded() });
    expect(info).toMatchObject({ class: 'context_overflow', retryable: false });
    expect(info.message).toContain('maximum context length');
  });

  it('401 is auth and the key it echoes never reaches the message', async () => {
    const { info, error } = await failure({ fault: FAULTS.unauthorized() });
    expect(info).toMatchObject({ class: 'auth', retryable: false });
    expect(info.message).toContain('Incorrect API key provided: ***');
    expect(error.cause).toBeUndefined();
  });

  it('a stream dropped mid-way is a retryable network error', async () => {
    const { info } = await failure({ content: 'a long answer, cut short', chunkChars: 2, fault: { kind: 'drop-mid-stream', afterChunks: 6 } });
    expect(info).toMatchObject({ class: 'network', retryable: true });
    expect(info.message).toMatch(/^openai-responses stream broke: /);
  });

  it('a malformed chunk is a retryable network error', async () => {
    const { info } = await failure({ content: 'abcdefghij', chunkChars: 2, fault: { kind: 'malformed-chunk', afterChunks: 5 } });
    expect(info).toMatchObject({ class: 'network', retryable: true });
  });

  it('an abort during a slow first byte is cancelled, quickly', async () => {
    const { model } = await serve([{ content: 'late', fault: { kind: 'slow-first-byte', delayMs: 10_000 } }]);
    const ctrl = new AbortController();
    const started = Date.now();
    setTimeout(() => ctrl.abort(new Error('user interrupt')), 50);
    const { error } = await drain(model, REQUEST, ctrl.signal);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(error).toBeInstanceOf(ModelError);
    expect(model.classifyError(error)).toMatchObject({ class: 'cancelled', retryable: false, message: 'openai-responses request was cancelled' });
  });

  it('an abort in the middle of the body is cancelled, not a truncated answer', async () => {
    const { model } = await serve([{ content: 'x'.repeat(50), chunkChars: 1 }]);
    const ctrl = new AbortController();
    const events: ModelStreamEvent[] = [];
    let error: unknown = null;
    try {
      for await (const ev of model.stream(model.prepare(REQUEST), ctrl.signal)) {
        events.push(ev);
        if (events.length === 3) ctrl.abort();
      }
    } catch (err) {
      error = err;
    }
    expect(events.some((e) => e.type === 'done')).toBe(false);
    expect(model.classifyError(error).class).toBe('cancelled');
  });

  it('a timeout before the first byte is a retryable network error', async () => {
    const { model } = await serve([{ content: 'late', fault: { kind: 'slow-first-byte', delayMs: 5_000 } }], 100);
    const { error } = await drain(model);
    expect(model.classifyError(error)).toMatchObject({
      class: 'network',
      retryable: true,
      message: 'openai-responses request timed out after 100ms before the response began',
    });
  });

  it('a refused connection is a retryable network error', async () => {
    const fake = await startFakeOpenAI({ turns: [] });
    const baseURL = fake.baseURL;
    await fake.close();
    const model = createOpenAIResponsesModel({ apiKey: API_KEY, baseURL, model: 'test-model' });
    const { error } = await drain(model);
    expect(model.classifyError(error)).toMatchObject({ class: 'network', retryable: true });
  });
});

/** A bare server for the shapes the fake does not script. */
async function rawServer(frames: Array<Record<string, unknown>>): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      frames.forEach((f, i) => res.write(`event: ${f['type'] as string}\ndata: ${JSON.stringify({ ...f, sequence_number: i })}\n\n`));
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

const response = (fields: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: 'resp_1',
  object: 'response',
  status: 'completed',
  error: null,
  incomplete_details: null,
  output: [],
  usage: null,
  ...fields,
});
const created = { type: 'response.created', response: response({ status: 'in_progress' }) };

async function rawDrain(frames: Array<Record<string, unknown>>): Promise<Drained & { model: ModelAdapter }> {
  const model = createOpenAIResponsesModel({ apiKey: API_KEY, baseURL: await rawServer(frames), model: 'm' });
  return { model, ...(await drain(model)) };
}

describe('openai-responses: streams that end oddly', () => {
  it('gives calls without a call_id a stable one, the same for two identical requests', async () => {
    const frames = [
      created,
      { type: 'response.output_item.added', output_index: 0, item: { type: 'function_call', id: 'fc_0', name: 'read_file', arguments: '' } },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: 'fc_0', delta: '{"path"' },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: 'fc_0', delta: ':"a"}' },
      { type: 'response.output_item.added', output_index: 1, item: { type: 'function_call', id: 'fc_1', name: 'search', arguments: '' } },
      { type: 'response.function_call_arguments.delta', output_index: 1, item_id: 'fc_1', delta: '{}' },
      { type: 'response.completed', response: response({ usage: { input_tokens: 10, output_tokens: 4 } }) },
    ];
    const first = await rawDrain(frames);
    const second = await rawDrain(frames);
    const hex = first.model.prepare(REQUEST).digest.slice('sha256:'.length, 'sha256:'.length + 12);
    expect(first.output).toEqual({
      content: null,
      toolCalls: [
        { id: `call_${hex}_0`, name: 'read_file', arguments: '{"path":"a"}' },
        { id: `call_${hex}_1`, name: 'search', arguments: '{}' },
      ],
      finishReason: 'tool_calls',
      usage: { inputTokens: 10, outputTokens: 4, estimated: false },
    });
    expect(second.output).toEqual(first.output);
    expect(first.events.flatMap((e) => (e.type === 'tool_call_delta' && e.id ? [e.id] : []))).toEqual([`call_${hex}_0`, `call_${hex}_1`]);
  });

  it('takes output from the final response when no deltas came', async () => {
    const { output, events } = await rawDrain([
      created,
      {
        type: 'response.completed',
        response: response({
          output: [
            { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'whole' }] },
            { type: 'function_call', call_id: 'call_z', name: 'f', arguments: '{"a":1}' },
          ],
        }),
      },
    ]);
    expect(output).toMatchObject({ content: 'whole', toolCalls: [{ id: 'call_z', name: 'f', arguments: '{"a":1}' }], finishReason: 'tool_calls' });
    expect(events).toEqual([
      { type: 'text_delta', text: 'whole' },
      { type: 'tool_call_delta', index: 0, id: 'call_z', name: 'f', argumentsDelta: '' },
      { type: 'tool_call_delta', index: 0, argumentsDelta: '{"a":1}' },
    ]);
  });

  it('a refusal part ends as refusal, its text the content', async () => {
    const { output } = await rawDrain([
      created,
      { type: 'response.refusal.delta', output_index: 0, item_id: 'msg', content_index: 0, delta: "I can't help " },
      { type: 'response.refusal.delta', output_index: 0, item_id: 'msg', content_index: 0, delta: 'with that.' },
      { type: 'response.completed', response: response() },
    ]);
    expect(output).toMatchObject({ content: "I can't help with that.", finishReason: 'refusal', toolCalls: [], usage: { estimated: true } });
  });

  it('a stream that ends before response.completed is a retryable network error', async () => {
    const { output, error, model, events } = await rawDrain([created, { type: 'response.output_text.delta', output_index: 0, item_id: 'm', content_index: 0, delta: 'half' }]);
    expect(events).toEqual([{ type: 'text_delta', text: 'half' }]);
    expect(output).toBeNull();
    expect(model.classifyError(error)).toMatchObject({ class: 'network', retryable: true });
  });

  it('response.failed is classified from its error', async () => {
    const failed = (code: string, message: string): Array<Record<string, unknown>> => [
      created,
      { type: 'response.failed', response: response({ status: 'failed', error: { code, message } }) },
    ];
    const server = await rawDrain(failed('server_error', 'The server had an error.'));
    expect(server.model.classifyError(server.error)).toMatchObject({ class: 'server', retryable: true, message: 'openai-responses stream error: The server had an error.' });
    const limited = await rawDrain(failed('rate_limit_exceeded', 'Slow down.'));
    expect(limited.model.classifyError(limited.error)).toMatchObject({ class: 'rate_limit', retryable: true });
    const invalid = await rawDrain(failed('invalid_prompt', 'Bad prompt.'));
    expect(invalid.model.classifyError(invalid.error)).toMatchObject({ class: 'invalid_request', retryable: false });
    expect(invalid.output).toBeNull();
  });

  it('an error event inside the stream is classified by its code', async () => {
    const { error, model } = await rawDrain([created, { type: 'error', code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model.', param: null }]);
    expect(error).toBeInstanceOf(ModelError);
    expect(model.classifyError(error)).toMatchObject({ class: 'context_overflow', retryable: false });
  });
});

describe('openai-responses: capabilities', () => {
  it('uses the OpenAI table and takes overrides', () => {
    const model = createOpenAIResponsesModel({ apiKey: 'k', model: 'gpt-4o', capabilities: { contextWindow: 8192 } });
    expect(model.provider).toBe('openai-responses');
    expect(model.capabilities('gpt-4o-2024-08-06')).toMatchObject({ contextWindow: 8192, maxOutputTokens: 16_384, vision: true });
    expect(model.capabilities('llama3.1:8b')).toMatchObject({ contextWindow: 8192, parallelToolCalls: false });
  });
});
