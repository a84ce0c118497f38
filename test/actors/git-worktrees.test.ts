import { execFileSync } from 'node:child_process';
import { mkdir, readFile, realpath, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGitWorktrees } from '../../src/actors/tree/git-worktrees.js';
import { applyPatchTool } from '../../src/tools/builtins/apply-patch.js';
import { executeTool } from '../../src/tools/execute.js';
import { tempDir } from '../helpers/nats.js';
import { toolContext } from '../tools/context.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';

const bwrap = await findBubblewrap(process.env.PATH);

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

describe('git the runtime runs never runs what the repository names', () => {
  // a payload git would run as the host: it leaves a marker (and would read the bus logins)
  const payload = (marker: string): string => `sh -c 'touch ${marker}; cat'`;
  const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);

  it('refuses a repository whose config names a filter, before any git that could run it', async () => {
    const marker = path.join(base, 'filter-ran');
    // as if a policy rule had let an agent write them
    git(repo, 'config', 'filter.x.smudge', payload(marker));
    git(repo, 'config', 'filter.x.clean', payload(marker));
    await writeFile(path.join(repo, '.git', 'info', 'attributes'), '* filter=x\n');
    const wt = createGitWorktrees({ dataDir });
    expect(await wt.worktreeProblem(repo)).toMatch(/make git run programs.*filter\.x\.smudge \(set in \.git\/config\).*use workspace "shared" or "readonly"/);
    await expect(wt.worktree('agt_filter', repo)).rejects.toMatchObject({ code: 'subagent.worktree_unsafe_repository' });
    expect(await exists(path.join(dataDir, 'worktrees', 'agt_filter'))).toBe(false);
    expect(await exists(marker)).toBe(false);
  });

  it('refuses includes, a work tree elsewhere and objects borrowed from another repository', async () => {
    const wt = createGitWorktrees({ dataDir });
    git(repo, 'config', 'include.path', '/elsewhere/config');
    expect(await wt.worktreeProblem(repo)).toMatch(/include\.path/);
    git(repo, 'config', '--unset', 'include.path');
    git(repo, 'config', 'core.worktree', '/elsewhere');
    expect(await wt.worktreeProblem(repo)).toMatch(/core\.worktree/);
    git(repo, 'config', '--unset', 'core.worktree');
    expect(await wt.worktreeProblem(repo)).toBeNull();
    await writeFile(path.join(repo, '.git', 'objects', 'info', 'alternates'), '/elsewhere/objects\n');
    expect(await wt.worktreeProblem(repo)).toMatch(/objects borrowed from another repository/);
  });

  it('runs no hook and no fsmonitor of the repository, also where its config points hooks elsewhere', async () => {
    const marker = path.join(base, 'hook-ran');
    const hook = `#!/bin/sh\ntouch ${marker}\n`;
    for (const name of ['post-checkout', 'reference-transaction']) {
      await writeFile(path.join(repo, '.git', 'hooks', name), hook, { mode: 0o755 });
    }
    const wt = createGitWorktrees({ dataDir });
    const dir = await wt.worktree('agt_hooks', repo);
    expect(await readFile(path.join(dir, 'top.txt'), 'utf8')).toBe('top\n');
    // settings the runtime's own command line overrides are kept: a husky repository still works
    await mkdir(path.join(repo, '.husky'));
    await writeFile(path.join(repo, '.husky', 'post-checkout'), hook, { mode: 0o755 });
    git(repo, 'config', 'core.hooksPath', '.husky');
    git(repo, 'config', 'core.fsmonitor', path.join(repo, '.husky', 'post-checkout'));
    const dir2 = await wt.worktree('agt_hooks2', repo);
    await writeFile(path.join(dir2, 'top.txt'), 'changed\n');
    expect(await wt.worktreeDiff(dir2)).toContain('+changed');
    expect(await exists(marker)).toBe(false);
  });

  it('takes no diff of a worktree whose .git the child replaced with a repository of its own', async () => {
    const marker = path.join(base, 'child-ran');
    const wt = createGitWorktrees({ dataDir });
    const dir = await wt.worktree('agt_reinit', repo);
    await writeFile(path.join(dir, 'top.txt'), 'work\n');
    // what the child would do without a sandbox: its own .git, borrowing the parent's objects so
    // the base resolves, with an fsmonitor and a clean filter that run on `git add`
    await rm(path.join(dir, '.git'));
    git(dir, 'init', '-q');
    await writeFile(path.join(dir, '.git', 'objects', 'info', 'alternates'), `${path.join(repo, '.git', 'objects')}\n`);
    git(dir, 'config', 'core.fsmonitor', `${marker}-fsmonitor`);
    await writeFile(`${marker}-fsmonitor`, `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    git(dir, 'config', 'filter.x.clean', payload(marker));
    await writeFile(path.join(dir, '.gitattributes'), '* filter=x\n');
    await expect(wt.worktreeDiff(dir)).rejects.toMatchObject({
      code: 'subagent.worktree_tampered',
      message: expect.stringMatching(/no longer has the \.git file the runtime made/),
    });
    expect(await exists(marker)).toBe(false);

    // a .git file rewritten to name another git dir is refused the same way
    const dir2 = await wt.worktree('agt_regit', repo);
    await writeFile(path.join(dir2, '.git'), `gitdir: ${path.join(dir, '.git')}\n`);
    await expect(wt.worktreeDiff(dir2)).rejects.toMatchObject({ code: 'subagent.worktree_tampered' });
    // and a filter in the worktree's own attributes names nothing the repository configures
    const dir3 = await wt.worktree('agt_attrs', repo);
    await writeFile(path.join(dir3, '.gitattributes'), '* filter=x diff=x\n');
    await writeFile(path.join(dir3, 'top.txt'), 'attrs\n');
    expect(await wt.worktreeDiff(dir3)).toContain('+attrs');
    expect(await exists(marker)).toBe(false);
  });
});

describe.skipIf(!bwrap)('git that checks out, adds or diffs runs in the sandbox', () => {
  const sandboxed = () => createGitWorktrees({ dataDir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sandbox: { bwrapPath: bwrap!, hide: [dataDir] } });

  it('makes worktrees and diffs them, below the repository top too, though they lie in the masked data dir', async () => {
    const wt = sandboxed();
    const dir = await wt.worktree('agt_boxed', path.join(repo, 'pkg'));
    expect(dir).toBe(path.join(dataDir, 'worktrees', 'agt_boxed', 'pkg'));
    await writeFile(path.join(dir, 'src', 'a.txt'), 'alpha\nBETA\n');
    await writeFile(path.join(dir, 'fresh.txt'), 'fresh\n');
    const diff = (await wt.worktreeDiff(dir))!;
    expect(diff).toContain('+++ b/fresh.txt');
    expect(diff).toContain('+BETA');
    expect(git(repo, 'status', '--porcelain')).toBe('');
  });

  it('runs a filter that appears between the check and the checkout with the agent\'s view: no data dir', async () => {
    const secret = 'the-bus-password-0123456789';
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, 'secret'), secret);
    const stolen = path.join(repo, '.git', 'stolen');
    // a git that, like a writer racing the check, names a filter just before `worktree add` runs
    const wrapper = path.join(repo, 'racing-git');
    await writeFile(wrapper, [
      '#!/bin/sh',
      'case " $* " in *" worktree add "*)',
      `  git -C ${repo} config filter.x.smudge "sh -c 'cat ${path.join(dataDir, 'secret')} > ${stolen} 2>&1; cat'"`,
      `  echo '* filter=x' > ${path.join(repo, '.git', 'info', 'attributes')};;`,
      'esac',
      'exec git "$@"',
      '',
    ].join('\n'), { mode: 0o755 });
    const wt = createGitWorktrees({ dataDir, git: wrapper, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sandbox: { bwrapPath: bwrap!, hide: [dataDir] } });
    await wt.worktree('agt_raced', repo);
    // it ran, where the data dir is an empty mask
    expect(await readFile(stolen, 'utf8')).toMatch(/No such file or directory/);
    expect(await readFile(stolen, 'utf8')).not.toContain(secret);
  });
});
