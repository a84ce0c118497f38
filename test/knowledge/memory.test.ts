import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, readdir, readFile, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  MAX_MEMORY_BYTES, editMemory, memoryContextText, memoryDigest, memoryPaths, readMemory, searchMemory, writeMemory, type MemoryPaths,
} from '../../src/knowledge/memory.js';
import { ToolError } from '../../src/protocol/errors.js';
import { REPO_ROOT } from '../helpers/cli.js';

let root: string;
let ws: string;
let configDir: string;
let paths: MemoryPaths;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'actorloop-memory-'));
  ws = join(root, 'my repo');
  configDir = join(root, 'config', 'actorloop');
  await mkdir(ws);
  paths = memoryPaths(ws, configDir);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function refusal(p: Promise<unknown>): Promise<ToolError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

/** Runs `code` (an ES module body with `mem` = the memory module) in a real node process. */
function child(code: string): { done: Promise<{ code: number | null; stderr: string }>; pid: number } {
  const mod = JSON.stringify(join(REPO_ROOT, 'src', 'knowledge', 'memory.ts'));
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `const mem = await import(${mod});\n${code}`], {
    cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return { pid: proc.pid!, done: new Promise((resolve) => proc.once('close', (c) => resolve({ code: c, stderr }))) };
}

describe('memoryPaths', () => {
  it('puts both files under the user config dir, outside the workspace, keyed stably by the real path', async () => {
    expect(relative(ws, paths.memory).startsWith('..')).toBe(true);
    expect(paths.user).toBe(join(configDir, 'USER.md'));
    expect(paths.memory).toBe(join(configDir, 'memory', paths.workspaceKey, 'MEMORY.md'));
    expect(paths.workspaceKey).toMatch(/^my_repo-[0-9a-f]{12}$/);
    // the same workspace by a symlink or a relative-looking path finds the same memory
    await symlink(ws, join(root, 'link'));
    expect(memoryPaths(join(root, 'link'), configDir)).toEqual(paths);
    expect(memoryPaths(join(ws, '.', 'x', '..'), configDir)).toEqual(paths);
    // another workspace of the same name does not share it
    await mkdir(join(root, 'other', 'my repo'), { recursive: true });
    expect(memoryPaths(join(root, 'other', 'my repo'), configDir).memory).not.toBe(paths.memory);
  });
});

describe('editMemory', () => {
  it('adds entries under a heading, creating the file 0600 in 0700 dirs, and replaces and removes them', async () => {
    expect(await readMemory(paths, 'memory')).toMatchObject({ exists: false, digest: '', bytes: 0, content: '' });
    const first = await editMemory(paths, 'memory', { action: 'add', text: '  npm test needs NATS on PATH  ' });
    expect(first.changed).toBe(true);
    expect(first.before.exists).toBe(false);
    await editMemory(paths, 'memory', { action: 'add', text: 'build with\nnpm run build\n\nthen test' });
    const text = await readFile(paths.memory, 'utf8');
    expect(text).toBe('# Memory\n\n- npm test needs NATS on PATH\n- build with\n  npm run build\n  then test\n');
    expect((await stat(paths.memory)).mode & 0o777).toBe(0o600);
    expect((await stat(join(configDir, 'memory', paths.workspaceKey))).mode & 0o777).toBe(0o700);
    const snap = await readMemory(paths, 'memory');
    expect(snap).toMatchObject({ exists: true, content: text, digest: memoryDigest(text), bytes: Buffer.byteLength(text) });

    const replaced = await editMemory(paths, 'memory', { action: 'replace', oldText: 'NATS on PATH', text: 'nats-server on PATH' });
    expect(replaced.before.digest).toBe(snap.digest);
    expect(replaced.after.content).toContain('- npm test needs nats-server on PATH\n');
    const removed = await editMemory(paths, 'memory', { action: 'remove', oldText: 'build with' });
    // the whole entry goes, its indented lines with it
    expect(removed.after.content).toBe('# Memory\n\n- npm test needs nats-server on PATH\n');
    expect(await readFile(paths.memory, 'utf8')).toBe(removed.after.content);

    await editMemory(paths, 'user', { action: 'add', text: 'answers in British English' });
    expect(await readFile(paths.user, 'utf8')).toBe('# User preferences\n\n- answers in British English\n');
  });

  it('adds an entry already there only once: an edit run again after a crash does not repeat it', async () => {
    await editMemory(paths, 'memory', { action: 'add', text: 'uses pnpm' });
    const again = await editMemory(paths, 'memory', { action: 'add', text: 'uses pnpm' });
    expect(again.changed).toBe(false);
    expect(again.after.digest).toBe(again.before.digest);
    expect((await readFile(paths.memory, 'utf8')).match(/uses pnpm/g)).toHaveLength(1);
  });

  it('refuses replace and remove whose old text is missing or ambiguous, and empty or oversized edits, changing nothing', async () => {
    await editMemory(paths, 'memory', { action: 'add', text: 'port 4222' });
    await editMemory(paths, 'memory', { action: 'add', text: 'port 8222 for monitoring' });
    const before = await readFile(paths.memory, 'utf8');
    const missing = await refusal(editMemory(paths, 'memory', { action: 'replace', oldText: 'port 9999', text: 'x' }));
    expect(missing.code).toBe('memory.not_found');
    expect(missing.message).toContain('not found in MEMORY.md');
    expect(missing.hint).toContain('memory_search');
    const twice = await refusal(editMemory(paths, 'memory', { action: 'remove', oldText: 'port ' }));
    expect(twice.code).toBe('memory.ambiguous');
    expect(twice.message).toContain('found 2 times');
    expect((await refusal(editMemory(paths, 'memory', { action: 'add', text: ' \n ' }))).code).toBe('memory.empty_text');
    expect((await refusal(editMemory(paths, 'memory', { action: 'remove', oldText: '' }))).code).toBe('memory.empty_text');
    const big = await refusal(editMemory(paths, 'memory', { action: 'add', text: 'x'.repeat(MAX_MEMORY_BYTES) }));
    expect(big.code).toBe('memory.too_large');
    expect(await readFile(paths.memory, 'utf8')).toBe(before);
  });

  it('applies the edit to the file as it is now: an edit made after the model read it is kept', async () => {
    await editMemory(paths, 'memory', { action: 'add', text: 'first' });
    const seen = await readMemory(paths, 'memory');
    // a person edits the file by hand after the model read it
    await writeFile(paths.memory, `${seen.content}- added by hand\n`);
    const r = await editMemory(paths, 'memory', { action: 'add', text: 'second' });
    expect(r.before.digest).not.toBe(seen.digest);
    expect(await readFile(paths.memory, 'utf8')).toBe('# Memory\n\n- first\n- added by hand\n- second\n');
  });

  it('keeps both entries when two processes add to the same MEMORY.md at once', async () => {
    const go = join(root, 'go');
    const adder = (name: string) =>
      child(`
        const { existsSync, writeFileSync } = await import('node:fs');
        const paths = mem.memoryPaths(${JSON.stringify(ws)}, ${JSON.stringify(configDir)});
        writeFileSync(${JSON.stringify(join(root, 'ready-'))} + '${name}', '');
        while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 2));
        for (let i = 0; i < 15; i++) await mem.editMemory(paths, 'memory', { action: 'add', text: '${name} entry ' + i });
      `);
    const a = adder('alpha');
    const b = adder('beta');
    // both loaded and waiting: then they start together
    const ready = async () => (await readdir(root)).filter((f) => f.startsWith('ready-')).length === 2;
    for (const until = Date.now() + 30_000; !(await ready()) && Date.now() < until;) await new Promise((r) => setTimeout(r, 20));
    await writeFile(go, '');
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect(ra).toEqual({ code: 0, stderr: '' });
    expect(rb).toEqual({ code: 0, stderr: '' });
    const lines = (await readFile(paths.memory, 'utf8')).split('\n').filter((l) => l.startsWith('- '));
    expect(lines).toHaveLength(30);
    for (let i = 0; i < 15; i++) expect(lines).toEqual(expect.arrayContaining([`- alpha entry ${i}`, `- beta entry ${i}`]));
    await expect(stat(`${paths.memory}.lock`)).rejects.toThrow();
  });

  it('breaks a lock left by a dead process or untouched for 30 s, and waits out a live one with a clear error', async () => {
    const dead = child('');
    await dead.done;
    await mkdir(join(configDir, 'memory', paths.workspaceKey), { recursive: true });
    const lock = `${paths.memory}.lock`;
    await writeFile(lock, JSON.stringify({ pid: dead.pid, host: (await import('node:os')).hostname(), at: new Date().toISOString(), token: 'dead' }));
    await editMemory(paths, 'memory', { action: 'add', text: 'after a dead holder' }, { lockTimeoutMs: 2_000 });
    await expect(stat(lock)).rejects.toThrow();

    // a live holder (this process) whose lock is fresh: the edit waits, then says who holds it
    await writeFile(lock, JSON.stringify({ pid: process.pid, host: (await import('node:os')).hostname(), at: new Date().toISOString(), token: 'live' }));
    const locked = await refusal(editMemory(paths, 'memory', { action: 'add', text: 'blocked' }, { lockTimeoutMs: 200 }));
    expect(locked).toMatchObject({ code: 'memory.locked', retryable: true });
    expect(locked.message).toContain(`process ${process.pid}`);
    expect(locked.hint).toContain(lock);
    // the same lock, untouched for a minute: broken
    const old = new Date(Date.now() - 60_000);
    await utimes(lock, old, old);
    await editMemory(paths, 'memory', { action: 'add', text: 'after an old lock' }, { lockTimeoutMs: 2_000 });
    expect(await readFile(paths.memory, 'utf8')).toBe('# Memory\n\n- after a dead holder\n- after an old lock\n');
  });

  it('refuses a symlink planted in place of a memory file, reading and writing nothing through it', async () => {
    await mkdir(configDir, { recursive: true });
    await writeFile(join(root, 'secret'), 'do not read');
    await symlink(join(root, 'secret'), paths.user);
    expect((await refusal(readMemory(paths, 'user'))).code).toBe('memory.unreadable');
    expect((await refusal(editMemory(paths, 'user', { action: 'add', text: 'x' }))).code).toBe('memory.unreadable');
    expect(await readFile(join(root, 'secret'), 'utf8')).toBe('do not read');
  });
});

describe('writeMemory', () => {
  it('replaces the whole file only while its version is the one read', async () => {
    const created = await writeMemory(paths, 'memory', '# Memory\n\n- by hand\n', { expectedDigest: '' });
    expect(created.changed).toBe(true);
    await editMemory(paths, 'memory', { action: 'add', text: 'by an agent meanwhile' });
    const stale = await refusal(writeMemory(paths, 'memory', '# Memory\n', { expectedDigest: created.after.digest }));
    expect(stale.code).toBe('memory.conflict');
    expect(await readFile(paths.memory, 'utf8')).toContain('by an agent meanwhile');
  });
});

describe('memoryContextText', () => {
  it('gives the whole file within the budget and an index with line numbers past it, the same each time', async () => {
    await editMemory(paths, 'memory', { action: 'add', text: 'short fact' });
    const small = await readMemory(paths, 'memory');
    expect(memoryContextText(small, 4096)).toEqual({ text: small.content, summarized: false });

    const body = ['# Memory', '', '## Build', ...Array.from({ length: 40 }, (_, i) => `- fact number ${i}\n  with detail ${'d'.repeat(50)}`)].join('\n');
    await writeFile(paths.memory, `${body}\n`);
    const big = await readMemory(paths, 'memory');
    const summary = memoryContextText(big, 1024);
    expect(summary.summarized).toBe(true);
    expect(summary.text).toContain('memory_search');
    expect(summary.text).toContain('1: # Memory\n3: ## Build\n4: - fact number 0\n6: - fact number 1\n');
    expect(summary.text).not.toContain('with detail');
    expect(Buffer.byteLength(summary.text)).toBeLessThanOrEqual(1024);
    expect(summary.text).toMatch(/\(\d+ more entries not shown\)\n$/);
    expect(memoryContextText(big, 1024)).toEqual(summary);
    // a larger budget still under the file's size shows every entry
    expect(memoryContextText(big, 4000).text).toContain('- fact number 39');
  });
});

describe('searchMemory', () => {
  it('finds excerpts of both files with their versions and line ranges, best first', async () => {
    await writeFile(join(ws, 'x'), '');
    for (const t of ['the build uses esbuild', 'tests need nats-server', 'lint with eslint', 'deploy by tag', 'nats-server listens on 4222 in tests']) {
      await editMemory(paths, 'memory', { action: 'add', text: t });
    }
    await editMemory(paths, 'user', { action: 'add', text: 'run tests before commits' });
    const mem = await readMemory(paths, 'memory');
    const user = await readMemory(paths, 'user');
    const hits = await searchMemory(paths, 'NATS tests', { contextLines: 0 });
    expect(hits[0]).toEqual({ file: 'memory', path: paths.memory, digest: mem.digest, startLine: 4, endLine: 4, text: '- tests need nats-server' });
    expect(hits[1]).toMatchObject({ file: 'memory', startLine: 7, endLine: 7, text: '- nats-server listens on 4222 in tests' });
    expect(hits[2]).toEqual({ file: 'user', path: paths.user, digest: user.digest, startLine: 3, endLine: 3, text: '- run tests before commits' });
    expect(hits).toHaveLength(3);
    // with context, neighbouring matches merge into one range
    const merged = await searchMemory(paths, 'esbuild eslint', { contextLines: 1 });
    expect(merged[0]).toMatchObject({ file: 'memory', startLine: 2, endLine: 6 });
    expect(await searchMemory(paths, 'nothing-like-this')).toEqual([]);
    expect(await searchMemory(paths, 'tests', { maxResults: 1 })).toHaveLength(1);
    expect((await refusal(searchMemory(paths, '   '))).code).toBe('memory.empty_query');
  });
});
