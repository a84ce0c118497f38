import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { builtinTools, listDirTool, readFileTool, searchTool, writeFileTool } from '../../src/tools/builtins/index.js';
import { executeTool } from '../../src/tools/execute.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { toolContext } from './context.js';

let base: string;
let ws: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-builtins-')));
  ws = path.join(base, 'ws');
  await mkdir(path.join(ws, 'src', 'deep'), { recursive: true });
  await mkdir(path.join(base, 'outside'));
  await writeFile(path.join(base, 'outside', 'secret.txt'), 'TOKEN=hunter2\n');
  await writeFile(path.join(ws, 'src', 'a.ts'), 'export const a = 1;\nexport function hello() {}\n');
  await writeFile(path.join(ws, 'src', 'deep', 'b.ts'), 'const hello = "world";\n');
  await writeFile(path.join(ws, 'bin.dat'), Buffer.from([0x68, 0x00, 0x65, 0x6c, 0x6c, 0x6f]));
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function run<I>(tool: ToolDefinition<I>, input: I) {
  const result = await executeTool(tool, tool.input.parse(input), toolContext(ws), 10_000);
  // the file tools answer in text; bytes are for process output
  return { ...result, output: String(result.output) };
}

describe('builtinTools', () => {
  it('has the four tools at version 1 with their declared semantics', () => {
    const tools = builtinTools();
    expect(tools.map((t) => t.name)).toEqual(['read_file', 'list_dir', 'search', 'write_file']);
    expect(tools.every((t) => t.version === '1')).toBe(true);
    expect(readFileTool.executionSemantics({ path: 'a' }, { workspace: ws })).toEqual({ effects: 'none', retry: 'auto' });
    expect(writeFileTool.executionSemantics({ path: 'a', content: '' }, { workspace: ws })).toEqual({
      effects: 'possible',
      recovery: { kind: 'manual', on: 'ask' },
    });
    expect(readFileTool.resources({ path: 'src/../src/a.ts' }, { workspace: ws })).toEqual([{ key: `path:${ws}/src/a.ts`, mode: 'read' }]);
    expect(writeFileTool.resources({ path: 'x.txt', content: '' }, { workspace: ws })).toEqual([{ key: `path:${ws}/x.txt`, mode: 'write' }]);
  });
});

describe('read_file', () => {
  it('reads a whole small file as is', async () => {
    const result = await run(readFileTool, { path: 'src/a.ts' });
    expect(result).toMatchObject({ ok: true, errorClass: 'none', output: 'export const a = 1;\nexport function hello() {}' });
  });

  it('pages long files with a header giving the total line count', async () => {
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}`);
    await writeFile(path.join(ws, 'long.txt'), lines.join('\n') + '\n');
    const first = await run(readFileTool, { path: 'long.txt' });
    expect(first.output.split('\n')[0]).toBe('[lines 1-2000 of 2500 in long.txt; pass offset=2001 to read more]');
    expect(first.output.split('\n')).toHaveLength(2001);
    const page = await run(readFileTool, { path: 'long.txt', offset: 2499, limit: 10 });
    expect(page.output).toBe('[lines 2499-2500 of 2500 in long.txt]\nline 2499\nline 2500');
    const past = await run(readFileTool, { path: 'long.txt', offset: 3000 });
    expect(past).toMatchObject({ ok: false, errorClass: 'business', error: { code: 'tool.invalid_range' } });
  });

  it('refuses binary files, directories, missing files and paths outside', async () => {
    expect(await run(readFileTool, { path: 'bin.dat' })).toMatchObject({ ok: false, error: { code: 'tool.binary_file' } });
    expect(await run(readFileTool, { path: 'src' })).toMatchObject({ ok: false, error: { code: 'tool.is_directory' } });
    expect(await run(readFileTool, { path: 'nope.txt' })).toMatchObject({ ok: false, error: { code: 'tool.not_found' } });
    expect(await run(readFileTool, { path: '../outside/secret.txt' })).toMatchObject({
      ok: false,
      errorClass: 'business',
      error: { code: 'tool.path_outside' },
    });
    await symlink(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'link.txt'));
    const viaLink = await run(readFileTool, { path: 'link.txt' });
    expect(viaLink).toMatchObject({ ok: false, error: { code: 'tool.path_outside' } });
    expect(viaLink.output).not.toContain('hunter2');
  });
});

describe('list_dir', () => {
  it('lists sorted entries with directories marked', async () => {
    expect((await run(listDirTool, { path: '.' })).output).toBe('bin.dat\nsrc/');
    expect((await run(listDirTool, { path: 'src' })).output).toBe('a.ts\ndeep/');
    expect((await run(listDirTool, {})).output).toBe('bin.dat\nsrc/');
  });

  it('caps long listings with a note', async () => {
    await mkdir(path.join(ws, 'many'));
    await Promise.all(Array.from({ length: 1005 }, (_, i) => writeFile(path.join(ws, 'many', `f${String(i).padStart(4, '0')}`), '')));
    const lines = (await run(listDirTool, { path: 'many' })).output.split('\n');
    expect(lines).toHaveLength(1001);
    expect(lines.at(-1)).toBe('[5 more entries not shown]');
  });

  it('refuses files and outside directories', async () => {
    expect(await run(listDirTool, { path: 'src/a.ts' })).toMatchObject({ ok: false, error: { code: 'tool.not_directory' } });
    expect(await run(listDirTool, { path: '..' })).toMatchObject({ ok: false, error: { code: 'tool.path_outside' } });
  });
});

describe('search', () => {
  it('finds regex matches as relpath:line: text, skipping binary files and node_modules', async () => {
    await mkdir(path.join(ws, 'node_modules', 'dep'), { recursive: true });
    await writeFile(path.join(ws, 'node_modules', 'dep', 'x.js'), 'hello\n');
    await mkdir(path.join(ws, '.git'));
    await writeFile(path.join(ws, '.git', 'HEAD'), 'hello\n');
    const result = await run(searchTool, { pattern: 'hel+o' });
    expect(result.output).toBe('src/a.ts:2: export function hello() {}\nsrc/deep/b.ts:1: const hello = "world";');
  });

  it('falls back to literal text for an invalid regex and scopes to a path', async () => {
    await writeFile(path.join(ws, 'src', 'c.ts'), 'call(\n');
    expect((await run(searchTool, { pattern: 'call(', path: 'src' })).output).toBe('src/c.ts:1: call(');
    expect((await run(searchTool, { pattern: 'hello', path: 'src/deep' })).output).toBe('src/deep/b.ts:1: const hello = "world";');
    expect((await run(searchTool, { pattern: 'absent' })).output).toBe('no matches for "absent"');
  });

  it('skips files over 1 MiB, does not follow symlinks out, and caps matches', async () => {
    await writeFile(path.join(ws, 'big.txt'), 'needle\n'.repeat(200_000));
    await symlink(path.join(base, 'outside'), path.join(ws, 'out'));
    expect((await run(searchTool, { pattern: 'needle|hunter2' })).output).toBe('no matches for "needle|hunter2"');
    await writeFile(path.join(ws, 'many.txt'), 'needle\n'.repeat(250));
    const lines = (await run(searchTool, { pattern: 'needle' })).output.split('\n');
    expect(lines).toHaveLength(201);
    expect(lines.at(-1)).toContain('stopped at 200 matches');
  });
});

describe('write_file', () => {
  it('writes atomically, creating parent directories, and reports bytes', async () => {
    const result = await run(writeFileTool, { path: 'out/new/é.txt', content: 'héllo\n' });
    expect(result).toMatchObject({ ok: true, output: 'wrote 7 bytes to out/new/é.txt' });
    expect(await readFile(path.join(ws, 'out', 'new', 'é.txt'), 'utf8')).toBe('héllo\n');
    await run(writeFileTool, { path: 'out/new/é.txt', content: 'second' });
    expect(await readFile(path.join(ws, 'out', 'new', 'é.txt'), 'utf8')).toBe('second');
    expect(await readdir(path.join(ws, 'out', 'new'))).toEqual(['é.txt']); // no temp files left
  });

  it('refuses to write outside, through a symlinked parent, or over a directory', async () => {
    await symlink(path.join(base, 'outside'), path.join(ws, 'out-link'));
    expect(await run(writeFileTool, { path: 'out-link/pwned.txt', content: 'x' })).toMatchObject({
      ok: false,
      error: { code: 'tool.path_outside' },
    });
    expect(await run(writeFileTool, { path: '../outside/pwned.txt', content: 'x' })).toMatchObject({
      ok: false,
      error: { code: 'tool.path_outside' },
    });
    expect(await readdir(path.join(base, 'outside'))).toEqual(['secret.txt']);
    expect(await run(writeFileTool, { path: 'src', content: 'x' })).toMatchObject({ ok: false, error: { code: 'tool.is_directory' } });
  });
});
