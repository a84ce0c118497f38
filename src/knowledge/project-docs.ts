import { lstatSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { isInside, readTextFile, realOrSelf, sha256Digest } from './text-file.js';

/**
 * Project docs (issue 30 §2): the AGENTS.md files that tell an agent a repository's rules, as
 * Codex and Claude Code read them. One user-level file applies everywhere; in the project, each
 * directory from the root down to the working directory may hold one, broad rules first and the
 * narrowest last, so a later (closer) file can refine an earlier one. Nothing here runs git or any
 * other process: the root is found by looking for `.git`.
 */

/** One doc file as read: where it is, what it governs, and the text the model will see. */
export interface ProjectDoc {
  /** Absolute path of the file read (as reached from the directory, symlinks not resolved). */
  path: string;
  /** The directory it governs (absolute). */
  dir: string;
  /** `user`: the user's own file in the config dir; `project`: a file in the repository. */
  scope: 'user' | 'project';
  /** UTF-8 text as read, at most `maxFileBytes` of it. */
  content: string;
  /** `sha256:<hex>` of `content`: the version the model saw. */
  digest: string;
  /** Bytes of `content` (UTF-8). */
  bytes: number;
  /** True when the file was longer than `maxFileBytes` and `content` is its beginning. */
  truncated: boolean;
}

/** The file names looked for in each directory, the first existing one taken. */
export const DEFAULT_DOC_NAMES: readonly string[] = ['AGENTS.md', 'CLAUDE.md'];
/** The most of one doc file read: past it the content is cut and marked truncated. */
export const DEFAULT_MAX_DOC_BYTES = 64 * 1024;

/**
 * The project root: the nearest ancestor of `dir` (inclusive) holding `.git` (a directory, or a
 * file as in a worktree), found without running git; else `dir` itself. Both absolute.
 */
export function projectRoot(dir: string): string {
  const start = resolve(dir);
  for (let d = start; ; d = dirname(d)) {
    try {
      lstatSync(join(d, '.git'));
      return d;
    } catch {
      // not here: one level up
    }
    if (dirname(d) === d) return start;
  }
}

/** Options of collecting and finding docs. */
interface DocOptions {
  /** File names looked for in each directory, first match wins (default AGENTS.md, CLAUDE.md). */
  names?: readonly string[];
  /** The most bytes read of one file (default 64 KiB). */
  maxFileBytes?: number;
}

/**
 * The docs that govern `cwd`: the user-level one (`<userConfigDir>/AGENTS.md`, scope `user`)
 * first, then one per directory from the project root down to `cwd`, broad to narrow. In each
 * directory the first of `names` that exists is taken; one that exists but cannot be used (a
 * symlink out of the root, a directory, a FIFO, binary or non-UTF-8 text) is skipped with a
 * warning and the next name is tried.
 */
export async function collectProjectDocs(opts: DocOptions & { cwd: string; userConfigDir: string | null }): Promise<{ docs: ProjectDoc[]; warnings: string[] }> {
  const names = opts.names ?? DEFAULT_DOC_NAMES;
  const maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_DOC_BYTES;
  const warnings: string[] = [];
  const docs: ProjectDoc[] = [];
  const seen = new Set<string>();
  if (opts.userConfigDir !== null) {
    const userDir = resolve(opts.userConfigDir);
    const doc = await docOfDir(userDir, 'user', await realOrSelf(userDir), names, maxFileBytes, warnings);
    if (doc) {
      docs.push(doc);
      seen.add(await realOrSelf(doc.path));
    }
  }
  const cwd = resolve(opts.cwd);
  const root = projectRoot(cwd);
  const realRoot = await realOrSelf(root);
  for (const dir of chain(root, cwd)) {
    const doc = await docOfDir(dir, 'project', realRoot, names, maxFileBytes, warnings);
    if (!doc) continue;
    // a user config dir inside the project would otherwise give its file twice
    const real = await realOrSelf(doc.path);
    if (seen.has(real)) continue;
    seen.add(real);
    docs.push(doc);
  }
  return { docs, warnings };
}

/**
 * The docs of the directories from `root` down to the directory of `path` (a file the agent read
 * or wrote) that are not in `known` (absolute doc paths already loaded), broad to narrow; none
 * when `path` is outside the root. The warnings are those of files skipped on the way.
 */
export async function docsForPath(opts: DocOptions & { root: string; path: string; known: ReadonlySet<string> }): Promise<{ docs: ProjectDoc[]; warnings: string[] }> {
  const names = opts.names ?? DEFAULT_DOC_NAMES;
  const maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_DOC_BYTES;
  const root = resolve(opts.root);
  const dir = dirname(resolve(root, opts.path));
  const warnings: string[] = [];
  if (!isInside(dir, root)) return { docs: [], warnings };
  const realRoot = await realOrSelf(root);
  const docs: ProjectDoc[] = [];
  for (const d of chain(root, dir)) {
    // a known doc is not read again: its version is the one the model already saw
    if (names.some((n) => opts.known.has(join(d, n)))) continue;
    const doc = await docOfDir(d, 'project', realRoot, names, maxFileBytes, warnings);
    if (doc) docs.push(doc);
  }
  return { docs, warnings };
}

/**
 * The text the model is given for one doc: a header naming the file (relative to `root` for a
 * project doc) and what it applies to, then the content, and a note when it was cut. Deterministic.
 */
export function projectDocText(doc: ProjectDoc, root: string): string {
  const name = basename(doc.path);
  let header: string;
  if (doc.scope === 'user') {
    header = `User instructions (${name} in the user's actorloop config dir; they apply to every project):`;
  } else {
    const file = toPosix(relative(resolve(root), doc.path));
    const dir = toPosix(relative(resolve(root), doc.dir));
    const applies = dir === '' ? 'the whole project' : `files under ${dir}/`;
    header = `Project instructions from ${file} (they apply to ${applies}; a file deeper in the tree refines these):`;
  }
  const note = doc.truncated ? `\n[${name} was cut here: only its first ${doc.bytes} bytes are shown]` : '';
  return `${header}\n\n${doc.content}${doc.content.endsWith('\n') ? '' : '\n'}${note}`;
}

/** The doc of one directory: the first of `names` that can be used; null when none. */
async function docOfDir(
  dir: string, scope: ProjectDoc['scope'], within: string, names: readonly string[], maxFileBytes: number, warnings: string[],
): Promise<ProjectDoc | null> {
  for (const name of names) {
    const path = join(dir, name);
    const read = await readTextFile(path, { maxBytes: maxFileBytes, overLimit: 'truncate', within });
    switch (read.kind) {
      case 'missing':
        continue;
      case 'refused':
        warnings.push(`${path} skipped: it ${read.reason}`);
        continue;
      case 'text':
        return {
          path, dir, scope, content: read.text, digest: sha256Digest(read.text),
          bytes: Buffer.byteLength(read.text), truncated: read.truncated,
        };
    }
  }
  return null;
}

/** The directories from `root` down to `dir` (both included), broad to narrow; `dir` lies inside `root`. */
function chain(root: string, dir: string): string[] {
  const rel = relative(root, dir);
  const dirs = [root];
  if (rel === '') return dirs;
  let d = root;
  for (const part of rel.split(sep)) {
    d = join(d, part);
    dirs.push(d);
  }
  return dirs;
}

function toPosix(p: string): string {
  return p.split(sep).join('/');
}
