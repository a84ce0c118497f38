// The README's embedding example, run exactly as it is written there: a node process importing
// `actorloop` (the packed package, installed in a project of its own) hosts an agent that fixes
// the demo's test.
import { spawn } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { REPO_ROOT } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** The first ```js block after the "## Embedding" heading. */
async function example(): Promise<string> {
  const readme = await readFile(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Embedding\n'));
  const m = /```js\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('no js block in the Embedding section');
  return m[1]!;
}

/** What running `cmd` printed and how it exited; killed after `timeoutMs`. */
async function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const code = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
    return { code, out, err };
  } finally {
    clearTimeout(timer);
  }
}

/** npm's words for a registry it cannot reach: the test is skipped then, not failed. */
const OFFLINE = /E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|NOTCACHED)/;

test('the README embedding example runs as written from the packed package, installed, and completes the demo turn', async (ctx) => {
  const code = await example();
  expect(code.split('\n').filter((l) => l.trim() !== '').length).toBeLessThanOrEqual(25);
  // a project of its own, outside the repository, where `actorloop` is the packed tarball, installed
  const project = await tempDir('embed');
  dirs.push(project);
  const packed = await run('npm', ['pack', '--silent', '--pack-destination', project], REPO_ROOT, process.env, 60_000);
  expect(packed.code, packed.err).toBe(0);
  const tarball = join(project, packed.out.trim().split('\n').at(-1)!);
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'embed-example', version: '1.0.0', private: true, type: 'module' }));
  const installed = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], project, process.env, 120_000);
  if (installed.code !== 0 && OFFLINE.test(installed.err)) ctx.skip(`the npm registry is unreachable, so the packed package cannot be installed: ${installed.err.trim().split('\n')[0]}`);
  expect(installed.code, installed.err).toBe(0);
  // both tiers resolve by name from the installed package; the agent actor from neither
  const tiers = await run(process.execPath, ['--input-type=module', '-e', `
    const root = await import('actorloop'); const host = await import('actorloop/host');
    console.log(typeof root.createRuntime, typeof host.Supervisor, typeof host.createJetStreamPorts, 'AgentActor' in root || 'AgentActor' in host, 'Supervisor' in root);
  `], project, process.env, 30_000);
  expect(tiers.out.trim(), tiers.err).toBe('function function function false false');
  await writeFile(join(project, 'example.mjs'), code);
  // its temp dirs go under one of ours, removed after
  const tmp = await tempDir('embed-tmp');
  dirs.push(tmp);
  // run where the project is: nothing of the repository is in reach but the installed package
  const { code: code_, out, err } = await run(process.execPath, [join(project, 'example.mjs')], project, { ...process.env, TMPDIR: tmp }, 60_000);
  expect(code_, `${err}\n${out}`).toBe(0);
  const lines = out.trim().split('\n');
  expect(lines[0]).toMatch(/^\d+ inbox\/received$/);
  expect(lines.filter((l) => / turn\/end$/.test(l))).toHaveLength(1);
  expect(lines.filter((l) => / tool\/result$/.test(l)).length).toBeGreaterThanOrEqual(5);
  expect(lines.at(-1)).toMatch(/^completed Fixed\./);
  // the fix is in the workspace copy the example made under its temp dir
  const { readdir } = await import('node:fs/promises');
  const ws = (await readdir(tmp)).find((d) => d.startsWith('ws-'))!;
  expect(await readFile(join(tmp, ws, 'src', 'slug.js'), 'utf8')).toContain('/\\s+/g');
  // runtime.close() stopped the embedded nats-server it started
  const { readdirSync, readFileSync } = await import('node:fs');
  const servers = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(tmp);
    } catch {
      return false;
    }
  });
  expect(servers).toEqual([]);
}, 240_000);

test('the published types leave the agent internals out', async () => {
  const dts = await readFile(join(REPO_ROOT, 'dist', 'actors', 'actor', 'agent-actor.d.ts'), 'utf8');
  // members marked @internal in src/actors/actor/agent-actor.ts: staging, the pump's abort, the machines
  for (const member of ['stage(d', 'turnAbort', 'get machines()', 'replay(events']) expect(dts).not.toContain(member);
  // what an embedder reads stays
  expect(dts).toContain('readonly projection: Projection');
  const index = await readFile(join(REPO_ROOT, 'dist', 'index.d.ts'), 'utf8');
  expect(index).toContain('createRuntime');
  // the actor is reachable through neither entry: a host reads it as a HostedAgent
  const host = await readFile(join(REPO_ROOT, 'dist', 'host.d.ts'), 'utf8');
  for (const entry of [index, host]) expect(entry).not.toMatch(/\bAgentActor\b(?!Ref)/);
  expect(host).toContain('HostedAgent');
});

