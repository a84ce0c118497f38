import { execFileSync } from 'node:child_process';
import { mkdir, readFile, realpath, rm, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGitWorktrees } from '../../src/actors/git-worktrees.js';
import { applyPatchTool } from '../../src/tools/builtins/apply-patch.js';
import { executeTool } from '../../src/tools/execute.js';
import { tempDir } from '../helpers/nats.js';
import { toolContext } from '../tools/context.js';

let base: string;
let repo: string;
let dataDir: string;

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-C', cwd, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { encoding: 'utf8' });

beforeEach(async () => {
  base = await realpath(await tempDir('worktrees'));
  repo = path.join(base, 'repo');
  dataDir = path.join(base, 'data');
  await mkdir(path.join(repo, 'pkg', 'src'), { recursive: true });
  await writeFile(path.join(repo, 'top.txt'), 'top\n');
  await writeFile(path.join(repo, 'pkg', 'src', 'a.txt'), 'alpha\nbeta\n');
  await writeFile(path.join(repo, 'pkg', 'gone.txt'), 'bye\n');
  await writeFile(path.join(repo, '.gitignore'), 'node_modules/\n');
  git(base, 'init', '-q', repo);
  git(repo, 'add', '.');
  git(repo, 'commit', '-q', '-m', 'init');
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('git worktrees of children', () => {
  it('makes a worktree on its own branch once, and diffs edits, new and deleted files against where it started', async () => {
    const wt = createGitWorktrees({ dataDir });
    const dir = await wt.worktree('agt_child1', repo);
    expect(dir).toBe(path.join(dataDir, 'worktrees', 'agt_child1'));
    expect(git(dir, 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe('actorloop/agt_child1');
    // a retry (after a crash) finds the same worktree
    expect(await wt.worktree('agt_child1', repo)).toBe(dir);
    expect(await wt.worktreeDiff(dir)).toBeNull();

    await writeFile(path.join(dir, 'pkg', 'src', 'a.txt'), 'alpha\nBETA\n');
    await writeFile(path.join(dir, 'pkg', 'new.txt'), 'fresh\n');
    await unlink(path.join(dir, 'pkg', 'gone.txt'));
    await mkdir(path.join(dir, 'node_modules'));
    await writeFile(path.join(dir, 'node_modules', 'x.js'), 'ignored\n');
    // even what the child committed counts: the diff is against the base, not the branch's HEAD
    git(dir, 'add', 'pkg/new.txt');
    git(dir, 'commit', '-q', '-m', 'child work');
    const diff = (await wt.worktreeDiff(dir))!;
    expect(diff).toContain('+++ b/pkg/new.txt');
    expect(diff).toContain('+BETA');
    expect(diff).toContain('--- a/pkg/gone.txt');
    expect(diff).not.toContain('node_modules');
    // the parent's repository is untouched: no commit on its branch, nothing staged
    expect(git(repo, 'status', '--porcelain')).toBe('');
    expect(git(repo, 'log', '--oneline').trim().split('\n')).toHaveLength(1);

    const applied = await executeTool(applyPatchTool, applyPatchTool.input.parse({ patch: diff }), toolContext(repo), 10_000);
    expect(applied.ok, String(applied.output)).toBe(true);
    expect(await readFile(path.join(repo, 'pkg', 'new.txt'), 'utf8')).toBe('fresh\n');
    expect(await readFile(path.join(repo, 'pkg', 'src', 'a.txt'), 'utf8')).toBe('alpha\nBETA\n');
  });

  it('gives a workspace below the repository top the same place in the worktree, and a diff relative to it', async () => {
    const wt = createGitWorktrees({ dataDir });
    const ws = path.join(repo, 'pkg');
    const dir = await wt.worktree('agt_child2', ws);
    expect(dir).toBe(path.join(dataDir, 'worktrees', 'agt_child2', 'pkg'));
    await writeFile(path.join(dir, 'src', 'b.txt'), 'bee\n');
    // no final newline, in a new file and in an edited one
    await writeFile(path.join(dir, 'src', 'c.txt'), 'sea');
    await writeFile(path.join(dir, 'src', 'a.txt'), 'alpha\nbeta');
    await writeFile(path.join(dataDir, 'worktrees', 'agt_child2', 'top.txt'), 'changed outside the workspace\n');
    const diff = (await wt.worktreeDiff(dir))!;
    expect(diff).toContain('+++ b/src/b.txt');
    expect(diff).not.toContain('top.txt');
    const applied = await executeTool(applyPatchTool, applyPatchTool.input.parse({ patch: diff }), toolContext(ws), 10_000);
    expect(applied.ok, String(applied.output)).toBe(true);
    expect(await readFile(path.join(ws, 'src', 'b.txt'), 'utf8')).toBe('bee\n');
    expect(await readFile(path.join(ws, 'src', 'c.txt'), 'utf8')).toBe('sea');
    expect(await readFile(path.join(ws, 'src', 'a.txt'), 'utf8')).toBe('alpha\nbeta');
  });

  it('makes a half-made worktree (a kill inside `worktree add`) again, from the same base', async () => {
    const wt = createGitWorktrees({ dataDir });
    const dir = await wt.worktree('agt_child4', repo);
    // the parent's branch moves on after the child started: the child's base must not
    await writeFile(path.join(repo, 'top.txt'), 'moved\n');
    git(repo, 'commit', '-q', '-am', 'moved on');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir);
    await writeFile(path.join(dir, 'junk'), 'half a checkout\n');
    expect(await wt.worktree('agt_child4', repo)).toBe(dir);
    expect(git(dir, 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe('actorloop/agt_child4');
    expect(await readFile(path.join(dir, 'top.txt'), 'utf8')).toBe('top\n');
    expect(await wt.worktreeDiff(dir)).toBeNull();
  });

  it('says why a workspace outside git, or with no commit, gets no worktree', async () => {
    const wt = createGitWorktrees({ dataDir });
    const plain = path.join(base, 'plain');
    await mkdir(plain);
    expect(await wt.worktreeProblem(plain)).toMatch(/not in a git repository.*use workspace "shared" or "readonly"/);
    const empty = path.join(base, 'empty');
    git(base, 'init', '-q', empty);
    expect(await wt.worktreeProblem(empty)).toMatch(/no commit yet/);
    expect(await wt.worktreeProblem(repo)).toBeNull();
    await expect(wt.worktree('agt_child3', plain)).rejects.toMatchObject({ code: 'subagent.worktree_not_git' });
  });
});
