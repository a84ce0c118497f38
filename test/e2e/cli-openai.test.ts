// `actorloop run --model openai:<model> --base-url <fake server>` through real processes and real
// HTTP: a multi-step tool run, a rate limit retried with the same request, a kill mid-stream then
// resume, and the mistakes a user makes with keys and URLs.
import { writeFile } from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { FAULTS, startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';

const KEY = 'sk-test-0123456789abcdef';
const stack = useCliStack();

async function fake(turns: FakeTurn[]): Promise<FakeOpenAI> {
  const s = await startFakeOpenAI({ turns });
  stack.onClose(() => s.close());
  return s;
}

async function setup(onTestFinished: (fn: () => Promise<void>) => void, extraEnv: Record<string, string> = { OPENAI_API_KEY: KEY }) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir, extraEnv);
  return { ws, cli, common: stack.flags(dataDir) };
}

const READ_THEN_ANSWER: FakeTurn[] = [
  { content: 'Reading the code.', toolCalls: [{ id: 'call_a1', name: 'read_file', arguments: '{"path":"src/slug.js"}' }] },
  { toolCalls: [{ id: null, name: 'list_dir', arguments: '{"path":"test"}' }] },
  { content: 'slugify only replaces the first space.' },
];

type ChatBody = { model: string; tools?: Array<{ function: { name: string } }>; messages: Array<Record<string, unknown>> };

describe('run with openai:<model> against an OpenAI-compatible server', () => {
  test('a multi-step tool run completes; requests carry the tools, the tool results and a growing shared prefix', async ({ onTestFinished }) => {
    const server = await fake(READ_THEN_ANSWER);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'what is wrong with slugify?', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'slugify only replaces the first space.' } });
    expect(events.filter((e) => e.type === 'attempt/end').map((e) => (e as Extract<ActorEvent, { type: 'attempt/end' }>).data.outcome)).toEqual([
      'succeeded', 'succeeded', 'succeeded',
    ]);
    // the key is used on the wire and never written to the log
    expect(r.stdout).not.toContain(KEY);
    const bodies = server.requests.filter((q) => q.path === '/v1/chat/completions');
    expect(bodies).toHaveLength(3);
    expect(bodies.every((q) => q.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    const [b1, b2, b3] = bodies.map((q) => q.body as ChatBody);
    expect(b1!.model).toBe('test-model');
    expect(b1!.tools!.map((t) => t.function.name).sort()).toEqual(['apply_patch', 'artifact_read', 'ask_user', 'cancel_job', 'interrupt_agent', 'job_status', 'list_dir', 'memory', 'read_file', 'search', 'send_message', 'shell', 'spawn_agent', 'start_job', 'start_workflow', 'stop', 'update_plan', 'wait_agents', 'wait_jobs', 'write_file']);
    expect(b1!.messages.map((m) => m.role)).toEqual(['system', 'user']);
    // each request starts with the whole previous one's messages: the provider's prompt cache hits
    expect(b2!.messages.slice(0, b1!.messages.length)).toEqual(b1!.messages);
    expect(b3!.messages.slice(0, b2!.messages.length)).toEqual(b2!.messages);
    const toolMsg = b2!.messages.find((m) => m.role === 'tool')!;
    expect(toolMsg.tool_call_id).toBe('call_a1');
    expect(String(toolMsg.content)).toContain('export function slugify');
    // a call the server sent without an ID got a stable one, used consistently
    const assistant2 = b3!.messages.filter((m) => m.role === 'assistant').at(-1) as { tool_calls: Array<{ id: string }> };
    const tool2 = b3!.messages.at(-1)!;
    expect(tool2.tool_call_id).toBe(assistant2.tool_calls[0]!.id);
    // the recorded prepared request is the body that was sent
    expect(events.filter((e) => e.type === 'request/prepared')).toHaveLength(3);
  });

  test('a 429 is retried after Retry-After with the identical request, and the log shows both attempts', async ({ onTestFinished }) => {
    const server = await fake([{ fault: FAULTS.rateLimited({ retryAfterMs: 120 }) }, { content: 'ok' }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'say ok', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const ends = parseEvents(r.stdout).filter((e): e is Extract<ActorEvent, { type: 'attempt/end' }> => e.type === 'attempt/end');
    expect(ends[0]!.data).toMatchObject({ outcome: 'failed', error: { class: 'rate_limit', retryable: true }, backoffMs: 120 });
    expect(ends[1]!.data.outcome).toBe('succeeded');
    const [first, second] = server.requests.filter((q) => q.path === '/v1/chat/completions');
    expect(second!.rawBody).toBe(first!.rawBody);
  });

  test('killed mid-stream, resumed: the attempt is interrupted, a new one succeeds, and both are settled', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'a long answer streamed in many small pieces', chunkChars: 4 }, { content: 'the answer' }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const crashed = await cli.run(['run', 'answer', '--model', 'openai:test-model', '--base-url', server.baseURL, '--cwd', ws, '--json', '--fault', 'mid:model-stream', ...common]);
    expect(crashed.signal, show(crashed)).toBe('SIGKILL');
    const agentId = lines(crashed.stderr)[0]!;
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expect(resumed.code, show(resumed)).toBe(0);
    const events = parseEvents(resumed.stdout);
    const ends = events.filter((e): e is Extract<ActorEvent, { type: 'attempt/end' }> => e.type === 'attempt/end');
    expect(ends.map((e) => e.data.outcome)).toEqual(['interrupted', 'succeeded']);
    expect(ends[0]!.data.usage.estimated).toBe(true);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'the answer' } });
    const verify = await cli.run(['verify', agentId, ...common]);
    expect(verify.code, show(verify)).toBe(0);
  });

  test('no API key and no base URL: exit 2 naming both fixes', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished, {});
    const r = await cli.run(['run', 'x', '--model', 'openai:gpt-4.1', '--cwd', ws, ...common]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toMatch(/OPENAI_API_KEY/);
    expect(r.stderr).toMatch(/--base-url/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  test('a base URL that is not a URL: exit 2', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'x', '--model', 'openai:m', '--base-url', 'localhost:8000', '--cwd', ws, ...common]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toContain('not an http(s) URL');
  });

  test('a refused connection: retried, then the turn fails with a reason naming it (exit 1)', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'x', '--model', 'openai:m', '--base-url', 'http://127.0.0.1:9/v1', '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(1);
    const events = parseEvents(r.stdout);
    expect(events.filter((e) => e.type === 'attempt/end')).toHaveLength(4);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'failed' } });
    expect((events.at(-1) as Extract<ActorEvent, { type: 'turn/end' }>).data.reason).toMatch(/network/);
  });
});

describe('run with openai-responses:<model>, cost and frozen capabilities', () => {
  test('the Responses API drives the same multi-step tool run, stateless: every request sends the whole input', async ({ onTestFinished }) => {
    const server = await fake(READ_THEN_ANSWER);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'what is wrong?', '--model', 'openai-responses:test-model', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'slugify only replaces the first space.' } });
    const bodies = server.requests.filter((q) => q.path === '/v1/responses').map((q) => q.body as { input: Array<Record<string, unknown>>; previous_response_id?: string; store: boolean });
    expect(bodies).toHaveLength(3);
    for (const b of bodies) {
      expect(b.previous_response_id).toBeUndefined();
      expect(b.store).toBe(false);
    }
    expect(bodies[1]!.input.slice(0, bodies[0]!.input.length)).toEqual(bodies[0]!.input);
    const output = bodies[1]!.input.find((i) => i.type === 'function_call_output')!;
    expect(output.call_id).toBe('call_a1');
    expect(events.find((e) => e.type === 'step/start')).toMatchObject({ data: { provider: 'openai-responses' } });
  });

  test('a priced model records the cost of each attempt and of the turn; each step freezes the capabilities', async ({ onTestFinished }) => {
    const server = await fake([
      { toolCalls: [{ id: 'c1', name: 'list_dir', arguments: '{"path":"."}' }], usage: { prompt_tokens: 1000, completion_tokens: 100 } },
      { content: 'done', usage: { prompt_tokens: 2000, completion_tokens: 50 } },
    ]);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'look around', '--model', 'openai:gpt-4.1-mini', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    const costs = events.filter((e): e is Extract<ActorEvent, { type: 'attempt/end' }> => e.type === 'attempt/end').map((e) => e.data.costUsd);
    // gpt-4.1-mini: $0.40 in / $1.60 out per million tokens
    expect(costs).toEqual([0.00056, 0.00088]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { costUsd: 0.00144 } });
    const step = events.find((e): e is Extract<ActorEvent, { type: 'step/start' }> => e.type === 'step/start')!;
    expect(step.data).toMatchObject({ provider: 'openai-chat', capabilities: { parallelToolCalls: true } });
    expect(step.data.capabilities!.contextWindow).toBeGreaterThan(100_000);
    const human = await cli.run(['run', 'again', '--model', 'openai:unpriced-model', '--base-url', (await fake([{ content: 'ok' }])).baseURL, '--cwd', ws, ...common]);
    expect(human.code, show(human)).toBe(0);
    expect(human.stdout).toMatch(/completed · turn [\d,]+ tokens · cost unknown/);
  });
});

describe('structured output through the CLI', () => {
  test('--output-schema asks the server natively, refuses a non-matching answer, and accepts the corrected one', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'it is the space' }, { content: '{"bug":"only the first space","fixed":true}' }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const schemaFile = `${ws}/answer.schema.json`;
    await writeFile(schemaFile, JSON.stringify({ type: 'object', properties: { bug: { type: 'string' }, fixed: { type: 'boolean' } }, required: ['bug', 'fixed'] }));
    const r = await cli.run(['run', 'what is the bug?', '--model', 'openai:test-model', '--base-url', server.baseURL, '--output-schema', schemaFile, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    expect(events.filter((e) => e.type === 'assistant/rejected')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: '{"bug":"only the first space","fixed":true}' } });
    const body = server.requests.find((q) => q.path === '/v1/chat/completions')!.body as { response_format: { type: string; json_schema: { name: string } } };
    expect(body.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'final_answer' } });
  });

  test('an output schema that is not JSON, or not a schema: exit 2', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    await writeFile(`${ws}/bad.json`, '{ nope');
    const r = await cli.run(['run', 'x', '--model', 'openai:m', '--base-url', 'http://127.0.0.1:9/v1', '--output-schema', `${ws}/bad.json`, '--cwd', ws, ...common]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toContain('is not JSON');
    const missing = await cli.run(['run', 'x', '--model', 'openai:m', '--base-url', 'http://127.0.0.1:9/v1', '--output-schema', `${ws}/none.json`, '--cwd', ws, ...common]);
    expect(missing.code, show(missing)).toBe(2);
    expect(missing.stderr).toContain('output schema file not found');
  });
});

describe('effort and output cap per step', () => {
  test('--effort and --max-output-tokens reach the request and are frozen into each step', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'ok' }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'x', '--model', 'openai:o4-mini', '--base-url', server.baseURL, '--effort', 'low', '--max-output-tokens', '256', '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const body = server.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    expect(body).toMatchObject({ model: 'o4-mini', reasoning_effort: 'low', max_completion_tokens: 256 });
    const step = parseEvents(r.stdout).find((e) => e.type === 'step/start')!;
    expect(step.data).toMatchObject({ effort: 'low', maxOutputTokens: 256, provider: 'openai-chat' });
    const bad = await cli.run(['run', 'x', '--model', 'openai:o4-mini', '--base-url', server.baseURL, '--effort', 'extreme', '--cwd', ws, ...common]);
    expect(bad.code, show(bad)).toBe(2);
    expect(bad.stderr).toContain('minimal, low, medium, high');
  });

  test('an unknown model: the server says so, the turn fails with that reason (exit 1)', async ({ onTestFinished }) => {
    const server = await fake([
      { fault: { kind: 'status', status: 404, body: { error: { message: 'The model `gpt-9` does not exist', type: 'invalid_request_error', code: 'model_not_found' } } } },
    ]);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'x', '--model', 'openai:gpt-9', '--base-url', server.baseURL, '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(1);
    const end = parseEvents(r.stdout).at(-1) as Extract<ActorEvent, { type: 'turn/end' }>;
    expect(end.data.outcome).toBe('failed');
    expect(end.data.reason).toMatch(/invalid_request.*gpt-9/);
  });
});

describe('configuration files drive a run', () => {
  test('actorloop.toml in the workspace sets the model, base URL, capabilities and prices; the run records its config', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'ok', usage: { prompt_tokens: 1_000_000, completion_tokens: 0 } }]);
    const { ws, cli, common } = await setup(onTestFinished, {});
    await writeFile(
      `${ws}/actorloop.toml`,
      [
        'model = "openai:local-llama"',
        `base_url = "${server.baseURL}"`,
        '[capabilities."local-llama"]',
        'context_window = 8192',
        'parallel_tool_calls = false',
        '[pricing."local-llama"]',
        'input_per_mtok = 0.5',
        'output_per_mtok = 1.5',
        '',
      ].join('\n'),
    );
    // the base URL counts only from a workspace the user trusts
    const trusted = await cli.run(['trust', ws]);
    expect(trusted.code, show(trusted)).toBe(0);
    // no --model, no --base-url, no key: all from the workspace file
    const r = await cli.run(['run', 'x', '--cwd', ws, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const events = parseEvents(r.stdout);
    expect((server.requests.find((q) => q.path === '/v1/chat/completions')!.body as { model: string }).model).toBe('local-llama');
    expect(events.find((e) => e.type === 'step/start')!.data).toMatchObject({ capabilities: { contextWindow: 8192, parallelToolCalls: false } });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { costUsd: 0.5 } });
    const start = events.find((e): e is Extract<ActorEvent, { type: 'turn/start' }> => e.type === 'turn/start')!;
    expect(start.data.settings.config).toMatchObject({
      configFiles: [`${ws}/actorloop.toml`, expect.stringMatching(/actorloop\/config\.toml$/)], defaultModel: 'openai:local-llama',
      workspace: { trusted: true },
    });
  });

  test('a config file with an unknown key: exit 2 naming the file and the key', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished, {});
    await writeFile(`${ws}/actorloop.toml`, 'modle = "openai:x"\n');
    const r = await cli.run(['run', 'x', '--cwd', ws, ...common]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toContain(`${ws}/actorloop.toml: unknown key modle`);
  });
});
