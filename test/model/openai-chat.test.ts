import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { APIError } from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import {
  classifyOpenAIError,
  createOpenAIChatModel,
  normalizeFinishReason,
  openAIModelCapabilities,
  prepareOpenAIChat,
} from '../../src/model/openai-chat.js';
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
  const model = createOpenAIChatModel({ apiKey: API_KEY, baseURL: fake.baseURL, model: 'test-model', ...(timeoutMs ? { timeoutMs } : {}) });
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
    { role: 'assistant', content: null, toolCalls: [{ id: 'call_1', name: 'read_file', arguments: '{"path":"a.ts"}' }] },
    { role: 'tool', callId: 'call_1', name: 'read_file', content: 'export const a = 1;' },
  ],
  maxOutputTokens: 1000,
};

function drain(model: ModelAdapter, request: ModelRequest = REQUEST, signal: AbortSignal = new AbortController().signal): Promise<Drained> {
  return drainModel(model, request, signal);
}

async function failure(turn: FakeTurn): Promise<{ error: ModelError; info: ReturnType<ModelAdapter['classifyError']> }> {
  const { model } = await serve([turn]);
  const { error } = await drain(model);
  expect(error).toBeInstanceOf(ModelError);
  const info = model.classifyError(error);
  expect((error as ModelError).code).toBe(info.class);
  expect(info.message).not.toContain(API_KEY);
  expect((error as ModelError).message).not.toContain(API_KEY);
  expect(info.message).not.toMatch(/\n/);
  return { error: error as ModelError, info };
}

describe('openai-chat: prepare', () => {
  it('builds the Chat Completions body in a fixed order, deterministically', () => {
    const a = prepareOpenAIChat(REQUEST);
    const b = prepareOpenAIChat(structuredClone(REQUEST));
    expect(a.body).toBe(b.body);
    expect(a.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(a.digest).toBe(b.digest);
    const body = JSON.parse(a.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['model', 'tools', 'messages', 'max_completion_tokens', 'stream', 'stream_options']);
    expect(body['messages']).toEqual([
      { role: 'system', content: 'You are a careful coding agent.' },
      { role: 'user', content: 'Fix the failing test.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'export const a = 1;' },
    ]);
    expect((body['tools'] as unknown[])[0]).toEqual({
      type: 'function',
      function: { name: 'read_file', description: 'Read a file', parameters: REQUEST.tools[0]!.parameters },
    });
    expect(body['stream_options']).toEqual({ include_usage: true });
  });

  it('omits tools and the output cap when there are none, and a later step only appends messages', () => {
    const first = JSON.parse(prepareOpenAIChat({ ...REQUEST, tools: [], maxOutputTokens: null }).body) as Record<string, unknown>;
    expect(Object.keys(first)).toEqual(['model', 'messages', 'stream', 'stream_options']);
    const step1 = JSON.parse(prepareOpenAIChat(REQUEST).body) as { messages: unknown[] };
    const step2 = JSON.parse(
      prepareOpenAIChat({ ...REQUEST, messages: [...REQUEST.messages, { role: 'assistant', content: 'Done.', toolCalls: [] }] }).body,
    ) as { messages: unknown[] };
    expect(step2.messages.slice(0, step1.messages.length)).toEqual(step1.messages);
    expect(step2.messages.at(-1)).toEqual({ role: 'assistant', content: 'Done.' });
  });
});

describe('openai-chat: streaming against the fake server', () => {
  it('sends the prepared bytes exactly, and assembles text and parallel tool calls from many chunks', async () => {
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
    expect(calls.filter((c) => c.id !== undefined).map((c) => [c.index, c.id, c.name])).toEqual([
      [0, 'call_x', 'read_file'],
      [1, 'call_y', 'search'],
    ]);
    expect(calls.filter((c) => c.index === 1).map((c) => c.argumentsDelta).join('')).toBe(args1);
  });

  it('puts the prepared bytes on the wire verbatim, even ones a parse and stringify would change', async () => {
    const { fake, model } = await serve([{ content: 'ok' }]);
    await expectVerbatimWire(model, fake, REQUEST);
  });

  it('gives calls without an id a stable one, the same for two identical requests', async () => {
    const turn: FakeTurn = { toolCalls: [{ id: null, name: 'read_file', arguments: '{"path":"a"}' }, { id: null, name: 'search', arguments: '{}' }] };
    const { model } = await serve([turn, turn]);
    const first = await drain(model);
    const second = await drain(model);
    const hex = model.prepare(REQUEST).digest.slice('sha256:'.length, 'sha256:'.length + 12);
    expect(first.output!.toolCalls.map((c) => c.id)).toEqual([`call_${hex}_0`, `call_${hex}_1`]);
    expect(second.output!.toolCalls).toEqual(first.output!.toolCalls);
    const deltaIds = first.events.flatMap((e) => (e.type === 'tool_call_delta' && e.id ? [e.id] : []));
    expect(deltaIds).toEqual([`call_${hex}_0`, `call_${hex}_1`]);
    expect(first.output!.content).toBeNull();
  });

  it('estimates usage when the server sends none', async () => {
    const { model } = await serve([{ content: 'twelve chars', usage: null }]);
    const { output } = await drain(model);
    expect(output!.usage).toEqual(estimateUsage(REQUEST, 'twelve chars', []));
    expect(output!.usage.estimated).toBe(true);
    expect(output!.usage.inputTokens).toBeGreaterThan(0);
    expect(output!.finishReason).toBe('stop');
  });

  it('tolerates an empty-choices chunk and a role-only first chunk', async () => {
    const { model } = await serve([
      { content: 'first', fault: { kind: 'empty-choices-chunk' } },
      { content: 'second', fault: { kind: 'role-only-first-chunk' } },
    ]);
    expect((await drain(model)).output).toMatchObject({ content: 'first', finishReason: 'stop' });
    expect((await drain(model)).output).toMatchObject({ content: 'second', finishReason: 'stop' });
  });

  it('passes arguments that are not valid JSON through raw', async () => {
    const { model } = await serve([{ toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path": "a.ts",' }], chunkChars: 4 }]);
    const { output } = await drain(model);
    expect(output!.toolCalls).toEqual([{ id: 'c1', name: 'read_file', arguments: '{"path": "a.ts",' }]);
    expect(output!.finishReason).toBe('tool_calls');
  });

  it('keeps length and content_filter, and maps function_call to tool_calls', async () => {
    const { model } = await serve([
      { content: 'cut', finishReason: 'length' },
      { content: '', finishReason: 'content_filter' },
      { toolCalls: [{ name: 'f', arguments: '{}' }], finishReason: 'function_call' },
    ]);
    expect((await drain(model)).output!.finishReason).toBe('length');
    expect((await drain(model)).output!.finishReason).toBe('content_filter');
    expect((await drain(model)).output!.finishReason).toBe('tool_calls');
  });
});

describe('openai-chat: failures', () => {
  it('429 with Retry-After seconds is a retryable rate_limit waiting that long', async () => {
    const { info } = await failure({ fault: FAULTS.rateLimited({ retryAfter: '2' }) });
    expect(info).toMatchObject({ class: 'rate_limit', retryable: true, retryAfterMs: 2000 });
    expect(info.message).toMatch(/^openai-chat 429: Rate limit reached/);
  });

  it('429 with retry-after-ms prefers it', async () => {
    const { info, error } = await failure({ fault: FAULTS.rateLimited({ retryAfter: '2', retryAfterMs: 150 }) });
    expect(info).toMatchObject({ class: 'rate_limit', retryable: true, retryAfterMs: 150 });
    expect(error.retryable).toBe(true);
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

  it('other 4xx are invalid_request', async () => {
    const { info } = await failure({ fault: { kind: 'status', status: 404, body: { error: { message: 'The model `nope` does not exist', type: 'invalid_request_error', code: 'model_not_found' } } } });
    expect(info).toMatchObject({ class: 'invalid_request', retryable: false });
    expect(info.message).toBe('openai-chat 404: The model `nope` does not exist');
  });

  it('a stream dropped mid-way is a retryable network error', async () => {
    const { info } = await failure({ content: 'a long answer, cut short', chunkChars: 2, fault: { kind: 'drop-mid-stream', afterChunks: 4 } });
    expect(info).toMatchObject({ class: 'network', retryable: true });
    expect(info.message).toMatch(/^openai-chat stream broke: /);
  });

  it('a malformed chunk is a retryable network error', async () => {
    // network, not server: the provider answered 200 and the frame broke in transit; a fresh stream may be fine.
    const { info } = await failure({ content: 'abcdefghij', chunkChars: 2, fault: { kind: 'malformed-chunk', afterChunks: 3 } });
    expect(info).toMatchObject({ class: 'network', retryable: true });
    expect(info.message).toContain('stream broke');
  });

  it('an abort during a slow first byte is cancelled, quickly', async () => {
    const { model } = await serve([{ content: 'late', fault: { kind: 'slow-first-byte', delayMs: 10_000 } }]);
    const ctrl = new AbortController();
    const started = Date.now();
    setTimeout(() => ctrl.abort(new Error('user interrupt')), 50);
    const { error } = await drain(model, REQUEST, ctrl.signal);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(error).toBeInstanceOf(ModelError);
    expect(model.classifyError(error)).toMatchObject({ class: 'cancelled', retryable: false });
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
    expect(model.classifyError(error)).toMatchObject({ class: 'network', retryable: true });
    expect(model.classifyError(error).message).toBe('openai-chat request timed out after 100ms before the response began');
  });

  it('a refused connection is a retryable network error', async () => {
    const fake = await startFakeOpenAI({ turns: [] });
    const baseURL = fake.baseURL;
    await fake.close();
    const model = createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'test-model' });
    const { error } = await drain(model);
    expect(model.classifyError(error)).toMatchObject({ class: 'network', retryable: true });
  });
});

/** A bare server for the shapes the fake does not script: streams that end oddly. */
async function rawServer(frames: string[]): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const f of frames) res.write(f);
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

const frame = (delta: Record<string, unknown>, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

describe('openai-chat: streams that end oddly', () => {
  it('accepts a stream that ends without [DONE] after a finish reason', async () => {
    const baseURL = await rawServer([frame({ role: 'assistant' }), frame({ content: 'ok' }), frame({}, 'stop')]);
    const model = createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'm' });
    const { output, error } = await drain(model);
    expect(error).toBeNull();
    expect(output).toMatchObject({ content: 'ok', finishReason: 'stop', usage: { estimated: true } });
  });

  it('a stream that ends with no finish reason is a retryable network error', async () => {
    const baseURL = await rawServer([frame({ role: 'assistant' }), frame({ content: 'half an ans' }), 'data: [DONE]\n\n']);
    const model = createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'm' });
    const { output, error } = await drain(model);
    expect(output).toBeNull();
    expect(model.classifyError(error)).toMatchObject({ class: 'network', retryable: true });
  });

  it('tolerates tool-call deltas without index and names repeated in every delta', async () => {
    const tc = (fields: Record<string, unknown>): Record<string, unknown> => ({ tool_calls: [fields] });
    const baseURL = await rawServer([
      frame({ role: 'assistant' }),
      frame(tc({ id: 'a', type: 'function', function: { name: 'read_file', arguments: '{"pa' } })),
      frame(tc({ function: { name: 'read_file', arguments: 'th":1}' } })),
      frame(tc({ id: 'b', type: 'function', function: { name: 'search', arguments: '{}' } })),
      frame({}, 'tool_calls'),
      'data: [DONE]\n\n',
    ]);
    const { output } = await drain(createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'm' }));
    expect(output!.toolCalls).toEqual([
      { id: 'a', name: 'read_file', arguments: '{"path":1}' },
      { id: 'b', name: 'search', arguments: '{}' },
    ]);
  });

  it('a refusal with no content ends as refusal, its text the content', async () => {
    const baseURL = await rawServer([frame({ role: 'assistant', content: '' }), frame({ refusal: "I can't help with that." }), frame({}, 'stop')]);
    const { output } = await drain(createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'm' }));
    expect(output).toMatchObject({ content: "I can't help with that.", finishReason: 'refusal', toolCalls: [] });
  });

  it('an error event inside the stream is classified by its type', async () => {
    const baseURL = await rawServer([frame({ role: 'assistant' }), `data: ${JSON.stringify({ error: { message: 'Overloaded', type: 'overloaded_error' } })}\n\n`]);
    const model = createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: 'm' });
    const { error } = await drain(model);
    expect(model.classifyError(error)).toMatchObject({ class: 'overloaded', retryable: true, message: 'openai-chat stream error: Overloaded' });
  });

  it('an unknown finish reason becomes stop with text, tool_calls with calls', () => {
    expect(normalizeFinishReason('eos', false)).toBe('stop');
    expect(normalizeFinishReason(null, true)).toBe('tool_calls');
    expect(normalizeFinishReason('stop', true)).toBe('tool_calls');
  });
});

describe('openai-chat: classifyError and capabilities', () => {
  it('reads Retry-After as an HTTP date, and overloaded from the error type', () => {
    const at = new Date(Date.now() + 30_000).toUTCString();
    const rl = classifyOpenAIError(APIError.generate(429, { error: { message: 'slow down' } }, undefined, new Headers({ 'retry-after': at })));
    expect(rl.class).toBe('rate_limit');
    expect(rl.retryAfterMs).toBeGreaterThan(25_000);
    expect(rl.retryAfterMs).toBeLessThanOrEqual(30_000);
    const over = classifyOpenAIError(new APIError(undefined, { type: 'overloaded_error', message: 'Overloaded' }, undefined, undefined));
    expect(over).toMatchObject({ class: 'overloaded', retryable: true });
    const ctx = classifyOpenAIError(APIError.generate(400, { error: { message: "This model's maximum context length is 4096 tokens" } }, undefined, new Headers()));
    expect(ctx.class).toBe('context_overflow');
    expect(classifyOpenAIError(APIError.generate(403, { error: { message: 'no' } }, undefined, new Headers())).class).toBe('auth');
  });

  it('masks the key wherever it appears', () => {
    const info = classifyOpenAIError(new Error(`boom ${API_KEY}\nsecond line`), [API_KEY]);
    expect(info.message).toBe('openai-chat failed: boom *** second line');
  });

  it('knows common OpenAI models, dated snapshots included, and takes overrides', () => {
    expect(openAIModelCapabilities('gpt-4o-2024-08-06')).toMatchObject({ contextWindow: 128_000, maxOutputTokens: 16_384, vision: true });
    expect(openAIModelCapabilities('gpt-4.1-mini-2025-04-14').contextWindow).toBe(1_047_576);
    expect(openAIModelCapabilities('o4-mini').maxOutputTokens).toBe(100_000);
    expect(openAIModelCapabilities('llama3.1:8b')).toEqual({
      contextWindow: null,
      maxOutputTokens: null,
      parallelToolCalls: false,
      structuredOutput: false,
      vision: false,
    });
    const model = createOpenAIChatModel({ apiKey: 'k', model: 'local', capabilities: { contextWindow: 8192, parallelToolCalls: true } });
    expect(model.capabilities('local')).toMatchObject({ contextWindow: 8192, parallelToolCalls: true, vision: false });
    expect(model.provider).toBe('openai-chat');
  });
});
