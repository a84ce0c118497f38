import { execFileSync } from 'node:child_process';
import { link, lstat, mkdir, mkdtemp, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolError } from '../../src/protocol/errors.js';
import { assertOwnFile, isInside, openForRead, resolveInWorkspace, writeTarget } from '../../src/tools/workspace-path.js';

let base: string;
let ws: string;
let outside: string;

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-ws-')));
  ws = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  await mkdir(path.join(ws, 'src'), { recursive: true });
  await mkdir(outside);
  await mkdir(`${ws}-evil`);
  await writeFile(path.join(ws, 'src', 'a.txt'), 'a');
  await writeFile(path.join(outside, 'secret.txt'), 'secret');
  await writeFile(path.join(`${ws}-evil`, 'x.txt'), 'x');
  await symlink(path.join(outside, 'secret.txt'), path.join(ws, 'secret-link'));
  await symlink(outside, path.join(ws, 'out-dir'));
  await symlink(path.join(outside, 'not-yet.txt'), path.join(ws, 'dangling-out'));
  await symlink(path.join(ws, 'src'), path.join(ws, 'src-link'));
  await link(path.join(outside, 'secret.txt'), path.join(ws, 'hard.txt'));
  execFileSync('mkfifo', [path.join(ws, 'pipe')]);
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(requested: string, mustExist = false): Promise<ToolError> {
  const err = await resolveInWorkspace(ws, requested, { mustExist }).then(
    (p) => new Error(`resolved to ${p}`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

describe('resolveInWorkspace', () => {
  it('resolves relative and absolute paths inside the workspace', async () => {
    expect(await resolveInWorkspace(ws, 'src/a.txt', { mustExist: true })).toBe(path.join(ws, 'src', 'a.txt'));
    expect(await resolveInWorkspace(ws, path.join(ws, 'src'))).toBe(path.join(ws, 'src'));
    expect(await resolveInWorkspace(ws, '.')).toBe(ws);
    expect(await resolveInWorkspace(ws, 'src/../src/a.txt')).toBe(path.join(ws, 'src', 'a.txt'));
    expect(await resolveInWorkspace(ws, 'new/dir/file.txt')).toBe(path.join(ws, 'new', 'dir', 'file.txt'));
  });

  it('follows symlinks that stay inside', async () => {
    expect(await resolveInWorkspace(ws, 'src-link/a.txt', { mustExist: true })).toBe(path.join(ws, 'src', 'a.txt'));
  });

  it('says when a path does not exist and must', async () => {
    const err = await refusal('src/missing.txt', true);
    expect(err.code).toBe('tool.not_found');
    expect(err.message).toContain('src/missing.txt');
  });

  it.each([
    ['a bare parent escape', '../x'],
    ['a parent escape', '../outside/secret.txt'],
    ['a deep parent escape', 'src/../../outside'],
    ['an absolute outside path', '/etc/passwd'],
    ['a sibling directory sharing the prefix', '../ws-evil/x.txt'],
    ['a symlink to an outside file', 'secret-link'],
    ['a file under a symlinked outside directory', 'out-dir/secret.txt'],
    ['a new file under a symlinked outside directory', 'out-dir/new.txt'],
    ['a dangling symlink pointing outside', 'dangling-out'],
    ['a path below a dangling symlink pointing outside', 'dangling-out/x/y.txt'],
    ['a root path', '/'],
  ])('refuses %s', async (_what, requested) => {
    const err = await refusal(requested);
    expect(err.code).toBe('tool.path_outside');
    expect(err.message).toContain('outside the workspace');
  });

  it('refuses the sibling-prefix directory given absolutely', async () => {
    expect((await refusal(path.join(`${ws}-evil`, 'x.txt'))).code).toBe('tool.path_outside');
  });

  it.each(['a\u0000b', 'a\nb', 'src/\u001b[31m', 'a\u007f', '', '  '])('refuses %j as invalid', async (requested) => {
    expect((await refusal(requested)).code).toBe('tool.path_invalid');
  });
});

describe('isInside', () => {
  it('requires containment on a separator boundary', () => {
    expect(isInside('/work/a', '/work/a')).toBe(true);
    expect(isInside('/work/a', '/work/a/b')).toBe(true);
    expect(isInside('/work/a', '/work/ab')).toBe(false);
    expect(isInside('/work/a', '/work')).toBe(false);
    expect(isInside('/', '/etc')).toBe(true);
  });
});

async function thrown(p: Promise<unknown>): Promise<ToolError> {
  const err = await p.then(
    () => new Error('did not throw'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  return err as ToolError;
}

describe('files inside by name only', () => {
  it('refuses a hard link for reading and writing, saying why and what to do', async () => {
    const read = await thrown(openForRead(ws, 'hard.txt', 'read_file'));
    expect(read.code).toBe('tool.path_hard_link');
    expect(read.message).toBe(
      '"hard.txt" is a hard link (the same file has 2 names, and one may be outside the workspace), so read_file refuses to read it; ' +
        'ask the user to replace it with a plain copy if you need it',
    );
    const write = await thrown(writeTarget(path.join(ws, 'hard.txt'), 'hard.txt', 'write_file'));
    expect(write.code).toBe('tool.path_hard_link');
    expect(write.message).toContain('write_file refuses to write it');
  });

  it('refuses a fifo for reading (without blocking) and writing', async () => {
    expect((await thrown(openForRead(ws, 'pipe', 'read_file'))).code).toBe('tool.not_regular_file');
    const write = await thrown(writeTarget(path.join(ws, 'pipe'), 'pipe', 'write_file'));
    expect(write.code).toBe('tool.not_regular_file');
    expect(write.message).toBe('"pipe" is a named pipe (fifo), not a regular file; write_file only writes regular files');
  });

  it('refuses directories with the tool that fits', async () => {
    expect((await thrown(openForRead(ws, 'src', 'read_file'))).message).toContain('use list_dir');
    expect(() => assertOwnFile({ isDirectory: () => true } as never, 'src', 'write', 'write_file')).toThrow('pass a file path');
  });

  it('accepts a plain file and a missing one', async () => {
    const { handle, info, file } = await openForRead(ws, 'src/a.txt', 'read_file');
    await handle.close();
    expect(file).toBe(path.join(ws, 'src', 'a.txt'));
    expect(info.size).toBe(1);
    expect(await writeTarget(path.join(ws, 'src', 'new.txt'), 'src/new.txt', 'write_file')).toBeNull();
    expect((await writeTarget(path.join(ws, 'src', 'a.txt'), 'src/a.txt', 'write_file'))?.isFile()).toBe(true);
  });

  it('says when a parent of a file to write is a file', async () => {
    const err = await thrown(writeTarget(path.join(ws, 'src', 'a.txt', 'x'), 'src/a.txt/x', 'write_file'));
    expect(err.code).toBe('tool.not_directory');
  });

  it('refuses a final component swapped for a symlink after it was resolved', async () => {
    const swapped = path.join(ws, 'swapped');
    await symlink(path.join(outside, 'secret.txt'), swapped);
    expect((await thrown(writeTarget(swapped, 'swapped', 'write_file'))).code).toBe('tool.path_invalid');
    await rm(swapped);
  });

  it('leaves nothing behind: resolution creates no file or directory', async () => {
    const before = await readdir(base, { recursive: true });
    for (const p of ['new/dir/x.txt', 'out-dir/new/x.txt', 'dangling-out', '../outside/made/x']) {
      await resolveInWorkspace(ws, p).catch(() => undefined);
    }
    expect(await readdir(base, { recursive: true })).toEqual(before);
    await expect(lstat(path.join(outside, 'not-yet.txt'))).rejects.toThrow();
  });
});

describe('writes that links lead into protected paths', () => {
  it('refuses a write whose name shows no .git or actorloop.toml but whose real path is one', async () => {
    const repo = path.join(base, 'linked');
    await mkdir(path.join(repo, '.git', 'hooks'), { recursive: true });
    await writeFile(path.join(repo, 'actorloop.toml'), '');
    await symlink(path.join(repo, '.git'), path.join(repo, 'innocent'));
    await symlink(path.join(repo, '.git', 'hooks', 'post-checkout'), path.join(repo, 'dangling-hook'));
    await symlink(path.join(repo, 'actorloop.toml'), path.join(repo, 'settings.toml'));
    for (const p of ['innocent/config', 'innocent/hooks/post-checkout', 'dangling-hook', 'settings.toml']) {
      const err = await resolveInWorkspace(repo, p, { write: true }).then((r) => new Error(`resolved to ${r}`), (e: unknown) => e);
      expect(err, p).toMatchObject({ code: 'tool.path_protected', message: expect.stringMatching(/leads through a symbolic link into/) });
      // reading through them is the policy's and read_file's business, not this check's
      expect(await resolveInWorkspace(repo, p)).toMatch(/\.git|actorloop\.toml/);
    }
    // the protected name itself passed the policy (a rule named it): the tool writes it
    expect(await resolveInWorkspace(repo, '.git/config', { write: true })).toBe(path.join(repo, '.git', 'config'));
  });
});
