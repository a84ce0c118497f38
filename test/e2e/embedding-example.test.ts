// The README's embedding example, run exactly as it is written there: a node process importing
// `actorloop` (the built package, resolved by name) hosts an agent that fixes the demo's test.
import { spawn } from 'node:child_process';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
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

test('the README embedding example runs as written and completes the demo turn', async () => {
  const code = await example();
  expect(code.split('\n').filter((l) => l.trim() !== '').length).toBeLessThanOrEqual(25);
  // a project of its own, where `actorloop` is an installed package (this repository, built)
  const project = await tempDir('embed');
  dirs.push(project);
  await mkdir(join(project, 'node_modules'), { recursive: true });
  await symlink(REPO_ROOT, join(project, 'node_modules', 'actorloop'));
  await writeFile(join(project, 'example.mjs'), code);
  // the example names examples/ relative to where it runs: the repository's
  // its temp dirs go under one of ours, removed after
  const tmp = await tempDir('embed-tmp');
  dirs.push(tmp);
  const child = spawn(process.execPath, [join(project, 'example.mjs')], {
    cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp },
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code_ = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
  clearTimeout(timer);
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
}, 90_000);

test('the published types leave the agent internals out', async () => {
  const dts = await readFile(join(REPO_ROOT, 'dist', 'actors', 'agent-actor.d.ts'), 'utf8');
  // members marked @internal in src/actors/agent-actor.ts: staging, the pump's abort, the machines
  for (const member of ['stage(d', 'turnAbort', 'get machines()', 'replay(events']) expect(dts).not.toContain(member);
  // what an embedder reads stays
  expect(dts).toContain('readonly projection: Projection');
  const index = await readFile(join(REPO_ROOT, 'dist', 'index.d.ts'), 'utf8');
  expect(index).toContain('createRuntime');
});

