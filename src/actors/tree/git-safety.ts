import { execFile } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../../protocol/errors.js';

// The host runs git on repositories an agent could have written (design §8): its workspace's, and
// a child's worktree. Git runs programs that a repository names (hooks, filters, fsmonitor,
// textconv, external diffs, pagers, ssh and credential helpers), so every git the runtime runs
// gets a configuration the runtime owns, and a repository whose own configuration names anything
// beyond a short list of inert settings is refused before git touches it.
//
// Why an allowlist of keys and no check of attributes: an attribute (`* filter=x`, `diff=x`,
// `merge=x`) names a driver, and a driver that runs a program exists only in configuration. With
// the system and global files out of the way, the repository's files are the only configuration
// left, so refusing every key but the inert ones leaves attributes naming nothing that runs.

/** Stable error codes of the git boundary. */
export const GIT_SAFETY_CODES = {
  unsafeRepository: 'subagent.worktree_unsafe_repository',
} as const;

/**
 * The `-c` settings every runtime git gets; the command line wins over the repository's files.
 * Hooks point at a path that cannot hold any, fsmonitor is off, no attributes file of the user's,
 * no transport at all (a partial clone would fetch), no automatic gc or maintenance.
 */
export const OWNED_GIT_CONFIG: readonly string[] = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.attributesFile=/dev/null',
  'core.pager=cat',
  'protocol.allow=never',
  'gc.auto=0',
  'maintenance.auto=false',
  'submodule.recurse=false',
];

/** The `-c` flags of OWNED_GIT_CONFIG, to put before a git subcommand. */
export function ownedGitFlags(): string[] {
  return OWNED_GIT_CONFIG.flatMap((c) => ['-c', c]);
}

/**
 * The environment of every runtime git: the given one less git's own variables (a `GIT_DIR` or
 * `GIT_CONFIG_PARAMETERS` of whoever started us would point git elsewhere), without the system
 * and global configuration and attributes, without prompts, pagers or optional locks.
 */
export function ownedGitEnv(from: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(from)) if (!k.startsWith('GIT_')) env[k] = v;
  return {
    ...env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_PAGER: 'cat',
    GIT_NO_REPLACE_OBJECTS: '1',
    // newer gits: a missing object is an error, never a fetch from a promisor remote
    GIT_NO_LAZY_FETCH: '1',
  };
}

// Keys (as `git config --list` prints them: section and name lowercased) that run nothing, point
// git at no other repository or work tree, and change nothing the runtime reads. Everything else
// is refused: filters, diff and merge drivers, fsmonitor hooks, includes, core.worktree,
// sshCommand, editors, pagers, credential helpers, gpg programs, partial clones, and keys git may
// learn later.
const INERT_KEYS: readonly RegExp[] = [
  /^core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|symlinks|precomposeunicode|autocrlf|eol|safecrlf|quotepath|checkstat|trustctime|untrackedcache|sparsecheckout|sparsecheckoutcone|compression|loosecompression|bigfilethreshold|abbrev|whitespace|protecthfs|protectntfs|sharedrepository|warnambiguousrefs|commitgraph|multipackindex|splitindex|preloadindex|excludesfile)$/,
  // the runtime's command line sets these, and it wins: a repository that uses husky still works
  /^core\.(hookspath|fsmonitor|attributesfile|pager)$/,
  /^extensions\.(objectformat|worktreeconfig|preciousobjects|noop)$/,
  /^remote\.[^\n]+\.(url|pushurl|fetch|push|tagopt|prune|mirror|skipdefaultupdate|skipfetchall)$/,
  /^branch\.[^\n]+\.(remote|pushremote|merge|rebase|description)$/,
  /^(user|author|committer)\.(name|email)$/,
  /^init\.defaultbranch$/,
  /^(commit|tag)\.gpgsign$/,
  /^pull\.(rebase|ff)$/,
  /^push\.(default|autosetupremote|followtags)$/,
  /^fetch\.(prune|prunetags|writecommitgraph)$/,
  /^(advice|color)\.[^\n]+$/,
  /^gc\.(auto|autodetach|autopacklimit|reflogexpire|reflogexpireunreachable|pruneexpire)$/,
  /^index\.(version|sparse|threads|skiphash)$/,
  /^feature\.(manyfiles|experimental)$/,
  /^submodule\.[^\n]+\.(url|active|branch)$/,
  /^worktree\.guessremote$/,
  /^rerere\.enabled$/,
];

/** One setting of a repository's configuration and the file it came from. */
interface Setting {
  origin: string;
  key: string;
}

/**
 * Refuses (a ToolError the model can act on) a repository whose configuration holds a key that
 * is not inert, or whose objects come from another repository (alternates). `args` locate the
 * repository: `['-C', dir]` to find it from a directory, or none with `GIT_DIR` in `env`. Runs
 * only `git config --list` and `git rev-parse`, which read files and run nothing. Returns the
 * repository's common git dir (absolute).
 */
export async function assertSafeRepository(git: string, locate: readonly string[], env: Record<string, string>): Promise<string> {
  const listed = await gitOutput(git, [...locate, 'config', '--list', '--show-origin', '-z'], env);
  const unsafe = parseSettings(listed).filter((s) => !s.origin.startsWith('command line:') && !INERT_KEYS.some((k) => k.test(s.key)));
  const commonDir = (await gitOutput(git, [...locate, 'rev-parse', '--path-format=absolute', '--git-common-dir'], env)).trim();
  const shown = unsafe.slice(0, 5).map((s) => `${s.key} (set in ${s.origin.replace(/^file:/, '')})`);
  if (unsafe.length > 5) shown.push(`and ${unsafe.length - 5} more`);
  const alternates = path.join(commonDir, 'objects', 'info', 'alternates');
  if (await lstat(alternates).then(() => true, () => false)) shown.push(`objects borrowed from another repository (${alternates})`);
  if (shown.length === 0) return commonDir;
  throw new ToolError(
    GIT_SAFETY_CODES.unsafeRepository,
    `the git repository ${commonDir} has settings that make git run programs or read another repository: ${shown.join(', ')}; ` +
      'the runtime runs no git on such a repository, so no subagent gets a worktree of it: use workspace "shared" or "readonly", ' +
      'or ask the user to remove those settings',
  );
}

/** `origin NUL key LF value NUL` entries of `git config --list --show-origin -z`. */
function parseSettings(out: string): Setting[] {
  const parts = out.split('\0');
  const settings: Setting[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const origin = parts[i]!;
    const entry = parts[i + 1]!;
    const nl = entry.indexOf('\n');
    settings.push({ origin, key: (nl === -1 ? entry : entry.slice(0, nl)).toLowerCase() });
  }
  return settings;
}

function gitOutput(git: string, args: readonly string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(git, [...ownedGitFlags(), ...args], { env, encoding: 'utf8', maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new ToolError(GIT_SAFETY_CODES.unsafeRepository, `git could not read the repository's configuration: ${stderr.trim() || err.message}`, { cause: err }));
      else resolve(stdout);
    });
  });
}
