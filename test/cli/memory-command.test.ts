import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryCommand } from '../../src/cli/commands/memory.js';
import type { Out } from '../../src/cli/output.js';
import { loadConfig } from '../../src/config/config.js';
import { editMemory, memoryPaths, readMemory, type MemoryPaths } from '../../src/knowledge/memory.js';
import { ConfigError } from '../../src/protocol/errors.js';
import { REPO_ROOT } from '../helpers/cli.js';

let root: string;
let ws: string;
let env: NodeJS.ProcessEnv;
let paths: MemoryPaths;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'actorloop-memory-cli-'));
  ws = join(root, 'ws');
  await mkdir(ws);
  env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: join(root, 'home'), XDG_CONFIG_HOME: join(root, 'xdg') };
  paths = memoryPaths(ws, join(root, 'xdg', 'actorloop'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function capture(): { out: Out; stdout: () => string; stderr: () => string } {
  let so = '';
  let se = '';
  const sink = (add: (s: string) => void) => new Writable({ write(chunk, _enc, cb) { add(String(chunk)); cb(); } });
  return { out: { stdout: sink((s) => (so += s)), stderr: sink((s) => (se += s)) }, stdout: () => so, stderr: () => se };
}

async function editorScript(body: string): Promise<string> {
  const file = join(root, 'editor.sh');
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

describe('actorloop memory', () => {
  it("shows both files of the workspace, under the user's config dir: path, version, size, contents", async () => {
    await editMemory(paths, 'memory', { action: 'add', text: 'tests need nats-server' });
    const c = capture();
    expect(await memoryCommand({}, loadConfig({ cwd: ws }, env), c.out)).toBe(0);
    const mem = await readMemory(paths, 'memory');
    expect(c.stdout()).toBe([
      `workspace: ${ws}`, '',
      `MEMORY.md (this workspace): ${paths.memory}`, `  ${mem.digest} · ${mem.bytes} bytes`, '', '# Memory', '', '- tests need nats-server', '',
      `USER.md (you, in every workspace): ${join(root, 'xdg', 'actorloop', 'USER.md')}`,
      '  does not exist yet: agents write it with the memory tool; `actorloop memory --edit user` writes it by hand', '',
    ].join('\n'));
  });

  it('prints one JSON object with --json, ~/.config/actorloop without XDG_CONFIG_HOME', async () => {
    delete env.XDG_CONFIG_HOME;
    const home = memoryPaths(ws, join(root, 'home', '.config', 'actorloop'));
    await editMemory(home, 'user', { action: 'add', text: 'short answers' });
    const c = capture();
    expect(await memoryCommand({ json: true }, loadConfig({ cwd: ws }, env), c.out)).toBe(0);
    const user = await readMemory(home, 'user');
    expect(JSON.parse(c.stdout())).toEqual({
      workspace: ws, workspaceKey: home.workspaceKey,
      memory: { path: home.memory, exists: false, digest: '', bytes: 0, content: '' },
      user: { path: home.user, exists: true, digest: user.digest, bytes: user.bytes, content: '# User preferences\n\n- short answers\n' },
    });
  });

  it('--edit opens $EDITOR on MEMORY.md, created with its heading, and saves what was written', async () => {
    env.EDITOR = await editorScript(`printf '%s\\n' '- edited by hand' >> "$1"`);
    const c = capture();
    expect(await memoryCommand({ edit: true }, loadConfig({ cwd: ws }, env), c.out)).toBe(0);
    expect(await readFile(paths.memory, 'utf8')).toBe('# Memory\n- edited by hand\n');
    expect(c.stderr()).toContain(`saved ${paths.memory}`);
    expect(c.stdout()).toContain('- edited by hand');
    // the copy the editor worked on is gone
    expect((await readdir(dirname(paths.memory))).filter((f) => f.includes('.edit-'))).toEqual([]);

    // EDITOR may carry arguments: the file comes after them
    env.EDITOR = `${await editorScript(`printf '%s\\n' "- $1" >> "$2"`)} 'given as an argument'`;
    await memoryCommand({ edit: 'user' }, loadConfig({ cwd: ws }, env), capture().out);
    expect(await readFile(paths.user, 'utf8')).toBe('# User preferences\n- given as an argument\n');
  });

  it('--edit keeps the person’s version beside the file when an agent changed it meanwhile', async () => {
    env.MEM = paths.memory;
    env.EDITOR = await editorScript(`printf '%s\\n' '- by the person' >> "$1"\nprintf '%s\\n' '- by an agent' >> "$MEM"`);
    const err = await memoryCommand({ edit: true }, loadConfig({ cwd: ws }, env), capture().out).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('cli.memory_not_saved');
    expect(await readFile(paths.memory, 'utf8')).toBe('# Memory\n- by an agent\n');
    const kept = (await readdir(dirname(paths.memory))).filter((f) => f.includes('.edit-'));
    expect(kept).toHaveLength(1);
    expect((err as ConfigError).message).toContain(kept[0]);
    expect(await readFile(join(dirname(paths.memory), kept[0]!), 'utf8')).toBe('# Memory\n- by the person\n');
  });

  it('--edit without EDITOR or VISUAL says to set EDITOR; a failing editor changes nothing', async () => {
    const err = await memoryCommand({ edit: true }, loadConfig({ cwd: ws }, env), capture().out).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'cli.no_editor', hint: expect.stringContaining('set EDITOR') });
    env.VISUAL = await editorScript(`printf '%s\\n' '- half' >> "$1"; exit 3`);
    const failed = await memoryCommand({ edit: true }, loadConfig({ cwd: ws }, env), capture().out).then(() => null, (e: unknown) => e);
    expect(failed).toMatchObject({ code: 'cli.editor_failed' });
    expect(await readFile(paths.memory, 'utf8')).toBe('# Memory\n');
  });

  it('runs as a real process: --cwd and --json, exit 2 for a bad --edit value or a missing directory', async () => {
    const main = JSON.stringify(join(REPO_ROOT, 'src', 'cli', 'main.ts'));
    const cli = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `const { main } = await import(${main}); process.exitCode = await main(process.argv.slice(1));`, ...args], {
          cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.once('close', (code) => resolve({ code, stdout, stderr }));
      });
    await editMemory(paths, 'memory', { action: 'add', text: 'from the library' });
    const shown = await cli(['memory', '--cwd', ws, '--json']);
    expect(shown.stderr).toBe('');
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).memory).toMatchObject({ path: paths.memory, exists: true, content: '# Memory\n\n- from the library\n' });
    const bad = await cli(['memory', '--cwd', ws, '--edit', 'notes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--edit takes memory');
    const missing = await cli(['memory', '--cwd', join(root, 'nope')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('is not a directory');
  });
});
