import { execFile } from 'node:child_process';
import { lstat, mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../../protocol/errors.js';
import { DEFAULT_PATH, runProcess, sandboxEnv, type ProcessSandbox } from '../../tools/sandbox.js';
import { isInside } from '../../tools/workspace-path.js';
import { assertSafeRepository, ownedGitEnv, ownedGitFlags } from './git-safety.js';
import type { SubagentPort } from '../agent/subagent-port.js';

// Git worktrees of `worktree` children (design §6b). Each child gets `<dataDir>/worktrees/<childId>`
// on its own branch `actorloop/<childId>`, made from the parent workspace's HEAD, and its changes
// come back as one unified diff against that commit. Git is run with argv only (execFile), never a
// shell string, and nothing is ever committed: the diff is read through a private index file.
//
// Git here runs as the host, on repositories agents write, so it never runs what they wrote
// (git-safety.ts): every call has the runtime's own configuration and environment, a repository
// whose configuration names programs is refused before anything else, and a child's diff is read
// with the git dir the host made for it given explicitly: git never looks for a repository inside
// the worktree, where the child could have put one of its own.

/** Stable error codes of worktrees. */
export const WORKTREE_CODES = {
  notGit: 'subagent.worktree_not_git',
  failed: 'subagent.worktree_failed',
  tampered: 'subagent.worktree_tampered',
} as const;

/** Options of `createGitWorktrees`. */
export interface GitWorktreesOptions {
  /** The runtime's data dir: worktrees live under `<dataDir>/worktrees`. */
  dataDir: string;
  /** The git binary (default `git` on the environment's PATH). */
  git?: string;
  /** The environment git runs with (the config's; its `GIT_*` variables and secrets are left out). */
  env?: Readonly<Record<string, string>>;
  /**
   * Run the git commands that check out, add or diff files inside bubblewrap (the shell tool's
   * sandbox, `hide` its masks: the data dir, the user's keys), seeing only the repository and the
   * worktree; null or absent runs them on the host, with the runtime's configuration alone.
   */
  sandbox?: { bwrapPath: string; hide: readonly string[] } | null;
}

/** The sandbox of worktree git from the tool settings: the shell tool's bubblewrap and masks, or null without one. */
export function worktreeSandbox(tooling: { bwrapPath: string | null; hiddenPaths: readonly string[] }): GitWorktreesOptions['sandbox'] {
  return tooling.bwrapPath ? { bwrapPath: tooling.bwrapPath, hide: tooling.hiddenPaths } : null;
}

/** The worktree part of the subagent port. */
export type GitWorktrees = Required<Pick<SubagentPort, 'worktree' | 'worktreeDiff' | 'worktreeProblem'>>;

// A diff this large would not fit an inbox message (1 MiB max_payload) anyway.
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

/** Worktrees of children under `<dataDir>/worktrees`, made and read with the git CLI. */
export function createGitWorktrees(opts: GitWorktreesOptions): GitWorktrees {
  const git = opts.git ?? 'git';
  const root = path.join(opts.dataDir, 'worktrees');
  // git needs no secret: a program it ran by mistake finds none in its environment either
  const envBase = sandboxEnv(ownedGitEnv(opts.env ?? {}), []);
  const run = (cwd: string, args: string[], env: Record<string, string> = {}): Promise<string> => runGit(git, cwd, args, { ...envBase, ...env });
  const assertSafe = (locate: string[], env: Record<string, string> = {}): Promise<string> => assertSafeRepository(git, locate, { ...envBase, ...env });
  /**
   * Runs a git that checks out, adds or diffs files: in the sandbox when there is one, where only
   * `writable` (the repository's git dir, the new worktree, a private index) can change and the
   * rest of the host is read-only, the data dir and the user's keys masked (`readable` binds back
   * what git reads below them). The configuration check comes first either way; this is the layer
   * under it, for a configuration changed between the check and the run.
   */
  const runContained = async (cwd: string, args: string[], env: Record<string, string>, readable: string[], writable: string[]): Promise<string> => {
    if (!opts.sandbox) return run(cwd, args, env);
    // bound at their real paths, which is where git (which resolves them) looks
    const ro = await Promise.all(readable.map((p) => realpath(p)));
    const rw = await Promise.all(writable.map((p) => realpath(p)));
    const sandbox: ProcessSandbox = {
      bwrapPath: opts.sandbox.bwrapPath,
      workspace: rw[0]!,
      network: false,
      hide: opts.sandbox.hide,
      // readable first: a git dir inside the checkout it belongs to stays writable
      binds: [...ro.map((p) => ({ path: p, writable: false })), ...rw.map((p) => ({ path: p, writable: true }))],
    };
    const fullEnv = { PATH: DEFAULT_PATH, ...envBase, ...env };
    const out = await runProcess([git, ...ownedGitFlags(), '-C', cwd, ...args], { cwd, env: fullEnv, sandbox, maxOutputBytes: MAX_OUTPUT_BYTES });
    const stderr = Buffer.from(out.stderr).toString('utf8').trim();
    if (out.exitCode !== 0 || out.truncated || out.stray) {
      const why = out.truncated ? 'its output was too large' : stderr || `it ended with ${out.exitCode === null ? out.signal : `exit code ${out.exitCode}`}`;
      throw new ToolError(WORKTREE_CODES.failed, `git ${args[0]} failed: ${why}`);
    }
    return Buffer.from(out.stdout).toString('utf8');
  };

  /** The top of the workspace's repository and the workspace's path below it, or a ToolError the model can act on. */
  const repoOf = async (workspace: string): Promise<{ top: string; prefix: string }> => {
    let top: string;
    try {
      top = (await run(workspace, ['rev-parse', '--show-toplevel'])).trim();
    } catch (err) {
      throw new ToolError(WORKTREE_CODES.notGit,
        `your workspace ${workspace} is not in a git repository, so a subagent cannot get a worktree of it: use workspace "shared" or "readonly"`, { cause: err });
    }
    const prefix = (await run(workspace, ['rev-parse', '--show-prefix'])).trim();
    return { top, prefix };
  };

  const headOf = async (workspace: string): Promise<string> => {
    try {
      return (await run(workspace, ['rev-parse', '--verify', 'HEAD^{commit}'])).trim();
    } catch (err) {
      throw new ToolError(WORKTREE_CODES.notGit,
        `the git repository of your workspace ${workspace} has no commit yet, and a worktree starts from one: use workspace "shared" or "readonly"`, { cause: err });
    }
  };

  /**
   * True when `dir` is a worktree the host made (its `.git` file names the git dir recorded for
   * it), not a half-made directory; read from files, since git would look for a repository in it.
   */
  const isWorktree = async (dir: string): Promise<boolean> => (await gitDirOf(dir).catch(() => null)) !== null;

  // one `worktree add` at a time from this process: two children of one fan-out share a repository
  let queue: Promise<unknown> = Promise.resolve();
  const serially = <T>(f: () => Promise<T>): Promise<T> => {
    const next = queue.then(f, f);
    queue = next.catch(() => {});
    return next;
  };

  return {
    async worktreeProblem(workspace) {
      try {
        await repoOf(workspace);
        await assertSafe(['-C', workspace]);
        await headOf(workspace);
        return null;
      } catch (err) {
        if (err instanceof ToolError) return err.message;
        throw err;
      }
    },

    worktree: (childId, workspace) => serially(async () => {
      const { top, prefix } = await repoOf(workspace);
      // checked before any git that could run something: `worktree add` checks files out
      const commonDir = await assertSafe(['-C', top]);
      const dir = path.join(root, childId);
      const branch = `actorloop/${childId}`;
      // a retry after a crash finds the worktree it made
      if (await isWorktree(dir)) return below(dir, prefix);
      // the base is written before the worktree: the diff is always against where the child started
      let base = await readFile(baseFile(dir), 'utf8').then((t) => t.trim(), () => null);
      if (base === null) {
        base = await headOf(workspace);
        await mkdir(root, { recursive: true });
        await writeFile(`${baseFile(dir)}.tmp`, `${base}\n`);
        await rename(`${baseFile(dir)}.tmp`, baseFile(dir));
      }
      // a half-made worktree (a kill inside `worktree add`) is removed and made again
      if (await exists(dir)) await rm(dir, { recursive: true, force: true });
      // made empty beforehand, so the sandbox can bind it: `worktree add` fills an empty directory
      await mkdir(dir);
      await runContained(top, ['worktree', 'prune'], {}, [top], [commonDir, dir]);
      const hasBranch = await run(top, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`]).then(() => true, () => false);
      try {
        if (hasBranch) await runContained(top, ['worktree', 'add', '--', dir, branch], {}, [top], [commonDir, dir]);
        else await runContained(top, ['worktree', 'add', '-b', branch, '--', dir, base], {}, [top], [commonDir, dir]);
        // before the child exists: what the `.git` file says now is what the host made
        await recordGitDir(dir);
      } catch (err) {
        throw new ToolError(WORKTREE_CODES.failed, `git could not make a worktree for ${childId}: ${messageOf(err)}`, { cause: err, retryable: true });
      }
      return below(dir, prefix);
    }),

    async worktreeDiff(worktree) {
      const top = topOf(root, worktree);
      const gitDir = await gitDirOf(top);
      const base = (await readFile(baseFile(top), 'utf8')).trim();
      // A private index holding the base, then everything in the worktree (new untracked files
      // too, ignored ones not): its diff against the base is the child's work, whatever it
      // committed or staged, and the worktree's own index and branch are left as they are.
      const indexDir = `${top}.diff`;
      const env = { GIT_DIR: gitDir, GIT_WORK_TREE: top, GIT_INDEX_FILE: path.join(indexDir, 'index') };
      const commonDir = await assertSafe([], env);
      const prefix = path.relative(top, worktree).split(path.sep).join('/');
      await rm(indexDir, { recursive: true, force: true });
      await mkdir(indexDir);
      const contained = (args: string[]): Promise<string> => runContained(top, args, env, [top], [commonDir, indexDir]);
      try {
        await contained(['read-tree', base]);
        // mode bits stay the base's: apply_patch takes no mode changes
        await contained(['-c', 'core.fileMode=false', 'add', '--all', '--', '.']);
        const diff = await contained([
          'diff', '--cached', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', prefix === '' ? '--relative' : `--relative=${prefix}`,
          '--src-prefix=a/', '--dst-prefix=b/', base, '--',
        ]);
        return diff.trim() === '' ? null : diff;
      } finally {
        await rm(indexDir, { recursive: true, force: true });
      }
    },
  };
}

/** Where the commit a worktree started from is kept (beside it, outside the checkout). */
function baseFile(dir: string): string {
  return `${dir}.base`;
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(() => true, () => false);
}

/** Where the git dir the host made for a worktree is recorded (beside it, outside the checkout). */
function gitDirFile(dir: string): string {
  return `${dir}.gitdir`;
}

/** Records the git dir the fresh worktree `dir`'s `.git` file names. */
async function recordGitDir(dir: string): Promise<void> {
  const gitDir = parseGitFile(await readFile(path.join(dir, '.git'), 'utf8'));
  if (gitDir === null) throw new Error(`${path.join(dir, '.git')} does not name a git dir`);
  await writeFile(`${gitDirFile(dir)}.tmp`, `${gitDir}\n`);
  await rename(`${gitDirFile(dir)}.tmp`, gitDirFile(dir));
}

/**
 * The git dir the host made for worktree `dir`, once its `.git` is still the plain file that
 * names it; a ToolError when the child replaced, removed or rewrote it (then git, run from the
 * worktree, would find the child's repository and run what its configuration names).
 */
async function gitDirOf(dir: string): Promise<string> {
  const recorded = (await readFile(gitDirFile(dir), 'utf8').catch(() => null))?.trim();
  if (!recorded) throw new ToolError(WORKTREE_CODES.failed, `${dir} is not a worktree made by this runtime (no record of its git dir)`);
  const dotGit = path.join(dir, '.git');
  const info = await lstat(dotGit).catch(() => null);
  const named = info?.isFile() ? parseGitFile(await readFile(dotGit, 'utf8')) : null;
  if (named !== recorded) {
    throw new ToolError(WORKTREE_CODES.tampered,
      `the worktree ${dir} no longer has the .git file the runtime made (it was replaced, removed or rewritten), so no git is run on it and its changes do not come back as a diff`);
  }
  return recorded;
}

/** The git dir a `.git` file names (`gitdir: <path>`), or null. */
function parseGitFile(text: string): string | null {
  const m = /^gitdir: (.+)\n?$/.exec(text);
  return m ? m[1]! : null;
}

/** The worktree top a workspace below `<root>/<childId>` belongs to, from the path alone. */
function topOf(root: string, worktree: string): string {
  const rel = path.relative(root, worktree);
  const first = rel.split(path.sep)[0] ?? '';
  if (rel === '' || first === '..' || !isInside(root, worktree)) {
    throw new ToolError(WORKTREE_CODES.failed, `${worktree} is not a worktree under ${root}`);
  }
  return path.join(root, first);
}

/** Runs git with argv, never a shell string. */
function runGit(git: string, cwd: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(git, [...ownedGitFlags(), '-C', cwd, ...args], { env, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) reject(new ToolError(WORKTREE_CODES.failed, `git ${args[0]} failed: ${stderr.trim() || err.message}`, { cause: err }));
      else resolve(stdout);
    });
  });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The workspace's place in a worktree: `--show-prefix` ends in a slash, a workspace path does not. */
function below(dir: string, prefix: string): string {
  return prefix === '' ? dir : path.join(dir, prefix.replace(/\/$/, ''));
}
