import { execFileSync } from 'node:child_process';
import { chmod, link, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyPatchTool, commitChanges, type FileChange, nodePatchFileOps } from '../../src/tools/builtins/apply-patch.js';
import { executeTool } from '../../src/tools/execute.js';
import { toolContext } from './context.js';

let base: string;
let ws: string;
let outside: string;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-patch-')));
  ws = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  await mkdir(path.join(ws, 'src'), { recursive: true });
  await mkdir(outside);
  await mkdir(`${ws}-evil`);
  await writeFile(path.join(outside, 'secret.txt'), 'TOKEN=hunter2\n');
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function apply(patch: string) {
  const result = await executeTool(applyPatchTool, applyPatchTool.input.parse({ patch }), toolContext(ws), 10_000);
  return { ...result, output: String(result.output) };
}

const put = async (rel: string, content: string | Buffer) => {
  await mkdir(path.dirname(path.join(ws, rel)), { recursive: true });
  await writeFile(path.join(ws, rel), content);
};
const text = (rel: string) => readFile(path.join(ws, rel), 'utf8');
const numbered = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `line ${i + from}`);

/** Every file under a directory with its bytes, to prove a failed patch changed nothing. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath, entry.name);
    out[path.relative(dir, full)] = entry.isFile() ? (await readFile(full)).toString('base64') : entry.isDirectory() ? 'dir' : 'other';
  }
  return out;
}

describe('apply_patch', () => {
  it('declares write level, manual recovery and one write key per named file', () => {
    expect(applyPatchTool.level).toBe('write');
    expect(applyPatchTool.executionSemantics({ patch: '' }, { workspace: ws })).toEqual({
      effects: 'possible',
      recovery: { kind: 'manual', on: 'ask' },
    });
    const patch = '--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new.ts\n@@ -0,0 +1 @@\n+n\n--- a/src/a.ts\n+++ b/src/a.ts\n@@ -3 +3 @@\n-c\n+d\n';
    expect(applyPatchTool.resources({ patch }, { workspace: ws })).toEqual([
      { key: `path:${ws}/src/a.ts`, mode: 'write' },
      { key: `path:${ws}/new.ts`, mode: 'write' },
    ]);
    expect(applyPatchTool.resources({ patch: 'not a patch' }, { workspace: ws })).toEqual([]);
    expect(applyPatchTool.resources({ patch: '--- a/x\n+++ b/x\n@@ -1,5 +1 @@\n-a\n' }, { workspace: ws })).toEqual([]);
  });

  it('edits several files, creates and deletes, and summarizes', async () => {
    await put('src/a.ts', 'export const a = 1;\nexport const b = 2;\nexport const c = 3;\n');
    await put('src/b.ts', 'one\ntwo\n');
    await put('old.txt', 'bye\n');
    const patch = [
      'diff --git a/src/a.ts b/src/a.ts',
      'index 1111111..2222222 100644',
      '--- a/src/a.ts',
      '+++ b/src/a.ts',
      '@@ -1,3 +1,5 @@',
      ' export const a = 1;',
      '-export const b = 2;',
      '+export const b = 20;',
      '+export const b2 = 21;',
      '+export const b3 = 22;',
      ' export const c = 3;',
      '--- a/src/b.ts',
      '+++ b/src/b.ts',
      '@@ -2 +2 @@',
      '-two',
      '+TWO',
      '--- /dev/null',
      '+++ b/docs/new/guide.md',
      '@@ -0,0 +1,2 @@',
      '+# Guide',
      '+text',
      '--- a/old.txt',
      '+++ /dev/null',
      '@@ -1 +0,0 @@',
      '-bye',
      '',
    ].join('\n');
    const result = await apply(patch);
    expect(result).toMatchObject({ ok: true, errorClass: 'none' });
    expect(result.output).toBe('patched src/a.ts (+3 -1); patched src/b.ts (+1 -1); created docs/new/guide.md; deleted old.txt');
    expect(await text('src/a.ts')).toBe('export const a = 1;\nexport const b = 20;\nexport const b2 = 21;\nexport const b3 = 22;\nexport const c = 3;\n');
    expect(await text('src/b.ts')).toBe('one\nTWO\n');
    expect(await text('docs/new/guide.md')).toBe('# Guide\ntext\n');
    expect(await readdir(ws)).toEqual(['docs', 'src']); // deleted, and no temp files
    expect(await readdir(path.join(ws, 'src'))).toEqual(['a.ts', 'b.ts']);
  });

  it('round-trips what git diff prints: hunks, end-of-file newlines, CRLF, quoted names, empty files', async () => {
    const before: Record<string, string> = {
      'src/multi.ts': numbered(40).join('\n') + '\n',
      'no-eol.txt': 'a\nb',
      'add-eol.txt': 'x\ny',
      'drop-eol.txt': 'x\ny\n',
      'crlf.txt': 'one\r\ntwo\r\nthree\r\n',
      'gone.txt': 'going\n',
      'with space.txt': 'keep\n',
    };
    const after: Record<string, string> = {
      'src/multi.ts': numbered(40).map((l, i) => (i === 2 ? 'THREE' : i === 29 ? 'THIRTY\nthirty-b' : l)).join('\n') + '\n',
      'no-eol.txt': 'a\nB',
      'add-eol.txt': 'x\ny\n',
      'drop-eol.txt': 'x\ny',
      'crlf.txt': 'one\r\nTWO\r\nthree\r\n',
      'new dir/café.txt': 'nouveau\n',
      'empty-new.txt': '',
      'with space.txt': 'kept\n',
    };
    for (const [rel, content] of Object.entries(before)) await put(rel, content);
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'core.autocrlf=false', '-c', 'core.quotePath=true', '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
        cwd: ws,
        encoding: 'utf8',
      });
    git('init', '-q');
    git('add', '-A');
    git('commit', '-qm', 'before');
    for (const [rel, content] of Object.entries(after)) await put(rel, content);
    await unlink(path.join(ws, 'gone.txt'));
    git('add', '-N', 'new dir/café.txt', 'empty-new.txt');
    const patch = git('diff');
    expect(patch).toContain('"b/new dir/caf\\303\\251.txt"');
    expect(patch).toContain('\\ No newline at end of file');
    git('reset', '-q');
    for (const rel of Object.keys(after)) await rm(path.join(ws, rel), { force: true });
    await rm(path.join(ws, 'new dir'), { recursive: true });
    for (const [rel, content] of Object.entries(before)) await put(rel, content);

    const result = await apply(patch);
    expect(result, `${patch}\n=> ${result.output}`).toMatchObject({ ok: true });
    for (const [rel, content] of Object.entries(after)) expect(await text(rel)).toBe(content);
    await expect(stat(path.join(ws, 'gone.txt'))).rejects.toThrow();
    expect(result.output).toContain('patched src/multi.ts (+3 -2)');
    expect(result.output).toContain('created new dir/café.txt');
    expect(result.output).toContain('created empty-new.txt');
    expect(result.output).toContain('deleted gone.txt');
    expect(result.output).toContain('patched with space.txt (+1 -1)');
  });

  it('reads diff -u output with timestamps after the names', async () => {
    await mkdir(path.join(base, 'a'));
    await mkdir(path.join(base, 'b'));
    await writeFile(path.join(base, 'a', 'f.txt'), 'keep\nold\nkeep\n');
    await writeFile(path.join(base, 'b', 'f.txt'), 'keep\nnew\nkeep\n');
    let patch = '';
    try {
      execFileSync('diff', ['-u', 'a/f.txt', 'b/f.txt'], { cwd: base, encoding: 'utf8' });
    } catch (err) {
      patch = (err as { stdout: string }).stdout; // diff exits 1 when the files differ
    }
    expect(patch).toMatch(/^--- a\/f\.txt\t\d{4}-/);
    await put('f.txt', 'keep\nold\nkeep\n');
    expect(await apply(patch)).toMatchObject({ ok: true, output: 'patched f.txt (+1 -1)' });
    expect(await text('f.txt')).toBe('keep\nnew\nkeep\n');
  });

  it('keeps a file without a final newline that way when the patch forgets the marker', async () => {
    await put('a.txt', 'a\nb');
    expect(await apply('--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n')).toMatchObject({ ok: true });
    expect(await text('a.txt')).toBe('a\nc');
    expect(await apply('--- a/a.txt\n+++ b/a.txt\n@@ -2 +2,2 @@\n c\n+d\n')).toMatchObject({ ok: true });
    expect(await text('a.txt')).toBe('a\nc\nd');
    // With the markers the patch decides: here it adds the newline.
    expect(await apply('--- a/a.txt\n+++ b/a.txt\n@@ -3 +3 @@\n-d\n\\ No newline at end of file\n+d\n')).toMatchObject({ ok: true });
    expect(await text('a.txt')).toBe('a\nc\nd\n');
  });

  it('finds a hunk whose line numbers are off, and says where when it is too far', async () => {
    await put('f.txt', numbered(300).join('\n') + '\n');
    const off = '--- a/f.txt\n+++ b/f.txt\n@@ -15,3 +15,3 @@\n line 20\n-line 21\n+LINE 21\n line 22\n@@ -45,2 +45,2 @@\n-line 50\n+LINE 50\n line 51\n';
    expect(await apply(off)).toMatchObject({ ok: true, output: 'patched f.txt (+2 -2)' });
    expect((await text('f.txt')).split('\n').slice(19, 22)).toEqual(['line 20', 'LINE 21', 'line 22']);
    expect((await text('f.txt')).split('\n')[49]).toBe('LINE 50');
    const far = await apply('--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n-line 250\n+LINE 250\n line 251\n');
    expect(far).toMatchObject({ ok: false, error: { code: 'tool.patch_mismatch' } });
    expect(far.output).toContain('its lines are at line 250');
    expect(far.output).toContain('fix the line numbers');
  });

  it('changes no file at all when one hunk of one file does not apply', async () => {
    await put('a.txt', 'a1\na2\na3\n');
    await put('b.txt', numbered(30).join('\n') + '\n');
    await put('c.txt', 'c\n');
    const before = await snapshot(base);
    const patch = [
      '--- a/a.txt',
      '+++ b/a.txt',
      '@@ -1 +1 @@',
      '-a1',
      '+A1',
      '--- /dev/null',
      '+++ b/created/deep/n.txt',
      '@@ -0,0 +1 @@',
      '+n',
      '--- a/c.txt',
      '+++ /dev/null',
      '@@ -1 +0,0 @@',
      '-c',
      '--- a/b.txt',
      '+++ b/b.txt',
      '@@ -2,2 +2,2 @@',
      '-line 2',
      '+LINE 2',
      ' line 3',
      '@@ -20,3 +20,3 @@',
      ' line 20',
      '-line 21 (as the model remembers it)',
      '+LINE 21',
      ' line 22',
    ].join('\n');
    const result = await apply(patch);
    expect(result).toMatchObject({ ok: false, errorClass: 'business', error: { code: 'tool.patch_mismatch' } });
    expect(result.output).toContain('hunk 2 of b.txt (@@ -20,3 +20,3 @@, patch line 20) does not apply');
    expect(result.output).toContain('21: "line 21 (as the model remembers it)"');
    expect(result.output).toContain('21: "line 21"');
    expect(result.output).toContain('Re-read b.txt with read_file');
    expect(result.output).toContain('No file was changed');
    expect(await snapshot(base)).toEqual(before);
  });

  it('applies two sections for one file in sequence', async () => {
    await put('f.txt', 'a\nb\nc\n');
    const patch = '--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/./f.txt\n+++ b/./f.txt\n@@ -1,2 +1,2 @@\n A\n-b\n+B\n';
    expect(await apply(patch)).toMatchObject({ ok: true, output: 'patched f.txt (+2 -2)' });
    expect(await text('f.txt')).toBe('A\nB\nc\n');
    const fleeting = '--- /dev/null\n+++ b/tmp.txt\n@@ -0,0 +1 @@\n+t\n--- a/tmp.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-t\n';
    expect(await apply(fleeting)).toMatchObject({ ok: true, output: 'the patch changes nothing' });
    expect(await readdir(ws)).toEqual(['f.txt', 'src']);
  });

  it('keeps CRLF files CRLF, whether or not the patch lines carry the CR', async () => {
    await put('w.txt', 'one\r\ntwo\r\nthree\r\n');
    expect(await apply('--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n+2b\n three\n')).toMatchObject({ ok: true });
    expect(await readFile(path.join(ws, 'w.txt'), 'utf8')).toBe('one\r\nTWO\r\n2b\r\nthree\r\n');
    // The whole patch converted to CRLF in transit applies to an LF file too.
    await put('u.txt', 'x\ny\n');
    expect(await apply('--- a/u.txt\r\n+++ b/u.txt\r\n@@ -2 +2 @@\r\n-y\r\n+Y\r\n')).toMatchObject({ ok: true });
    expect(await text('u.txt')).toBe('x\nY\n');
  });

  it('tolerates blank lines between hunks and a context line whose space was trimmed', async () => {
    await put('f.txt', 'a\n\nb\nc\nd\ne\nf\ng\n');
    const patch = '--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-a\n+A\n\n b\n\n@@ -7,2 +7,2 @@\n f\n-g\n+G\n';
    expect(await apply(patch)).toMatchObject({ ok: true });
    expect(await text('f.txt')).toBe('A\n\nb\nc\nd\ne\nf\nG\n');
  });

  it('keeps the mode of a patched file', async () => {
    await put('run.sh', '#!/bin/sh\necho hi\n');
    await chmod(path.join(ws, 'run.sh'), 0o755);
    expect(await apply('--- a/run.sh\n+++ b/run.sh\n@@ -2 +2 @@\n-echo hi\n+echo bye\n')).toMatchObject({ ok: true });
    expect((await stat(path.join(ws, 'run.sh'))).mode & 0o777).toBe(0o755);
  });

  it.each([
    ['a parent escape', '../outside/secret.txt', 'tool.path_outside'],
    ['an absolute outside path', '/etc/passwd', 'tool.path_outside'],
    ['a sibling sharing the prefix', '../ws-evil/x.txt', 'tool.path_outside'],
    ['a symlink to an outside file', 'link.txt', 'tool.path_outside'],
    ['a file under a symlinked outside directory', 'out-dir/secret.txt', 'tool.path_outside'],
    ['a hard link to an outside file', 'hard.txt', 'tool.path_hard_link'],
  ])('refuses to edit %s', async (_what, target, code) => {
    await symlink(path.join(outside, 'secret.txt'), path.join(ws, 'link.txt'));
    await symlink(outside, path.join(ws, 'out-dir'));
    await link(path.join(outside, 'secret.txt'), path.join(ws, 'hard.txt'));
    await writeFile(path.join(`${ws}-evil`, 'x.txt'), 'TOKEN=hunter2\n');
    await put('ok.txt', 'fine\n');
    const before = await snapshot(base);
    const patch = `--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-fine\n+changed\n--- a/${target}\n+++ b/${target}\n@@ -1 +1 @@\n-TOKEN=hunter2\n+TOKEN=pwned\n`;
    const result = await apply(patch);
    expect(result).toMatchObject({ ok: false, error: { code } });
    expect(result.output).not.toContain('hunter2');
    expect(await snapshot(base)).toEqual(before);
  });

  it.each([
    ['a parent escape', '../outside/new.txt'],
    ['a symlinked outside directory', 'out-dir/new.txt'],
    ['a dangling symlink out', 'dangling'],
    ['a path under a dangling symlink out', 'dangling/deeper.txt'],
  ])('refuses to create a file through %s, creating nothing', async (_what, target) => {
    await symlink(outside, path.join(ws, 'out-dir'));
    await symlink(path.join(outside, 'planted', 'p.txt'), path.join(ws, 'dangling'));
    const before = await snapshot(base);
    const result = await apply(`--- /dev/null\n+++ b/${target}\n@@ -0,0 +1 @@\n+x\n`);
    expect(result).toMatchObject({ ok: false, error: { code: 'tool.path_outside' } });
    expect(await snapshot(base)).toEqual(before);
  });

  it('refuses fifos, binary files, creating what exists, and editing what does not', async () => {
    execFileSync('mkfifo', [path.join(ws, 'pipe')]);
    await put('bin.dat', Buffer.from([0x61, 0x00, 0x0a]));
    await put('here.txt', 'here\n');
    await put('two.txt', 'a\nb\n');
    const cases: Array<[string, string]> = [
      ['--- a/pipe\n+++ b/pipe\n@@ -1 +1 @@\n-a\n+b\n', 'tool.not_regular_file'],
      ['--- a/bin.dat\n+++ b/bin.dat\n@@ -1 +1 @@\n-a\n+b\n', 'tool.binary_file'],
      ['--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+x\n', 'tool.patch_mismatch'],
      ['--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n', 'tool.not_found'],
      ['--- a/two.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n', 'tool.patch_mismatch'],
      ['--- a/src\n+++ b/src\n@@ -1 +1 @@\n-a\n+b\n', 'tool.is_directory'],
    ];
    for (const [patch, code] of cases) expect(await apply(patch), patch).toMatchObject({ ok: false, error: { code } });
    expect(await text('here.txt')).toBe('here\n');
    expect(await text('two.txt')).toBe('a\nb\n');
  });

  it.each([
    ['an empty patch', '', 'the patch is empty'],
    ['a blank patch', '  \n\n', 'the patch is empty'],
    ['prose', 'please change line 3 to foo\n', 'has no file sections'],
    ['a hunk with no file header', '@@ -1 +1 @@\n-a\n+b\n', 'line 1: a hunk comes before any file header'],
    ['a missing +++ header', '--- a/x\n@@ -1 +1 @@\n-a\n+b\n', 'line 2: expected a "+++ b/path" header'],
    ['a malformed hunk header', '--- a/x\n+++ b/x\n@@ -1,a +1 @@\n-a\n+b\n', 'line 3: malformed hunk header'],
    ['a section with no hunks', 'diff --git a/x b/x\n--- a/x\n+++ b/x\n', 'line 2: the section for x has no hunks'],
    ['a hunk longer than its counts', '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n', 'line 6: the hunk at line 3 (@@ -1 +1 @@) has more lines'],
    ['a hunk shorter than its counts', '--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\n', 'line 6: the hunk at line 3 (@@ -1,3 +1,3 @@) ends after 1 old and 1 new lines'],
    ['a body line without a prefix', '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\nc\n', 'line 6: the hunk at line 3'],
    ['a rename', '--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n', 'renames are not supported'],
    ['a git rename', 'diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n', 'line 3: renames and copies are not supported'],
    ['a binary patch', 'diff --git a/x b/x\nBinary files a/x and b/x differ\n', 'line 2: binary patches are not supported'],
    ['a mode change', 'diff --git a/x b/x\nold mode 100644\nnew mode 100755\n', 'mode-only changes are not supported'],
    ['a misplaced marker', '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n+b\n c\n', 'line 5: "\\ No newline'],
    ['context in a created file', '--- /dev/null\n+++ b/x\n@@ -1 +1,2 @@\n a\n+b\n', 'line 3: x is created'],
    ['two /dev/null headers', '--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n', 'both headers are /dev/null'],
  ])('refuses %s as invalid, saying where', async (_what, patch, message) => {
    const result = await apply(patch);
    expect(result).toMatchObject({ ok: false, errorClass: 'business', error: { code: 'tool.patch_invalid' } });
    expect(result.output).toContain(message);
  });

  it('refuses NUL and control characters in header paths', async () => {
    // The last is git's quoting of a name with a tab: unquoted, it is a control character too.
    for (const header of ['b/a\u0000b', 'b/a\u001bb', '"b/a\\tb"']) {
      const result = await apply(`--- /dev/null\n+++ ${header}\n@@ -0,0 +1 @@\n+x\n`);
      expect(result, header).toMatchObject({ ok: false, error: { code: 'tool.path_invalid' } });
    }
    expect(await readdir(ws)).toEqual(['src']);
  });
});

describe('commitChanges', () => {
  async function changes(): Promise<FileChange[]> {
    await put('a.txt', 'a\n');
    await put('c.txt', 'c\n');
    return [
      { file: path.join(ws, 'a.txt'), shown: 'a.txt', before: Buffer.from('a\n'), after: Buffer.from('A\n'), mode: 0o644 },
      { file: path.join(ws, 'new', 'deep', 'n.txt'), shown: 'new/deep/n.txt', before: null, after: Buffer.from('n\n'), mode: undefined },
      { file: path.join(ws, 'c.txt'), shown: 'c.txt', before: Buffer.from('c\n'), after: null, mode: 0o644 },
      { file: path.join(ws, 'z.txt'), shown: 'z.txt', before: null, after: Buffer.from('z\n'), mode: undefined },
    ];
  }

  it('restores the files already written and removes new directories when a write fails', async () => {
    const list = await changes();
    const before = await snapshot(ws);
    const failing = {
      ...nodePatchFileOps,
      replace: async (file: string, bytes: Uint8Array, mode?: number) => {
        if (file.endsWith('z.txt')) throw new Error('disk full');
        await nodePatchFileOps.replace(file, bytes, mode);
      },
    };
    const err = await commitChanges(list, failing).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'tool.patch_write_failed' });
    expect((err as Error).message).toContain('writing z.txt failed (disk full); every file already written was restored');
    expect(await snapshot(ws)).toEqual(before);
  });

  it('deletes last, and names the files it could not restore', async () => {
    const list = await changes();
    const calls: string[] = [];
    const failing = {
      ...nodePatchFileOps,
      replace: async (file: string, bytes: Uint8Array, mode?: number) => {
        calls.push(`replace ${path.basename(file)} ${Buffer.from(bytes).toString().trim()}`);
        if (file.endsWith('a.txt') && Buffer.from(bytes).toString() === 'a\n') throw new Error('read-only now');
        await nodePatchFileOps.replace(file, bytes, mode);
      },
      remove: async (file: string) => {
        calls.push(`remove ${path.basename(file)}`);
        if (file.endsWith('c.txt')) throw new Error('busy');
        await nodePatchFileOps.remove(file);
      },
    };
    const err = await commitChanges(list, failing).catch((e: unknown) => e);
    expect(calls.slice(0, 4)).toEqual(['replace a.txt A', 'replace n.txt n', 'replace z.txt z', 'remove c.txt']);
    expect((err as Error).message).toContain('could not be restored and may hold the patched content: a.txt; check them with read_file');
    expect(await text('a.txt')).toBe('A\n');
    await expect(stat(path.join(ws, 'new'))).rejects.toThrow();
    await expect(stat(path.join(ws, 'z.txt'))).rejects.toThrow();
  });
});
