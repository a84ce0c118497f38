// `actorloop doctor` through real processes: a real nats-server (the test one, or the embedded one
// doctor starts and stops), a real LMDB, the fake OpenAI-compatible server answering the probes.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test, type TestContext } from 'vitest';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, natsAccepts, natsServerVersion, resolveNatsServerBinary } from '../../src/bus/nats-server.js';
import { DEMO_SCRIPT, cliEnv, lines, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { FAULTS, startFakeOpenAI, type FakeOpenAI, type FakeOpenAIOptions, type FakeTurn, type RecordedRequest } from '../helpers/fake-openai.js';
import { startTestNats } from '../helpers/nats.js';

const KEY = 'sk-doctor-0123456789abcdef';
const stack = useCliStack();

/** True when the nats-server on PATH (the test server's) is older than 2.10: it cannot fsync every commit. */
let lazyFsync: boolean;

beforeAll(async () => {
  const [major = 0, minor = 0] = (await natsServerVersion()).split('.').map(Number);
  lazyFsync = major < 2 || (major === 2 && minor < 10);
});
interface Check {
  check: string;
  status: 'ok' | 'warning' | 'failed';
  detail: string;
  fix: string | null;
}

/** Parses the text output: a status line per check, then `→ fix` under a warning or failure. */
function parseText(stdout: string): Check[] {
  const checks: Check[] = [];
  for (const line of lines(stdout)) {
    const head = /^(ok|warning|failed) +([^:]+): (.*)$/.exec(line);
    if (head) {
      checks.push({ status: head[1] as Check['status'], check: head[2]!, detail: head[3]!, fix: null });
      continue;
    }
    const fix = /^ +→ (.+)$/.exec(line);
    if (!fix || checks.length === 0) throw new Error(`unexpected doctor line: ${line}`);
    checks.at(-1)!.fix = fix[1]!;
  }
  return checks;
}

/** Parses `--json` output: one {check, status, detail, fix} a line. */
function parseJson(stdout: string): Check[] {
  return lines(stdout).map((line) => {
    const c = JSON.parse(line) as Check;
    expect(Object.keys(c).sort()).toEqual(['check', 'detail', 'fix', 'status']);
    return c;
  });
}

function byName(checks: Check[], name: string): Check {
  const c = checks.find((x) => x.check === name);
  if (!c) throw new Error(`no ${name} check in ${JSON.stringify(checks)}`);
  return c;
}

/** Answers the two probes: the tool probe with a call to the probe tool, the structured one with JSON. */
function probeAnswers(over: { tool?: Partial<FakeTurn>; structured?: Partial<FakeTurn> } = {}): FakeOpenAIOptions['handler'] {
  return (req: RecordedRequest) => {
    const body = req.body as { response_format?: unknown };
    if (body.response_format) return { content: '{"ok":true}', ...over.structured };
    return { toolCalls: [{ name: 'doctor_echo', arguments: '{"word":"ping"}' }], ...over.tool };
  };
}

async function fake(opts: FakeOpenAIOptions): Promise<FakeOpenAI> {
  const s = await startFakeOpenAI(opts);
  stack.onClose(() => s.close());
  return s;
}

async function setup(ctx: TestContext, extraEnv: Record<string, string> = {}) {
  const dataDir = await stack.dir('doctor');
  // OPENAI_BASE_URL is not among what cliEnv strips: blank it so the parent's cannot leak in
  const cli = stack.pool.forTest(ctx, cliEnv(dataDir, { OPENAI_BASE_URL: '', ...extraEnv }));
  return { dataDir, cli, doctor: (...args: string[]) => cli.run(['doctor', '--data-dir', dataDir, ...args]) };
}

function expectExit(r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

const MODEL_CHECKS = ['model', 'model tool call', 'model usage', 'model structured output'];

describe('doctor against a working setup', () => {
  test('all checks ok against the test nats-server and the fake endpoint; --json says the same', async (ctx) => {
    const server = await fake({ handler: probeAnswers() });
    const { cli, dataDir, doctor } = await setup(ctx, { OPENAI_API_KEY: KEY });
    const args = ['--nats', stack.nats.url, '--model', 'openai:test-model', '--base-url', server.baseURL];

    // a fresh server has none of the streams yet: a warning, not a failure
    const fresh = await doctor(...args, '--json');
    expectExit(fresh, 0);
    expect(byName(parseJson(fresh.stdout), 'streams')).toMatchObject({ status: 'warning', detail: expect.stringContaining('LOGS, INBOX, DLQ absent') });
    // the check reads the streams, it does not create them
    expect(byName(parseJson((await doctor(...args, '--json')).stdout), 'streams').status).toBe('warning');

    // any command that opens the bus creates them
    expectExit(await cli.run(['runs', '--nats', stack.nats.url, '--data-dir', dataDir]), 0);

    const r = await doctor(...args);
    expectExit(r, 0);
    const checks = parseText(r.stdout);
    expect(checks.map((c) => c.check)).toEqual(['nats-server', 'auth', 'jetstream', 'durability', 'replicas', 'streams', 'data dir', 'lmdb', 'sandbox', 'search', 'policy', 'trust', 'skills', ...MODEL_CHECKS]);
    // the test server takes anonymous connections, and (before 2.10) fsyncs every 2 minutes: only those are worth a warning
    const warned = ['auth', ...(lazyFsync ? ['durability'] : [])];
    expect(checks.filter((c) => c.status !== 'ok'), r.stdout).toEqual([
      expect.objectContaining({ check: 'auth', status: 'warning', detail: expect.stringMatching(/accepts connections without a login/) }),
      ...(lazyFsync ? [expect.objectContaining({ check: 'durability', status: 'warning' })] : []),
    ]);
    expect(byName(checks, 'nats-server').detail).toContain(stack.nats.url);
    expect(byName(checks, 'jetstream').detail).toMatch(/enabled .*nats-server 2\./);
    expect(byName(checks, 'streams').detail).toMatch(/LOGS .*INBOX .*DLQ .*as expected/);
    expect(byName(checks, 'lmdb').detail).toContain(join(dataDir, 'lmdb'));
    expect(byName(checks, 'model').detail).toContain('test-model among them');
    expect(byName(checks, 'model tool call').detail).toContain('doctor_echo');

    const json = await doctor(...args, '--json');
    expectExit(json, 0);
    const parsed = parseJson(json.stdout);
    expect(parsed.map((c) => [c.check, c.status])).toEqual(checks.map((c) => [c.check, warned.includes(c.check) ? 'warning' : 'ok']));
    expect(parsed.every((c) => (c.fix === null) === !warned.includes(c.check))).toBe(true);

    // the key went on the wire and nowhere else
    for (const out of [fresh, r, json]) expect(out.stdout + out.stderr).not.toContain(KEY);
    const wire = server.requests;
    expect(wire.some((q) => q.method === 'GET' && q.path === '/v1/models')).toBe(true);
    const chats = wire.filter((q) => q.path === '/v1/chat/completions');
    expect(chats.every((q) => q.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    const tool = chats.find((q) => !(q.body as { response_format?: unknown }).response_format)!.body as Record<string, unknown>;
    expect(tool).toMatchObject({ model: 'test-model', stream: true, stream_options: { include_usage: true } });
    expect(tool['tools']).toEqual([expect.objectContaining({ type: 'function', function: expect.objectContaining({ name: 'doctor_echo' }) })]);
    const structured = chats.find((q) => (q.body as { response_format?: unknown }).response_format)!.body;
    expect(structured).toMatchObject({ response_format: { type: 'json_schema' } });
  });

  test('the embedded nats-server: started for the check and stopped after, no process left', async (ctx) => {
    const { dataDir, doctor } = await setup(ctx);
    const r = await doctor('--model', `scripted:${DEMO_SCRIPT}`);
    expectExit(r, 0);
    const checks = parseText(r.stdout);
    expect(byName(checks, 'nats-server')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/nats-server, version 2\./) });
    expect(byName(checks, 'jetstream')).toMatchObject({ status: 'ok', detail: expect.stringContaining('embedded server') });
    expect(byName(checks, 'model')).toMatchObject({ status: 'ok', detail: expect.stringContaining('6 responses') });
    expect(existsSync(join(dataDir, 'nats', 'server.json'))).toBe(false);
    expect(await processesMentioning(dataDir)).toEqual([]);
  });
});

describe('doctor reports what is wrong, and what to do', () => {
  test('a nats-server that cannot fsync every commit (before 2.10): a durability warning in the README\'s words, exit 0', async (ctx) => {
    // the server on PATH decides what there is to see: 2.9.x warns, 2.10+ by URL does not
    const { doctor } = await setup(ctx);
    for (const args of [['--nats', stack.nats.url], []]) {
      const r = await doctor(...args, '--model', `scripted:${DEMO_SCRIPT}`, '--json');
      expectExit(r, 0);
      const durability = byName(parseJson(r.stdout), 'durability');
      if (lazyFsync) {
        expect(durability, args.join(' ') || 'embedded').toMatchObject({
          status: 'warning',
          detail: expect.stringMatching(/fsyncs every 2 minutes and cannot be told otherwise: a commit JetStream acknowledged survives any process kill .*not a power loss/),
          fix: expect.stringMatching(/nats-server 2\.10 or newer with `jetstream \{ sync_interval: always \}`.*replicated \(R3\) cluster.*Durability contract/),
        });
      } else {
        expect(durability.status).toBe(args.length > 0 ? 'ok' : 'warning');
      }
    }
  });

  test('an endpoint without usage in streams, refusing json_schema and not listing the model: warnings, exit 0', async (ctx) => {
    const server = await fake({
      models: ['other-model'],
      handler: probeAnswers({
        tool: { usage: null },
        structured: { fault: { kind: 'status', status: 400, body: { error: { message: 'response_format json_schema is not supported', type: 'invalid_request_error', param: 'response_format', code: null } } } },
      }),
    });
    const { doctor } = await setup(ctx);
    const r = await doctor('--nats', stack.nats.url, '--model', 'openai:test-model', '--base-url', server.baseURL, '--json');
    expectExit(r, 0);
    const checks = parseJson(r.stdout);
    expect(byName(checks, 'model')).toMatchObject({ status: 'warning', fix: expect.stringContaining('other-model') });
    expect(byName(checks, 'model tool call').status).toBe('ok');
    expect(byName(checks, 'model usage')).toMatchObject({ status: 'warning', fix: expect.stringContaining('estimated') });
    expect(byName(checks, 'model structured output')).toMatchObject({ status: 'warning', detail: expect.stringContaining('400') });
  });

  test('a refused base URL: the model check failed, the fix names --base-url, exit 1', async (ctx) => {
    const port = await freePort();
    const { doctor } = await setup(ctx);
    const r = await doctor('--nats', stack.nats.url, '--model', 'openai:test-model', '--base-url', `http://127.0.0.1:${port}/v1`);
    expectExit(r, 1);
    const checks = parseText(r.stdout);
    const model = byName(checks, 'model');
    expect(model).toMatchObject({ status: 'failed', detail: expect.stringContaining(`127.0.0.1:${port}`) });
    expect(model.fix).toContain('--base-url');
    // the probes would fail the same way: one line says it
    expect(checks.map((c) => c.check)).not.toContain('model tool call');
    expect(checks.filter((c) => c.status === 'failed').map((c) => c.check)).toEqual(['model']);
  });

  test('a key the server refuses (and echoes back): failed naming OPENAI_API_KEY, the key never printed', async (ctx) => {
    const server = await fake({ handler: () => ({ fault: FAULTS.unauthorized() }) });
    const { doctor } = await setup(ctx, { OPENAI_API_KEY: KEY });
    const r = await doctor('--nats', stack.nats.url, '--model', 'openai:test-model', '--base-url', server.baseURL);
    expectExit(r, 1);
    const checks = parseText(r.stdout);
    const tool = byName(checks, 'model tool call');
    expect(tool).toMatchObject({ status: 'failed', detail: expect.stringContaining('401') });
    expect(tool.fix).toContain('OPENAI_API_KEY');
    expect(byName(checks, 'model structured output').status).toBe('failed');
    expect(r.stdout + r.stderr).not.toContain(KEY);
    expect(r.stdout + r.stderr).not.toContain('0123456789abcdef');
  });

  test('no model configured: a warning naming --model and OPENAI_API_KEY, exit 0', async (ctx) => {
    const { doctor } = await setup(ctx);
    const r = await doctor('--nats', stack.nats.url);
    expectExit(r, 0);
    const model = byName(parseText(r.stdout), 'model');
    expect(model).toMatchObject({ status: 'warning', detail: 'none configured' });
    expect(model.fix).toContain('--model');
    expect(model.fix).toContain('OPENAI_API_KEY');
  });

  test('--nats nats://127.0.0.1:1: nats-server failed with a fix, exit 1', async (ctx) => {
    const { doctor } = await setup(ctx);
    const r = await doctor('--nats', 'nats://127.0.0.1:1', '--model', `scripted:${DEMO_SCRIPT}`);
    expectExit(r, 1);
    const checks = parseText(r.stdout);
    const server = byName(checks, 'nats-server');
    expect(server).toMatchObject({ status: 'failed', detail: expect.stringContaining('nats://127.0.0.1:1') });
    expect(server.fix).toMatch(/nats-server -js/);
    expect(server.fix).toContain('NATS_URL');
    // the checks that need no server still ran
    expect(byName(checks, 'lmdb').status).toBe('ok');
    expect(byName(checks, 'model').status).toBe('ok');
  });

  test('nats-server missing and no --nats: failed naming apt-get install -y nats-server, exit 1', async (ctx) => {
    const { dataDir, doctor } = await setup(ctx, { ACTORLOOP_NATS_SERVER: '/nonexistent/nats-server' });
    const r = await doctor('--json');
    expectExit(r, 1);
    const checks = parseJson(r.stdout);
    const server = byName(checks, 'nats-server');
    expect(server).toMatchObject({ status: 'failed', detail: expect.stringContaining('/nonexistent/nats-server') });
    expect(server.fix).toContain('apt-get install -y nats-server');
    expect(server.fix).toContain('NATS_URL');
    expect(checks.map((c) => c.check)).not.toContain('jetstream');
    expect(byName(checks, 'data dir').status).toBe('ok');
    expect(byName(checks, 'model').status).toBe('warning');
    expect(existsSync(join(dataDir, 'nats', 'server.json'))).toBe(false);
  });
});

describe('doctor and the server behind --nats', () => {
  test('a server without JetStream: jetstream failed, naming -js, exit 1', async (ctx) => {
    const port = await freePort();
    const child = spawn(resolveNatsServerBinary(), ['-a', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    try {
      const url = `nats://127.0.0.1:${port}`;
      for (let i = 0; i < 100 && !(await natsAccepts(url, 200)); i++) await new Promise((r) => setTimeout(r, 50));
      const { doctor } = await setup(ctx);
      const r = await doctor('--nats', url, '--model', `scripted:${DEMO_SCRIPT}`);
      expectExit(r, 1);
      const checks = parseText(r.stdout);
      expect(byName(checks, 'nats-server').status).toBe('ok');
      const js = byName(checks, 'jetstream');
      expect(js).toMatchObject({ status: 'failed', detail: expect.stringContaining('JetStream') });
      expect(js.fix).toContain('-js');
      expect(checks.map((c) => c.check)).not.toContain('streams');
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  });

  test('a stream whose storage cannot be changed: streams failed, exit 1', async (ctx) => {
    const other = await startTestNats();
    try {
      const nc = await connect({ servers: other.url });
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.add({ name: 'LOGS', subjects: ['log.>'], storage: StorageType.Memory });
      } finally {
        await nc.close();
      }
      const { doctor } = await setup(ctx);
      const r = await doctor('--nats', other.url, '--model', `scripted:${DEMO_SCRIPT}`, '--json');
      expectExit(r, 1);
      const streams = byName(parseJson(r.stdout), 'streams');
      expect(streams).toMatchObject({ status: 'failed', detail: expect.stringContaining('LOGS (storage)') });
      expect(streams.fix).toContain('recreate');
    } finally {
      await other.stop();
    }
  });
});

/** PIDs of processes whose command line names `dir` (an embedded nats-server stores under it). */
async function processesMentioning(dir: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(dir)) found.push(Number(entry));
  }
  return found;
}
