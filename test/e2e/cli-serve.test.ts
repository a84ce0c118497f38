// `actorloop serve` as a real process on its data dir's embedded nats-server: it prints its URL,
// answers /v1/actors to whoever holds the token it keeps in the data dir (owner-only, the same one
// at every start), and on SIGTERM closes and exits 0 with the embedded server stopped. `--no-auth`
// answers anyone on loopback with a warning, and is one line and exit 2 anywhere else.
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { REPO_ROOT, cliEnv } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { processesWith, waitUntil } from '../helpers/processes.js';
import { ownerAuth, servedPageUrl } from '../helpers/serve-output.js';
import { gatewayTokenPath } from '../../src/server/gateway-token.js';

const stack = useCliStack({ nats: false });

/** `actorloop serve <args>` on `dataDir` as a process: what it printed so far, and its exit. */
function serve(dataDir: string, args: string[] = []) {
  // no --nats: the data dir's embedded nats-server, which serve must stop when it exits
  const child = spawn(process.execPath, ['bin/actorloop.js', 'serve', '--port', '0', '--data-dir', dataDir, ...args], {
    cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p = { child, stdout: '', stderr: '', exited: new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))) };
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (p.stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (p.stderr += s));
  return p;
}

test('serve prints its URL, answers /v1/actors only with the token it keeps in the data dir, and exits 0 on SIGTERM leaving no nats-server', async () => {
  const dataDir = await stack.dir('serve');
  const first = serve(dataDir);
  try {
    expect(await waitUntil(() => first.stdout.includes('\n') && servedPageUrl(first.stderr) !== null, 30_000), `no URL; stderr:\n${first.stderr}`).toBe(true);
    const url = first.stdout.split('\n')[0]!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    // on loopback too: another user of the machine reaches loopback as well
    const anonymous = await fetch(`${url}v1/actors`);
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { code: string } }).error.code).toBe('gateway.unauthorized');
    const res = await fetch(`${url}v1/actors`, { headers: ownerAuth(dataDir) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ actors: [], faultsAllowed: false });
    // the token is the owner's alone, like the bus logins
    expect((await stat(join(dataDir, 'gateway'))).mode & 0o777).toBe(0o700);
    expect((await stat(gatewayTokenPath(dataDir))).mode & 0o777).toBe(0o600);
    // printed once, as the page's URL with it
    const token = ownerAuth(dataDir).authorization!.replace('Bearer ', '');
    expect(servedPageUrl(first.stderr)).toBe(`${url}?token=${token}`);
    expect(first.stderr.split(token)).toHaveLength(2);
    expect(first.stdout).not.toContain(token);
    expect(await processesWith(join(dataDir, 'nats'))).not.toEqual([]);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(first.stderr).toContain('SIGTERM, closing');
    expect(await processesWith(join(dataDir, 'nats')), 'the embedded nats-server outlived serve').toEqual([]);

    // the next start keeps the token: the page's cookie and the owner's scripts still hold
    const second = serve(dataDir);
    try {
      expect(await waitUntil(() => servedPageUrl(second.stderr) !== null, 30_000), second.stderr).toBe(true);
      expect(servedPageUrl(second.stderr)).toContain(`?token=${token}`);
      second.child.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });
    } finally {
      if (second.child.exitCode === null && second.child.signalCode === null) second.child.kill('SIGKILL');
    }
  } finally {
    if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
  }
}, 90_000);

test('serve --no-auth answers loopback without the token and warns; anywhere else it is one line, exit 2, nothing started', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('serve');
  const cli = stack.cli(onTestFinished, dataDir);
  const r = await cli.run(['serve', '--host', '0.0.0.0', '--port', '0', '--no-auth', '--data-dir', dataDir]);
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toContain('--no-auth on 0.0.0.0 (not a loopback address)');
  expect(await processesWith(join(dataDir, 'nats'))).toEqual([]);
  const both = await cli.run(['serve', '--no-auth', '--token-file', join(dataDir, 'missing'), '--data-dir', dataDir]);
  expect(both.code).toBe(2);
  expect(both.stderr).toContain('--no-auth and --token-file do not go together');
  const weak = await cli.run(['serve', '--token-file', join(dataDir, 'missing'), '--data-dir', dataDir]);
  expect(weak.code).toBe(2);
  expect(weak.stderr).toContain('cannot read the token file');

  const open = serve(dataDir, ['--no-auth']);
  onTestFinished(() => void (open.child.exitCode === null && open.child.signalCode === null && open.child.kill('SIGKILL')));
  expect(await waitUntil(() => open.stdout.includes('\n') && open.stderr.includes('warning'), 30_000), open.stderr).toBe(true);
  expect(open.stderr).toContain('gateway: warning: --no-auth: any user of this machine can use this gateway and run tasks as you');
  const url = open.stdout.split('\n')[0]!;
  expect((await fetch(`${url}v1/actors`)).status).toBe(200);
  open.child.kill('SIGTERM');
  expect(await open.exited).toEqual({ code: 0, signal: null });
}, 90_000);
