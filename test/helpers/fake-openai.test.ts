import OpenAI, { APIConnectionError, APIError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterAll, describe, expect, it } from 'vitest';
import { FAULTS, startFakeOpenAI, type FakeOpenAI, type FakeTurn } from './fake-openai.js';

const servers: FakeOpenAI[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function serve(turns: FakeTurn[], models?: string[]): Promise<{ fake: FakeOpenAI; client: OpenAI }> {
  const fake = await startFakeOpenAI(models ? { turns, models } : { turns });
  servers.push(fake);
  // logLevel off: the SDK logs unparsable chunks to the console before it throws.
  return { fake, client: new OpenAI({ apiKey: 'test', baseURL: fake.baseURL, maxRetries: 0, logLevel: 'off' }) };
}

async function streamChat(client: OpenAI, includeUsage = true): Promise<ChatCompletionChunk[]> {
  const stream = await client.chat.completions.create({
    model: 'test-model',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
  });
  const chunks: ChatCompletionChunk[] = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

/** Reassembles text and tool calls from chunks the way a careful client does. */
function reassemble(chunks: ChatCompletionChunk[]): { content: string; calls: Array<{ id?: string; name: string; arguments: string }>; finish: string | null } {
  let content = '';
  let finish: string | null = null;
  const calls: Array<{ id?: string; name: string; arguments: string }> = [];
  for (const c of chunks) {
    const choice = c.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? '';
    for (const tc of choice.delta.tool_calls ?? []) {
      const call = (calls[tc.index] ??= { name: '', arguments: '' });
      if (tc.id) call.id = tc.id;
      if (tc.function?.name) call.name = tc.function.name;
      call.arguments += tc.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  return { content, calls, finish };
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('fake OpenAI server: chat completions', () => {
  it('streams text and two parallel tool calls that reassemble exactly', async () => {
    const args0 = JSON.stringify({ path: 'src/a.ts', encoding: 'utf8' });
    const args1 = JSON.stringify({ query: 'needle', maxResults: 20 });
    const { fake, client } = await serve([
      {
        content: 'Looking at two things.',
        toolCalls: [
          { id: 'call_a', name: 'read_file', arguments: args0 },
          { id: 'call_b', name: 'search', arguments: args1 },
        ],
        chunkChars: 5,
        usage: { prompt_tokens: 11, completion_tokens: 7 },
      },
    ]);
    const chunks = await streamChat(client);
    expect(chunks[0]!.object).toBe('chat.completion.chunk');
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const { content, calls, finish } = reassemble(chunks);
    expect(content).toBe('Looking at two things.');
    expect(calls).toEqual([
      { id: 'call_a', name: 'read_file', arguments: args0 },
      { id: 'call_b', name: 'search', arguments: args1 },
    ]);
    expect(finish).toBe('tool_calls');
    // Arguments really are spread over many deltas, interleaved by index.
    const argDeltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []).filter((t) => !t.id);
    expect(argDeltas.length).toBeGreaterThan(10);
    expect(argDeltas.slice(0, 2).map((t) => t.index)).toEqual([0, 1]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });

    const req = fake.requests[0]!;
    expect(req).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    expect(req.body).toMatchObject({ model: 'test-model', stream: true });
    expect(JSON.parse(req.rawBody)).toEqual(req.body);
    expect(req.headers.authorization).toBe('Bearer test');
  });

  it('sends a usage chunk only when asked and when the turn has usage', async () => {
    const { client } = await serve([{ content: 'a' }, { content: 'b', usage: null }, { content: 'c' }]);
    expect((await streamChat(client)).at(-1)!.usage).toBeTruthy();
    expect((await streamChat(client)).some((c) => c.usage)).toBe(false);
    expect((await streamChat(client, false)).some((c) => c.usage)).toBe(false);
  });

  it('omits tool-call ids when told to, and can send empty-choices and role-only first chunks', async () => {
    const { client } = await serve([
      { toolCalls: [{ id: null, name: 'x', arguments: '{}' }], fault: { kind: 'empty-choices-chunk' } },
      { content: 'hello', fault: { kind: 'role-only-first-chunk' } },
    ]);
    const a = await streamChat(client);
    expect(a[0]!.choices).toEqual([]);
    expect(reassemble(a).calls).toEqual([{ name: 'x', arguments: '{}' }]);
    const b = await streamChat(client);
    expect(b[0]!.choices[0]!.delta).toEqual({ role: 'assistant' });
    expect(reassemble(b).content).toBe('hello');
  });

  it('answers non-streamed requests with a chat.completion', async () => {
    const { client } = await serve([{ content: 'done', toolCalls: [{ name: 'f', arguments: '{"a":1}' }] }]);
    const res = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe('m');
    expect(res.choices[0]!.message.content).toBe('done');
    expect(res.choices[0]!.message.tool_calls).toEqual([{ id: 'call_fake0_0', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }]);
    expect(res.usage?.total_tokens).toBeGreaterThan(0);
  });

  it('turns each status fault into the matching SDK error with its headers', async () => {
    const { client } = await serve([
      { fault: FAULTS.rateLimited({ retryAfter: '2', retryAfterMs: 150 }) },
      { fault: FAULTS.serverError() },
      { fault: FAULTS.overloaded() },
      { fault: FAULTS.contextLengthExceeded() },
      { fault: FAULTS.unauthorized() },
    ]);
    const rl = (await caught(streamChat(client))) as APIError;
    expect(rl).toBeInstanceOf(OpenAI.RateLimitError);
    expect(rl.status).toBe(429);
    expect(rl.headers?.get('retry-after')).toBe('2');
    expect(rl.headers?.get('retry-after-ms')).toBe('150');
    expect(((await caught(streamChat(client))) as APIError).status).toBe(500);
    expect(((await caught(streamChat(client))) as APIError).status).toBe(503);
    const ctx = (await caught(streamChat(client))) as APIError;
    expect(ctx).toBeInstanceOf(OpenAI.BadRequestError);
    expect(ctx.code).toBe('context_length_exceeded');
    const auth = (await caught(streamChat(client))) as APIError;
    expect(auth).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(auth.message).toContain('Incorrect API key provided: test.');
  });

  it('replies 500 saying so when the turns run out', async () => {
    const { client } = await serve([]);
    const err = (await caught(streamChat(client))) as APIError;
    expect(err.status).toBe(500);
    expect(err.code).toBe('fake_turns_exhausted');
    expect(err.message).toContain('no scripted turn left');
  });

  it('a stream dropped mid-way errors on the client', async () => {
    const { client } = await serve([{ content: 'a long answer that is cut', chunkChars: 2, fault: { kind: 'drop-mid-stream', afterChunks: 3 } }]);
    const got: ChatCompletionChunk[] = [];
    const err = await caught(
      (async () => {
        const stream = await client.chat.completions.create({ model: 'm', messages: [], stream: true });
        for await (const c of stream) got.push(c);
      })(),
    );
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(APIError);
    expect(got).toHaveLength(3);
  });

  it('a malformed chunk fails JSON parsing on the client', async () => {
    const { client } = await serve([{ content: 'abcdefgh', chunkChars: 2, fault: { kind: 'malformed-chunk', afterChunks: 2 } }]);
    expect(await caught(streamChat(client))).toBeInstanceOf(SyntaxError);
  });

  it('a slow first byte delays the response and lets the client time out', async () => {
    const { client } = await serve([
      { content: 'late', fault: { kind: 'slow-first-byte', delayMs: 150 } },
      { content: 'too late', fault: { kind: 'slow-first-byte', delayMs: 5_000 } },
    ]);
    const started = Date.now();
    expect(reassemble(await streamChat(client)).content).toBe('late');
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    const err = await caught(client.chat.completions.create({ model: 'm', messages: [], stream: true }, { timeout: 100 }));
    expect(err).toBeInstanceOf(APIConnectionError);
  });
});

describe('fake OpenAI server: responses and models', () => {
  it('streams Responses API events the SDK parses', async () => {
    const { fake, client } = await serve([
      { content: 'Hi there', toolCalls: [{ id: 'call_r', name: 'read_file', arguments: '{"path":"a.txt"}' }], chunkChars: 3, usage: { prompt_tokens: 9, completion_tokens: 4 } },
    ]);
    const stream = await client.responses.create({ model: 'test-model', input: 'hello', stream: true });
    const types: string[] = [];
    let text = '';
    let args = '';
    let completed: OpenAI.Responses.Response | null = null;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.output_item.added');
    expect(types).toContain('response.function_call_arguments.done');
    expect(types.at(-1)).toBe('response.completed');
    expect(text).toBe('Hi there');
    expect(args).toBe('{"path":"a.txt"}');
    expect(completed!.usage).toMatchObject({ input_tokens: 9, output_tokens: 4 });
    expect(completed!.output[1]).toMatchObject({ type: 'function_call', call_id: 'call_r', name: 'read_file', arguments: '{"path":"a.txt"}' });
    expect(fake.requests[0]!.path).toBe('/v1/responses');
  });

  it('answers non-streamed responses with a response object', async () => {
    const { client } = await serve([{ content: 'plain' }]);
    const res = await client.responses.create({ model: 'test-model', input: 'hello' });
    expect(res.object).toBe('response');
    expect(res.output_text).toBe('plain');
  });

  it('lists the models it was given', async () => {
    const { client } = await serve([], ['gpt-4.1', 'local-llama']);
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(['gpt-4.1', 'local-llama']);
  });
});
