// Commands driving a remote runtime outlive their gateway: a real `actorloop host`, a real
// `actorloop serve` SIGKILLed while a turn runs and started again on the same port, and `run`,
// `events --follow` and `tree --follow` through it. Each connects again, resumes from the last
// stream sequence it saw, and prints every event once: what the local `events` prints.
import { spawn, type ChildProcess } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { AGENT_ID, CliPool, REPO_ROOT, cliEnv, demoWorkspace, lines } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { waitUntil } from '../helpers/processes.js';

let nats: TestNats;
let hostErr = '';
let serveDir = '';
const started: ChildProcess[] = [];
const dirs: string[] = [];
const pool = new CliPool();

interface Proc {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnCli(args: string[], dataDir: string): Proc {
  const child = spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  started.push(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, out: () => out, err: () => err, exited };
}

async function startServe(port: number): Promise<{ proc: Proc; url: string }> {
  // the turns here run full-auto, looser than the default config's `ask`
  const proc = spawnCli(['serve', '--port', String(port), '--allow-looser-policy', '--nats', nats.url, '--data-dir', serveDir], serveDir);
  const up = await waitUntil(() => proc.out().includes('\n') || proc.child.exitCode !== null, 30_000);
  if (!up || proc.child.exitCode !== null) throw new Error(`the gateway did not start:\n${proc.err()}`);
  return { proc, url: proc.out().split('\n')[0]!.replace(/\/$/, '') };
}

beforeAll(async () => {
  nats = await startTestNats();
  const hostDir = await tempDir('gwr-host');
  serveDir = await tempDir('gwr-serve');
  dirs.push(hostDir, serveDir);
  const host = spawnCli(['host', '--name', 'gwr-host', '--nats', nats.url, '--data-dir', hostDir], hostDir);
  const up = await waitUntil(() => host.err().includes('hosting agents'), 30_000);
  hostErr = host.err();
  if (!up) throw new Error(`host did not start:\n${hostErr}`);
}, 60_000);

afterAll(async () => {
  await pool.killAll();
  await Promise.all(started.map((c) => new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGKILL');
  })));
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

test('run, events --follow and tree --follow through a gateway killed mid-turn and started again: each carries on, every event printed once', async ({ onTestFinished }) => {
  const first = await startServe(0);
  const port = Number(new URL(first.url).port);
  const ws = await demoWorkspace();
  const cliDir = await tempDir('gwr-cli');
  dirs.push(ws, cliDir);
  const script = join(ws, 'slow.json');
  await writeFile(script, JSON.stringify({
    // the tool runs until the test says go: the gateway is killed and back while it runs
    responses: [{ tool_calls: [{ name: 'shell', arguments: { command: 'while [ ! -f go ]; do sleep 0.1; done; echo slept-well' } }] }, { content: 'done sleeping' }],
  }));
  const gw = ['--gateway', first.url];
  // the owner's commands, on serve's data dir: they find the token there, the same after the restart
  const run = spawnCli(['run', 'sleep a while', '--model', `scripted:${script}`, '--approve', 'full-auto', '--cwd', ws, ...gw], serveDir);
  expect(await waitUntil(() => AGENT_ID.test(lines(run.out())[0] ?? ''), 30_000), run.err()).toBe(true);
  const agentId = lines(run.out())[0]!;
  const events = spawnCli(['events', agentId, '--follow', ...gw], serveDir);
  const tree = spawnCli(['tree', agentId, '--follow', ...gw], serveDir);
  // the tool runs: every command is connected and has printed something
  expect(await waitUntil(() => events.out().includes('tool/start') && tree.out().includes('main'), 30_000),
    `${run.out()}\n${events.out()}\n${tree.out()}`).toBe(true);

  first.proc.child.kill('SIGKILL');
  await first.proc.exited;
  expect(await waitUntil(() => run.err().includes('lost the gateway'), 10_000), run.err()).toBe(true);
  const second = await startServe(port);
  onTestFinished(() => void second.proc.child.kill('SIGTERM'));
  expect(run.child.exitCode, run.err()).toBeNull();
  await writeFile(join(ws, 'go'), '');

  const ran = await run.exited;
  expect(ran, `${run.out()}\n${run.err()}`).toEqual({ code: 0, signal: null });
  expect(run.err()).toContain(`connected to the gateway at ${first.url} again`);
  expect(run.out().split('done sleeping').length - 1, run.out()).toBe(1);
  expect(run.out()).toContain('completed');

  // the whole log, as a local command reads it, is what the followed stream printed: no gap, no duplicate
  const cli = pool.forTest({ onTestFinished }, cliEnv(cliDir));
  const local = await cli.run(['events', agentId, '--nats', nats.url, '--data-dir', cliDir]);
  expect(local.code, local.stderr).toBe(0);
  const want = lines(local.stdout);
  expect(want.some((l) => l.includes('turn/end'))).toBe(true);
  expect(await waitUntil(() => lines(events.out()).length >= want.length, 20_000), events.out()).toBe(true);
  events.child.kill('SIGINT');
  await events.exited;
  expect(lines(events.out())).toEqual(want);
  expect(events.err()).toContain('again');

  const treed = await tree.exited;
  expect(treed, tree.err()).toEqual({ code: 0, signal: null });
  expect(tree.out()).toContain(`main  ${agentId}  completed`);
}, 120_000);

test('Ctrl-C during run --gateway interrupts the turn through the gateway: it ends cancelled on its host, exit 130 as locally', async () => {
  const serve = await startServe(0);
  const ws = await demoWorkspace();
  const cliDir = await tempDir('gwr-int');
  dirs.push(ws, cliDir);
  const script = join(ws, 'slow.json');
  await writeFile(script, JSON.stringify({
    responses: [{ tool_calls: [{ name: 'shell', arguments: { command: 'sleep 20' } }] }, { content: 'never' }],
  }));
  const run = spawnCli(['run', 'sleep long', '--model', `scripted:${script}`, '--approve', 'full-auto', '--cwd', ws, '--json', '--gateway', serve.url], serveDir);
  expect(await waitUntil(() => run.out().includes('"type":"tool/start"'), 30_000), run.err()).toBe(true);
  run.child.kill('SIGINT');
  expect(await run.exited, `${run.out()}\n${run.err()}`).toEqual({ code: 130, signal: null });
  expect(run.err()).toContain('interrupting the turn');
  const last = JSON.parse(lines(run.out()).at(-1)!);
  expect(last).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled' } });
  serve.proc.child.kill('SIGTERM');
  await serve.proc.exited;
}, 90_000);
