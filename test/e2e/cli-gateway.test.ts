// The CLI driving a remote runtime through the gateway: a real `actorloop host` and a real
// `actorloop serve` (with a bearer token) on one nats-server, and CLI processes with `--gateway`
// and a data dir of their own that must stay empty: they open no NATS and no LMDB. Each prints
// what the local command prints and exits with its code.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test, type ExpectStatic } from 'vitest';
import { AGENT_ID, CliPool, DEMO_SCRIPT, REPO_ROOT, cliEnv, demoWorkspace, lines, show, type CliResult } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { waitUntil } from '../helpers/processes.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';
const TOKEN = 'a-gateway-token-of-some-length-0123456789';

let nats: TestNats;
let url = '';
let tokenFile = '';
let serveErr = '';
let hostErr = '';
const started: ChildProcess[] = [];
const dirs: string[] = [];
const pool = new CliPool();

function spawnCli(args: string[], dataDir: string, onOut?: (s: string) => void, onErr?: (s: string) => void): ChildProcess {
  const child = spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.setEncoding('utf8').on('data', (s: string) => onOut?.(s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => onErr?.(s));
  started.push(child);
  return child;
}

beforeAll(async () => {
  nats = await startTestNats();
  const hostDir = await tempDir('gw-host');
  const serveDir = await tempDir('gw-serve');
  dirs.push(hostDir, serveDir);
  tokenFile = join(serveDir, 'token');
  await writeFile(tokenFile, `${TOKEN}\n`);
  spawnCli(['host', '--name', 'gw-host', '--nats', nats.url, '--data-dir', hostDir], hostDir, undefined, (s) => (hostErr += s));
  let serveOut = '';
  // the runs here compare auto-edit runs through the gateway with local ones: looser than the default config's `ask`
  spawnCli(['serve', '--port', '0', '--token-file', tokenFile, '--allow-looser-policy', '--nats', nats.url, '--data-dir', serveDir], serveDir, (s) => (serveOut += s), (s) => (serveErr += s));
  const up = await waitUntil(() => hostErr.includes('hosting agents') && serveOut.includes('\n'), 30_000);
  if (!up) throw new Error(`host or gateway did not start:\n${hostErr}\n${serveErr}`);
  url = serveOut.split('\n')[0]!.replace(/\/$/, '');
}, 60_000);

afterAll(async () => {
  await pool.killAll();
  await Promise.all(started.map((c) => new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  })));
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** A CLI with a data dir of its own, which a `--gateway` command must leave unmade. */
async function setup(onTestFinished: (fn: () => Promise<void>) => void) {
  const ws = await demoWorkspace();
  const dataDir = await tempDir('gw-cli');
  dirs.push(ws, dataDir);
  await rm(dataDir, { recursive: true, force: true });
  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  return { ws, dataDir, cli, gw: ['--gateway', url, '--gateway-token-file', tokenFile], local: ['--nats', nats.url, '--data-dir', dataDir] };
}

function expectExit(e: ExpectStatic, r: CliResult, code: number): void {
  e({ code: r.code, signal: r.signal }, `${show(r)}\nserve:\n${serveErr}`).toEqual({ code, signal: null });
}

const sameIds = (text: string): string => text.replace(/agt_[0-9A-Z]{26}/g, '<agent>').replace(/apr_[0-9A-Za-z]+/g, '<approval>');

test('run --gateway completes the turn with the output and exit code of a local run, opening no NATS or LMDB', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const remote = await a.cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', a.ws, ...a.gw]);
  expectExit(expect, remote, 0);
  expect(lines(remote.stdout)[0]).toMatch(AGENT_ID);
  expect(existsSync(a.dataDir), 'a --gateway command made its data dir').toBe(false);
  const b = await setup(onTestFinished);
  const local = await b.cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', b.ws, ...b.local]);
  expectExit(expect, local, 0);
  // the same lines; two tool calls of one step run at once, so their lines may come in either order
  const shown = (r: CliResult, ws: string): string[] => lines(sameIds(r.stdout).replaceAll(ws, '<ws>')).sort();
  expect(shown(remote, a.ws)).toEqual(shown(local, b.ws));
  expect(remote.stdout).toContain('completed');
}, 60_000);

test('run --gateway parked for a person without a TTY exits 5; approve --gateway answers it and the turn completes', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const run = await a.cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', a.ws, ...a.gw]);
  expectExit(expect, run, 5);
  const agentId = lines(run.stdout)[0]!;
  const approvalId = /waiting for approval (apr_\S+)/.exec(run.stderr)?.[1];
  expect(approvalId, run.stderr).toBeDefined();
  // the line to answer it reaches the agent through the same gateway
  expect(run.stderr).toContain(`approve: actorloop approve ${agentId} ${approvalId} --gateway ${url} --gateway-token-file ${tokenFile}`);
  const approve = await a.cli.run(['approve', agentId, approvalId!, ...a.gw]);
  expectExit(expect, approve, 0);
  expect(approve.stdout).toContain('completed');
  // the same approval again: no longer pending, the gateway knows it not (gateway.approval_not_found): one line, exit 3
  const again = await a.cli.run(['approve', agentId, approvalId!, ...a.gw]);
  expectExit(expect, again, 3);
  expect(lines(again.stderr)).toHaveLength(1);
  expect(again.stderr).toContain('waits for no approval');

  // events and tree through the gateway print what the local commands print
  const events = await a.cli.run(['events', agentId, ...a.gw]);
  expectExit(expect, events, 0);
  const localEvents = await a.cli.run(['events', agentId, ...a.local]);
  expectExit(expect, localEvents, 0);
  expect(events.stdout).toBe(localEvents.stdout);
  expect(lines(events.stdout).length).toBeGreaterThan(5);
  const json = await a.cli.run(['events', agentId, '--json', '--after', '3', ...a.gw]);
  expectExit(expect, json, 0);
  expect(JSON.parse(lines(json.stdout)[0]!).seq).toBe(4);
  const tree = await a.cli.run(['tree', agentId, ...a.gw]);
  expectExit(expect, tree, 0);
  const localTree = await a.cli.run(['tree', agentId, ...a.local]);
  expect(tree.stdout).toBe(localTree.stdout);
  expect(tree.stdout).toContain(`main  ${agentId}  completed`);
}, 90_000);

test('interrupt --gateway ends a parked turn cancelled (exit 0, as locally); send --gateway --inject to an idle agent returns at once', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const run = await a.cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', a.ws, ...a.gw]);
  expectExit(expect, run, 5);
  const agentId = lines(run.stdout)[0]!;
  const interrupt = await a.cli.run(['interrupt', agentId, ...a.gw]);
  expectExit(expect, interrupt, 0);
  expect(interrupt.stdout).toContain('cancelled');
  const again = await a.cli.run(['interrupt', agentId, ...a.gw]);
  expectExit(expect, again, 0);
  expect(again.stderr).toContain('has no open turn: nothing to interrupt (its last turn ended cancelled)');
  const inject = await a.cli.run(['send', agentId, 'the slug must be lowercase', '--inject', ...a.gw]);
  expectExit(expect, inject, 0);
  expect(inject.stdout).toMatch(/^msg_\S+ \(inject\)\n$/);
  // `-`: the text is stdin's, as locally
  const piped = spawn(process.execPath, ['bin/actorloop.js', 'send', agentId, '-', '--inject', ...a.gw], { cwd: REPO_ROOT, env: cliEnv(a.dataDir), stdio: ['pipe', 'pipe', 'pipe'] });
  let pipedOut = '';
  piped.stdout.setEncoding('utf8').on('data', (s: string) => (pipedOut += s));
  piped.stdin.end('a long note from a file\n');
  expect(await new Promise((resolve) => piped.once('close', (code) => resolve(code)))).toBe(0);
  expect(pipedOut).toMatch(/^msg_\S+ \(inject\)\n$/);
  const log = await a.cli.run(['events', agentId, '--json', ...a.gw]);
  expect(log.stdout).toContain('a long note from a file');
  expect(existsSync(a.dataDir)).toBe(false);
}, 60_000);

test('a question through the gateway: run exits 5 with it, answer --gateway --option finishes the turn', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const script = join(a.ws, 'ask.json');
  const colour = { name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } };
  await writeFile(script, JSON.stringify({ responses: [{ tool_calls: [colour] }, { content: 'blue it is' }] }));
  const run = await a.cli.run(['run', 'ask me', '--model', `scripted:${script}`, '--cwd', a.ws, '--json', ...a.gw]);
  expectExit(expect, run, 5);
  const agentId = lines(run.stderr)[0]!;
  expect(agentId).toMatch(AGENT_ID);
  const qid = /waiting for an answer to question (q_\w+)/.exec(run.stderr)?.[1];
  expect(qid, run.stderr).toBeDefined();
  expect(run.stderr).toContain('1) Red [red]');
  expect(JSON.parse(lines(run.stdout).at(-1)!)).toMatchObject({ type: 'actor/parked', data: { waitingFor: 'question', ids: [qid] } });
  const answered = await a.cli.run(['answer', agentId, qid!, '--option', 'blue', '--json', ...a.gw]);
  expectExit(expect, answered, 0);
  const last = JSON.parse(lines(answered.stdout).at(-1)!);
  expect(last).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'blue it is' } });
  const wrong = await a.cli.run(['answer', agentId, qid!, '--option', 'red', ...a.gw]);
  expectExit(expect, wrong, 2);
  expect(lines(wrong.stderr)).toHaveLength(1);
  expect(existsSync(a.dataDir)).toBe(false);
}, 60_000);

test('a wrong token, an unreachable gateway and an unknown agent: one line each, exit 2, 2 and 3', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const wrong = join(await tempDir('gw-wrong'), 'token');
  dirs.push(join(wrong, '..'));
  await writeFile(wrong, 'not-the-token-but-long-enough\n');
  const refused = await a.cli.run(['events', 'agt_01J0000000000000000000000A', '--gateway', url, '--gateway-token-file', wrong]);
  expectExit(expect, refused, 2);
  expect(lines(refused.stderr)).toHaveLength(1);
  expect(refused.stderr).toContain(`refused the token from ${wrong} (401)`);
  expect(refused.stderr).toContain('--gateway-token-file');
  // no token file, and none in this CLI's data dir: the gateway needs its token, and says where it was looked for
  const none = await a.cli.run(['tree', 'agt_01J0000000000000000000000A', '--gateway', url]);
  expectExit(expect, none, 2);
  expect(lines(none.stderr)).toHaveLength(1);
  expect(none.stderr).toContain(`needs its token (401): no token this user can read at ${join(a.dataDir, 'gateway', 'token')}`);
  const unreachable = await a.cli.run(['run', 'hello', '--model', `scripted:${DEMO_SCRIPT}`, '--gateway', 'http://127.0.0.1:9']);
  expectExit(expect, unreachable, 2);
  expect(lines(unreachable.stderr)).toHaveLength(1);
  expect(unreachable.stderr).toContain('cannot reach the gateway at http://127.0.0.1:9');
  expect(unreachable.stderr).toContain('actorloop serve');
  const unknown = await a.cli.run(['events', 'agt_01J0000000000000000000000A', ...a.gw]);
  expectExit(expect, unknown, 3);
  expect(lines(unknown.stderr)).toHaveLength(1);
  expect(existsSync(a.dataDir)).toBe(false);
}, 60_000);

test('run --gateway carries the turn settings of run\'s flags; --continue and --last make the next turn of an agent; --base-url is refused', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const script = join(a.ws, 'answers.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: '{"word":"one"}' }, { content: '{"word":"two"}' }, { content: '{"word":"three"}' }] }));
  const instructions = join(a.ws, 'prompt.txt');
  await writeFile(instructions, 'You answer in one word.\n');
  const schema = join(a.ws, 'schema.json');
  await writeFile(schema, JSON.stringify({ type: 'object', properties: { word: { type: 'string' } }, required: ['word'] }));
  const run = await a.cli.run([
    'run', 'say one', '--model', `scripted:${script}`, '--cwd', a.ws, '--json', '--deadline', '600', '--max-tokens', '50000', '--effort', 'low',
    '--max-output-tokens', '900', '--instructions', instructions, '--output-schema', schema, '--max-steps', '4', ...a.gw,
  ]);
  expectExit(expect, run, 0);
  const agentId = lines(run.stderr)[0]!;
  expect(agentId).toMatch(AGENT_ID);
  const events = await a.cli.run(['events', agentId, '--json', ...a.local]);
  expectExit(expect, events, 0);
  const starts = lines(events.stdout).map((l) => JSON.parse(l)).filter((e) => e.type === 'turn/start');
  expect(starts).toHaveLength(1);
  expect(starts[0].data.settings).toMatchObject({
    instructions: 'You answer in one word.\n', effort: 'low', maxOutputTokens: 900, outputSchema: { required: ['word'] },
    budgets: { maxSteps: 4, maxTokens: 50000 },
  });
  // the deadline is made absolute when the turn starts
  const started = Date.parse(starts[0].at);
  expect(starts[0].data.settings.budgets.deadlineAt).toBeGreaterThanOrEqual(started + 590_000);
  expect(starts[0].data.settings.budgets.deadlineAt).toBeLessThanOrEqual(started + 610_000);

  // the next turn of the same agent, its settings kept (the output schema too) but for what is said again
  const next = await a.cli.run(['run', 'say two', '--continue', agentId, '--max-steps', '3', '--json', ...a.gw]);
  expectExit(expect, next, 0);
  expect(JSON.parse(lines(next.stdout).at(-1)!)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: '{"word":"two"}' } });
  const last = await a.cli.run(['run', 'say three', '--last', '--cwd', a.ws, ...a.gw]);
  expectExit(expect, last, 0);
  expect(last.stdout).toContain('three');
  // one turn/start printed per command: each follows its own turn only
  expect(lines(next.stdout).map((l) => JSON.parse(l)).filter((e) => e.type === 'turn/start')).toHaveLength(1);
  const all = await a.cli.run(['events', agentId, '--json', ...a.local]);
  const settings = lines(all.stdout).map((l) => JSON.parse(l)).filter((e) => e.type === 'turn/start').map((e) => e.data.settings);
  expect(settings).toHaveLength(3);
  expect(settings[1]).toMatchObject({ instructions: 'You answer in one word.\n', effort: 'low', budgets: { maxSteps: 3 } });
  expect(settings[2].workspace).toBe(a.ws);

  // checked here, before anything is sent: one line, exit 2
  const badBudget = await a.cli.run(['run', 'x', '--model', `scripted:${script}`, '--max-tokens', 'lots', ...a.gw]);
  expectExit(expect, badBudget, 2);
  expect(badBudget.stderr).toContain('--max-tokens takes a whole number');
  const baseUrl = await a.cli.run(['run', 'x', '--model', 'openai:gpt-4.1-mini', '--base-url', 'http://127.0.0.1:9/v1', ...a.gw]);
  expectExit(expect, baseUrl, 2);
  expect(lines(baseUrl.stderr)).toHaveLength(1);
  expect(baseUrl.stderr).toContain('--base-url is not carried');
  const unknownAgent = await a.cli.run(['run', 'x', '--continue', 'agt_01J0000000000000000000000A', ...a.gw]);
  expectExit(expect, unknownAgent, 3);
}, 90_000);

test('answer exits with the same code through the gateway as locally: an unknown agent or question 3, a malformed ID or one answered already 2', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const script = join(a.ws, 'ask.json');
  const colour = { name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } };
  await writeFile(script, JSON.stringify({ responses: [{ tool_calls: [colour] }, { content: 'blue it is' }] }));
  const run = await a.cli.run(['run', 'ask me', '--model', `scripted:${script}`, '--cwd', a.ws, ...a.gw]);
  expectExit(expect, run, 5);
  const agentId = lines(run.stdout)[0]!;
  const qid = /waiting for an answer to question (q_\w+)/.exec(run.stderr)![1]!;
  // the local command runs on a data dir of its own, over the same bus
  const localDir = await tempDir('gw-local');
  dirs.push(localDir);
  const local = ['--nats', nats.url, '--data-dir', localDir];
  const both = async (args: string[], code: number, message: RegExp): Promise<void> => {
    for (const where of [a.gw, local]) {
      const r = await a.cli.run(['answer', ...args, ...where]);
      expectExit(expect, r, code);
      expect(lines(r.stderr), show(r)).toHaveLength(1);
      expect(r.stderr, show(r)).toMatch(message);
    }
  };
  await both(['agt_01ABCDEFGHJKMNPQRSTVWXYZ01', qid, '--option', 'red'], 3, /agt_01ABCDEFGHJKMNPQRSTVWXYZ01/);
  await both([agentId, 'q_01ABCDEFGHJKMNPQRSTVWXYZ01', '--option', 'red'], 3, /has no question q_01ABCDEFGHJKMNPQRSTVWXYZ01/);
  await both([agentId, 'constructor', '--option', 'red'], 2, /"constructor" is not a question ID/);
  await both([agentId, qid, ''], 2, /the answer is empty/);
  const answered = await a.cli.run(['answer', agentId, qid, '--option', 'blue', ...a.gw]);
  expectExit(expect, answered, 0);
  await both([agentId, qid, '--option', 'red'], 2, new RegExp(`question ${qid} is already answered`));
  expect(existsSync(a.dataDir)).toBe(false);
}, 90_000);

test('a secret in a task sent through the gateway is redacted before the log and the directory hold it', async ({ onTestFinished }) => {
  const a = await setup(onTestFinished);
  const secret = 'ghp_GatewayT0kenAbCdEfGhIjKlMnOpQrStUv2468';
  const script = join(a.ws, 'one.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: 'done' }] }));
  const run = await a.cli.run(['run', `deploy with ${secret}`, '--model', `scripted:${script}`, '--cwd', a.ws, ...a.gw]);
  expectExit(expect, run, 0);
  const agentId = lines(run.stdout)[0]!;
  // read past the gateway (which redacts what it serves): the log and the directory as stored
  const runs = await a.cli.run(['runs', '--json', ...a.local]);
  const row = lines(runs.stdout).map((l) => JSON.parse(l) as { actorId: string; title: string; lastTask: string }).find((r) => r.actorId === agentId);
  expect(row).toMatchObject({ title: 'deploy with [REDACTED:github_token]', lastTask: 'deploy with [REDACTED:github_token]' });
  const events = await a.cli.run(['events', agentId, '--json', ...a.local]);
  expect(events.stdout).toContain('[REDACTED:github_token]');
  expect(events.stdout).not.toContain(secret);
}, 60_000);
