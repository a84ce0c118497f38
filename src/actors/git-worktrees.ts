import { execFile } from 'node:child_process';
import { mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../protocol/errors.js';
import type { SubagentPort } from './subagent-port.js';

// Git worktrees of `worktree` children (design §6b). Each child gets `<dataDir>/worktrees/<childId>`
// on its own branch `actorloop/<childId>`, made from the parent workspace's HEAD, and its changes
// come back as one unified diff against that commit. Git is run with argv only (execFile), never a
// shell string, and nothing is ever committed: the diff is read through a private index file.

/** Stable error codes of worktrees. */
export const WORKTREE_CODES = {
  notGit: 'subagent.worktree_not_git',
  failed: 'subagent.worktree_failed',
} as const;

/** Options of `createGitWorktrees`. */
export interface GitWorktreesOptions {
  /** The runtime's data dir: worktrees live under `<dataDir>/worktrees`. */
  dataDir: string;
  /** The git binary (default `git` on the environment's PATH). */
  git?: string;
  /** The environment git runs with (the config's; its `GIT_*` variables are left out). */
  env?: Readonly<Record<string, string>>;
}

/** The worktree part of the subagent port. */
export type GitWorktrees = Required<Pick<SubagentPort, 'worktree' | 'worktreeDiff' | 'worktreeProblem'>>;

// A diff this large would not fit an inbox message (1 MiB max_payload) anyway.
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

/** Worktrees of children under `<dataDir>/worktrees`, made and read with the git CLI. */
export function createGitWorktrees(opts: GitWorktreesOptions): GitWorktrees {
  const git = opts.git ?? 'git';
  const root = path.join(opts.dataDir, 'worktrees');
  const envBase = gitEnv(opts.env ?? {});
  const run = (cwd: string, args: string[], env: Record<string, string> = {}): Promise<string> => runGit(git, cwd, args, { ...envBase, ...env });

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

  /** True when `dir` is the top of a checked-out worktree (not a half-made directory inside some other repository). */
  const isWorktree = async (dir: string): Promise<boolean> => {
    try {
      const top = (await run(dir, ['rev-parse', '--show-toplevel'])).trim();
      return top === (await realpath(dir));
    } catch {
      return false;
    }
  };

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
        await headOf(workspace);
        return null;
      } catch (err) {
        if (err instanceof ToolError) return err.message;
        throw err;
      }
    },

    worktree: (childId, workspace) => serially(async () => {
      const { top, prefix } = await repoOf(workspace);
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
      await run(top, ['worktree', 'prune']);
      const hasBranch = await run(top, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`]).then(() => true, () => false);
      try {
        if (hasBranch) await run(top, ['worktree', 'add', '--', dir, branch]);
        else await run(top, ['worktree', 'add', '-b', branch, '--', dir, base]);
      } catch (err) {
        throw new ToolError(WORKTREE_CODES.failed, `git could not make a worktree for ${childId}: ${messageOf(err)}`, { cause: err, retryable: true });
      }
      return below(dir, prefix);
    }),

    async worktreeDiff(worktree) {
      const top = (await run(worktree, ['rev-parse', '--show-toplevel'])).trim();
      const base = (await readFile(baseFile(top), 'utf8')).trim();
      // A private index holding the base, then everything in the worktree (new untracked files
      // too, ignored ones not): its diff against the base is the child's work, whatever it
      // committed or staged, and the worktree's own index and branch are left as they are.
      const index = `${top}.diff-index`;
      const env = { GIT_INDEX_FILE: index };
      try {
        await run(top, ['read-tree', base], env);
        // mode bits stay the base's: apply_patch takes no mode changes
        await run(top, ['-c', 'core.fileMode=false', 'add', '--all', '--', '.'], env);
        const diff = await run(worktree, [
          'diff', '--cached', '--no-color', '--no-ext-diff', '--no-renames', '--relative', '--src-prefix=a/', '--dst-prefix=b/', base, '--',
        ], env);
        return diff.trim() === '' ? null : diff;
      } finally {
        await rm(index, { force: true });
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

/** The environment of git: the given one less git's own variables, and no prompts. */
function gitEnv(from: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(from)) {
    // GIT_DIR, GIT_INDEX_FILE, GIT_WORK_TREE of a hook that started us would point git elsewhere
    if (!k.startsWith('GIT_')) env[k] = v;
  }
  return { ...env, GIT_TERMINAL_PROMPT: '0', GIT_OPTIONAL_LOCKS: '0' };
}

/** Runs git with argv, never a shell string. */
function runGit(git: string, cwd: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(git, ['-C', cwd, ...args], { env, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8' }, (err, stdout, stderr) => {
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
