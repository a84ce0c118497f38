import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolError } from '../../src/protocol/errors.js';
import { isInside, resolveInWorkspace } from '../../src/tools/workspace-path.js';

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
    ['a parent escape', '../outside/secret.txt'],
    ['a deep parent escape', 'src/../../outside'],
    ['an absolute outside path', '/etc/passwd'],
    ['a sibling directory sharing the prefix', '../ws-evil/x.txt'],
    ['a symlink to an outside file', 'secret-link'],
    ['a file under a symlinked outside directory', 'out-dir/secret.txt'],
    ['a new file under a symlinked outside directory', 'out-dir/new.txt'],
    ['a dangling symlink pointing outside', 'dangling-out'],
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
