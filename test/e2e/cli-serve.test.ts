// `actorloop serve` as a real process on its data dir's embedded nats-server: it prints its URL,
// answers /v1/actors, and on SIGTERM closes and exits 0 with the embedded server stopped. A
// non-loopback bind without a token is one line and exit 2, before anything is started.
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { CliPool, REPO_ROOT, cliEnv } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { processesWith, waitUntil } from '../helpers/processes.js';

const dirs: string[] = [];
const pool = new CliPool();

afterAll(async () => {
  await pool.killAll();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

test('serve prints its URL, answers /v1/actors, and exits 0 on SIGTERM leaving no nats-server', async () => {
  const dataDir = await tempDir('serve');
  dirs.push(dataDir);
  // no --nats: the data dir's embedded nats-server, which serve must stop when it exits
  const child = spawn(process.execPath, ['bin/actorloop.js', 'serve', '--port', '0', '--data-dir', dataDir], {
    cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    expect(await waitUntil(() => stdout.includes('\n'), 30_000), `no URL; stderr:\n${stderr}`).toBe(true);
    const url = stdout.split('\n')[0]!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const res = await fetch(`${url}v1/actors`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ actors: [], faultsAllowed: false });
    expect(await processesWith(join(dataDir, 'nats'))).not.toEqual([]);
    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(stderr).toContain('SIGTERM, closing');
    expect(await processesWith(join(dataDir, 'nats')), 'the embedded nats-server outlived serve').toEqual([]);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}, 60_000);

test('serve on a non-loopback address without a token: one line, exit 2, nothing started', async ({ onTestFinished }) => {
  const dataDir = await tempDir('serve');
  dirs.push(dataDir);
  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  const r = await cli.run(['serve', '--host', '0.0.0.0', '--port', '0', '--data-dir', dataDir]);
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toContain('needs a token');
  expect(r.stderr).toContain('--token-file');
  expect(await processesWith(join(dataDir, 'nats'))).toEqual([]);
  const weak = await cli.run(['serve', '--token-file', join(dataDir, 'missing'), '--data-dir', dataDir]);
  expect(weak.code).toBe(2);
  expect(weak.stderr).toContain('cannot read the token file');
});
