import { execFileSync } from 'node:child_process';
import { chmod, link, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { builtinTools, listDirTool, readFileTool, searchTool, writeFileTool } from '../../src/tools/builtins/index.js';
import { findRipgrep, ripgrepSearch } from '../../src/tools/builtins/ripgrep.js';
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
  warnings = [];
});

// The host PATH, to find rg; `run` passes no PATH, so search uses its JavaScript engine there.
const HOST_PATH = process.env.PATH ?? '/usr/bin:/bin';
const rgPath = await findRipgrep({ PATH: HOST_PATH }, '/nonexistent-workspace');

// Warnings the tools logged: a search that fell back from rg says so here.
let warnings: string[] = [];
const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });

async function run<I>(tool: ToolDefinition<I>, input: I, env: Record<string, string> = {}) {
  const result = await executeTool(tool, tool.input.parse(input), toolContext(ws, undefined, { env, logger }), 10_000);
  // the file tools answer in text; bytes are for process output
  return { ...result, output: String(result.output) };
}

describe('builtinTools', () => {
  it('has the built-in tools at version 1 with their declared levels and semantics', () => {
    const tools = builtinTools();
    expect(tools.map((t) => t.name)).toEqual(['read_file', 'list_dir', 'search', 'write_file', 'apply_patch', 'shell', 'artifact_read', 'update_plan', 'ask_user', 'stop', 'get_goal', 'update_goal', 'spawn_agent', 'send_message', 'wait_agents', 'interrupt_agent', 'report', 'load_skill', 'memory', 'memory_search', 'start_job', 'job_status', 'wait_jobs', 'cancel_job', 'start_workflow']);
    expect(Object.fromEntries(tools.map((t) => [t.name, t.level]))).toEqual({
      read_file: 'read', list_dir: 'read', search: 'read', write_file: 'write', apply_patch: 'write', shell: 'execute', artifact_read: 'read',
      update_plan: 'read', ask_user: 'read', stop: 'read', get_goal: 'read', update_goal: 'read',
      spawn_agent: 'read', send_message: 'read', wait_agents: 'read', interrupt_agent: 'read', report: 'read',
      // memory changes a file outside the log: a write, which auto-edit allows and ask asks for
      load_skill: 'read', memory: 'write', memory_search: 'read',
      // a job's command runs as shell's does: under the same policy, as an execute call
      start_job: 'execute', job_status: 'read', wait_jobs: 'read', cancel_job: 'read', start_workflow: 'execute',
    });
    expect(tools.every((t) => t.version === '1')).toBe(true);
    expect(readFileTool.executionSemantics({ path: 'a' }, { workspace: ws })).toEqual({ effects: 'none', retry: 'auto' });
    expect(writeFileTool.executionSemantics({ path: 'a', content: '' }, { workspace: ws })).toEqual({
      effects: 'possible',
      recovery: { kind: 'reconcile' },
    });
    expect(typeof writeFileTool.reconcile).toBe('function');
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

describe('files that are inside by name only', () => {
  it('refuses to read or write a hard link to an outside file, leaving it as it was', async () => {
    await link(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'hard.txt'));
    const read = await run(readFileTool, { path: 'hard.txt' });
    expect(read).toMatchObject({ ok: false, errorClass: 'business', error: { code: 'tool.path_hard_link' } });
    expect(read.output).toContain('hard link');
    expect(read.output).not.toContain('hunter2');
    expect(await run(writeFileTool, { path: 'hard.txt', content: 'pwned' })).toMatchObject({ ok: false, error: { code: 'tool.path_hard_link' } });
    expect(await readFile(path.join(base, 'outside', 'secret.txt'), 'utf8')).toBe('TOKEN=hunter2\n');
    expect(await readdir(ws)).toEqual(['bin.dat', 'hard.txt', 'src']); // no temp file left
  });

  it('refuses to read or write a fifo without blocking on it', async () => {
    execFileSync('mkfifo', [path.join(ws, 'pipe')]);
    expect(await run(readFileTool, { path: 'pipe' })).toMatchObject({ ok: false, error: { code: 'tool.not_regular_file' } });
    const write = await run(writeFileTool, { path: 'pipe', content: 'x' });
    expect(write).toMatchObject({ ok: false, error: { code: 'tool.not_regular_file' } });
    expect(write.output).toContain('named pipe');
    expect((await stat(path.join(ws, 'pipe'))).isFIFO()).toBe(true);
  });

  it('refuses to write through a dangling symlink out, and creates nothing there', async () => {
    await symlink(path.join(base, 'outside', 'new', 'planted.txt'), path.join(ws, 'dangling'));
    expect(await run(writeFileTool, { path: 'dangling', content: 'x' })).toMatchObject({ ok: false, error: { code: 'tool.path_outside' } });
    expect(await run(writeFileTool, { path: 'dangling/deeper.txt', content: 'x' })).toMatchObject({ ok: false, error: { code: 'tool.path_outside' } });
    expect(await readdir(path.join(base, 'outside'))).toEqual(['secret.txt']);
  });

  it('says when a parent is a file, and keeps the mode of a file it replaces', async () => {
    expect(await run(writeFileTool, { path: 'src/a.ts/x.ts', content: 'x' })).toMatchObject({ ok: false, error: { code: 'tool.not_directory' } });
    await chmod(path.join(ws, 'src', 'a.ts'), 0o664);
    expect(await run(writeFileTool, { path: 'src/a.ts', content: 'y' })).toMatchObject({ ok: true });
    expect((await stat(path.join(ws, 'src', 'a.ts'))).mode & 0o777).toBe(0o664);
  });

  it('search skips hard-linked files in a walk and refuses one named explicitly', async () => {
    await link(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'hard.txt'));
    for (const env of [{}, { PATH: HOST_PATH }] as Record<string, string>[]) {
      expect((await run(searchTool, { pattern: 'hunter2' }, env)).output).toBe('no matches for "hunter2"');
      expect(await run(searchTool, { pattern: 'hunter2', path: 'hard.txt' }, env)).toMatchObject({
        ok: false,
        error: { code: 'tool.path_hard_link' },
      });
    }
  });
});

describe('search engines', () => {
  /** A tree with every case where ripgrep and the JavaScript walk could disagree. */
  async function awkwardTree(): Promise<void> {
    const w = (p: string, content: string | Buffer) => mkdir(path.dirname(path.join(ws, p)), { recursive: true }).then(() => writeFile(path.join(ws, p), content));
    await w('a/inner.txt', 'hello from a/\n');
    await w('a.txt', 'hello dot\n');
    await w('B.txt', 'Hello upper\nhello lower\n');
    await w('é/x.txt', 'hello accent\n');
    await w('z\u{1F600}.txt', 'hello emoji\n');
    await w('\uFFFD.txt', 'hello replacement\n');
    await w('.hidden/h.txt', 'hello hidden\n');
    await w('.gitignore', 'ignored.txt\n');
    await w('ignored.txt', 'hello ignored-by-git\n');
    await w('deep/node_modules/m.js', 'hello module\n');
    await w('node_modules_file', 'hello not a dir\n');
    await w('.git/config', 'hello git\n');
    await w('crlf.txt', 'hello crlf\r\nsecond\r\nhello$ end\r\n');
    await w('no-eol.txt', 'first\nhello last');
    await w('bom.txt', '\uFEFFhello bom\n');
    await w('latin1.txt', Buffer.from([0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0xe9, 0x0a]));
    await w('late-nul.txt', Buffer.concat([Buffer.from('hello early\n'), Buffer.alloc(9000, 0x61), Buffer.from([0]), Buffer.from('\nhello late\n')]));
    await w('early-nul.bin', Buffer.concat([Buffer.from('hello\n'), Buffer.from([0]), Buffer.from('hello\n')]));
    await w('exact.txt', Buffer.concat([Buffer.from('hello exact\n'), Buffer.alloc(1024 * 1024 - 12, 0x61)]));
    await w('over.txt', Buffer.concat([Buffer.from('hello over\n'), Buffer.alloc(1024 * 1024 - 10, 0x61)]));
    await w('long.txt', `hello ${'x'.repeat(500)}\n`);
    await w('empty.txt', '');
    await w('many.txt', 'hello many\n'.repeat(150));
    await symlink(path.join(ws, 'a.txt'), path.join(ws, 'link-in.txt'));
    await symlink(path.join(base, 'outside'), path.join(ws, 'link-out'));
    execFileSync('mkfifo', [path.join(ws, 'fifo')]);
  }

  it.each([
    ['hello', '.'],
    ['hel+o \\w+', '.'],
    ['^hello', 'src'],
    ['end$', '.'],
    ['(emoji|accent)', '.'],
    ['call(', '.'],
    ['[', '.'],
    ['hello', 'crlf.txt'],
    ['hello', 'node_modules_file'],
    ['hello', '.git'],
    ['(?<=hello )bom', '.'],
  ])('agree on %j in %j', async (pattern, where) => {
    if (!process.env.CI && !rgPath) return; // a developer machine may lack rg; CI must not
    expect(rgPath).not.toBeNull();
    await awkwardTree();
    const js = await run(searchTool, { pattern, path: where });
    const rg = await run(searchTool, { pattern, path: where }, { PATH: HOST_PATH });
    expect(rg.ok).toBe(true);
    expect(rg.output).toBe(js.output);
    expect(warnings).toEqual([]); // rg answered (or, for a JavaScript-only regex, was rightly not asked)
  });

  it('agree on the whole awkward tree, cut at the match cap in the same place', async () => {
    if (!process.env.CI && !rgPath) return;
    await awkwardTree();
    await writeFile(path.join(ws, 'more.txt'), 'hello more\n'.repeat(100));
    const js = await run(searchTool, { pattern: 'hello' });
    const rg = await run(searchTool, { pattern: 'hello' }, { PATH: HOST_PATH });
    expect(rg.output).toBe(js.output);
    const lines = js.output.split('\n');
    expect(lines).toHaveLength(201);
    expect(lines.slice(0, 8)).toEqual([
      '.hidden/h.txt:1: hello hidden',
      'B.txt:2: hello lower',
      'a/inner.txt:1: hello from a/',
      'a.txt:1: hello dot',
      'bom.txt:1: \uFEFFhello bom',
      'crlf.txt:1: hello crlf',
      'crlf.txt:3: hello$ end',
      'exact.txt:1: hello exact',
    ]);
    const rest = js.output.slice(js.output.indexOf('ignored.txt'));
    expect(rest.startsWith('ignored.txt:1: hello ignored-by-git\nlate-nul.txt:1: hello early\nlate-nul.txt:3: hello late\nlatin1.txt:1: hello \uFFFD\n')).toBe(true);
    expect(js.output).toContain(`long.txt:1: hello ${'x'.repeat(294)}…`);
    for (const absent of ['early-nul.bin', 'over.txt', 'node_modules/', 'link-in', 'link-out', '.git/', 'fifo', 'hunter2']) {
      expect(js.output).not.toContain(absent);
    }
  });

  it('uses rg when it is on the PATH given, and JavaScript otherwise', async () => {
    if (!rgPath) return;
    // The one place the engines differ on purpose: a flag only Rust's regex syntax has.
    expect((await run(searchTool, { pattern: '(?i)EXPORT CONST' }, { PATH: HOST_PATH })).output).toBe('src/a.ts:1: export const a = 1;');
    expect((await run(searchTool, { pattern: '(?i)EXPORT CONST' })).output).toBe('no matches for "(?i)EXPORT CONST"');
  });

  it('keeps shell metacharacters in the pattern and path inert', async () => {
    await writeFile(path.join(ws, 'meta.txt'), 'a; rm -rf x\n$(touch pwned)\n`touch pwned2`\n');
    for (const env of [{}, { PATH: HOST_PATH }] as Record<string, string>[]) {
      expect((await run(searchTool, { pattern: '; rm -rf', path: '.' }, env)).output).toBe('meta.txt:1: a; rm -rf x');
      expect((await run(searchTool, { pattern: '$(touch pwned)' }, env)).output).toBe('no matches for "$(touch pwned)"');
      expect((await run(searchTool, { pattern: '\\$\\(touch pwned\\)' }, env)).output).toBe('meta.txt:2: $(touch pwned)');
      expect((await run(searchTool, { pattern: '`touch pwned2`' }, env)).output).toBe('meta.txt:3: `touch pwned2`');
      expect(await run(searchTool, { pattern: 'x', path: '$(touch pwned3)' }, env)).toMatchObject({ ok: false, error: { code: 'tool.not_found' } });
      expect(await run(searchTool, { pattern: 'x', path: '; touch pwned4' }, env)).toMatchObject({ ok: false, error: { code: 'tool.not_found' } });
    }
    expect((await readdir(ws)).sort()).toEqual(['bin.dat', 'meta.txt', 'src']);
    expect(await readdir(process.cwd())).not.toContain('pwned');
  });

  it('finds rg only on absolute PATH entries outside the workspace', async () => {
    const planted = path.join(ws, 'bin', 'rg');
    await mkdir(path.dirname(planted));
    await writeFile(planted, `#!/bin/sh\ntouch ${path.join(ws, 'planted-ran')}\n`, { mode: 0o755 });
    expect(await findRipgrep({ PATH: path.join(ws, 'bin') }, ws)).toBeNull();
    expect(await findRipgrep({ PATH: 'bin' }, ws)).toBeNull();
    expect(await findRipgrep({}, ws)).toBeNull();
    expect((await run(searchTool, { pattern: 'hello' }, { PATH: `${path.join(ws, 'bin')}:bin` })).output).toContain('src/a.ts:2');
    expect(await readdir(ws)).not.toContain('planted-ran');
    if (rgPath) expect(await findRipgrep({ PATH: `bin:${path.join(ws, 'bin')}:${HOST_PATH}` }, ws)).toBe(rgPath);
  });

  it('stops rg when the call is aborted mid-search', async () => {
    if (!rgPath) return;
    await Promise.all(Array.from({ length: 50 }, (_, i) => writeFile(path.join(ws, `f${i}.txt`), 'hello\n')));
    const controller = new AbortController();
    let asked = 0;
    const search = ripgrepSearch({
      rg: rgPath,
      pattern: 'hello',
      start: ws,
      cwd: ws,
      maxFileBytes: 1024 * 1024,
      limit: 200,
      signal: controller.signal,
      logger,
      accept: async () => {
        if (++asked === 2) controller.abort(new Error('stop'));
        return true;
      },
    });
    await expect(search).rejects.toThrow('stop');
    expect(asked).toBeLessThan(50);
  });
});
