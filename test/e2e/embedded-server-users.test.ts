// The embedded nats-server is owned by no command: `serve` starts it, a `host` uses it too, and
// stopping `serve` leaves it running under the host, whose turn goes on to its end with no kill
// recorded; when the host, its last user, stops, the server stops with it.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { embeddedPaths, pidAlive, readEmbeddedState } from '../../src/bus/embedded.js';
import { natsAccepts } from '../../src/bus/nats-server.js';
import { CliPool, REPO_ROOT, cliEnv, lines, parseEvents, parseRuns, show } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { servedUrl } from '../helpers/serve-output.js';
import { until } from '../server/gateway-fixture.js';

const dirs: string[] = [];
const procs: ChildProcess[] = [];
const pool = new CliPool();

afterAll(async () => {
  // each one gone before the state file is read: a host killed while it restarts the server writes it last
  await Promise.all(procs.filter((p) => p.exitCode === null && p.signalCode === null).map((p) => new Promise((r) => {
    p.once('exit', r);
    p.kill('SIGKILL');
  })));
  await pool.killAll();
  // what a failed test left: the data dir's server is stopped too
  for (const d of dirs) {
    const state = await readEmbeddedState(embeddedPaths(d).stateFile).catch(() => undefined);
    if (state && pidAlive(state.pid)) process.kill(state.pid, 'SIGKILL');
  }
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** Starts `actorloop <args>` on the data dir's embedded server (no --nats). */
function start(args: string[], dataDir: string) {
  let out = '';
  let err = '';
  const proc = spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  procs.push(proc);
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, out: () => out, err: () => err, exited };
}

test('stopping serve leaves the embedded server to the host that uses it: its turn ends completed, no kill recorded; the last user stops it', async ({ onTestFinished }) => {
  const dataDir = await tempDir('emb-users');
  const ws = await tempDir('emb-users-ws');
  dirs.push(dataDir, ws);
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: 'done after a while', delay_ms: 6_000 }] }));
  const paths = embeddedPaths(dataDir);

  // serve first: it starts the server
  const serve = start(['serve', '--port', '0'], dataDir);
  await until('serve to print its URL', () => servedUrl(serve.out()) !== null, 30_000);
  const server = (await readEmbeddedState(paths.stateFile))!;
  expect(server.ownerPid).toBe(serve.proc.pid);
  const host = start(['host', '--name', 'emb-host', '--lease-ttl', '3000'], dataDir);
  await until('the host to start', () => host.err().includes('hosting agents'), 30_000);

  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  const running = cli.run(['run', 'take your time', '--model', `scripted:${script}`, '--cwd', ws]);
  let agentId = '';
  await until('the host to run the turn', async () => {
    agentId = parseRuns((await cli.run(['runs', '--json'])).stdout).find((r) => r.status === 'running')?.actorId ?? '';
    return agentId !== '';
  }, 30_000);

  serve.proc.kill('SIGTERM');
  await serve.exited;
  // the server serve started lives on: the host still uses it
  expect(pidAlive(server.pid)).toBe(true);
  expect(await natsAccepts(server.url, 2_000)).toBe(true);
  expect((await readEmbeddedState(paths.stateFile))?.pid).toBe(server.pid);

  const run = await running;
  expect(run.code, show(run)).toBe(0);
  expect(host.proc.exitCode).toBeNull();
  const events = parseEvents((await cli.run(['events', agentId, '--json'])).stdout);
  expect(events.filter((e) => e.type === 'actor/killed'), show(run)).toEqual([]);
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'done after a while' } });
  expect(lines(host.err()).filter((l) => /died|started it again/.test(l))).toEqual([]);

  // the host is its last user: it stops the server as it drains
  host.proc.kill('SIGTERM');
  expect(await host.exited).toBe(0);
  await until('the server to stop with its last user', () => !pidAlive(server.pid), 10_000);
  expect(existsSync(paths.stateFile)).toBe(false);
});
