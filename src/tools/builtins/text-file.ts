import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { ResourceKey } from '../tool.js';

/** Bytes sniffed for NUL to decide a file is binary, as git and grep do. */
const SNIFF_BYTES = 8192;

/** True when the bytes look binary (a NUL in the first 8 KiB). */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, SNIFF_BYTES).includes(0);
}

/**
 * The resource key of a workspace path. Computed lexically (no realpath) because `resources`
 * is synchronous; two spellings of one path still normalize to one key.
 */
export function pathResource(workspace: string, requested: string, mode: ResourceKey['mode']): ResourceKey {
  return { key: `path:${path.resolve(workspace, requested)}`, mode };
}

/** Splits text into lines; a final newline ends the last line rather than starting an empty one. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** A path as the model should see it: relative to the workspace, with `/` separators. */
export function displayPath(root: string, absolute: string): string {
  const rel = path.relative(root, absolute);
  return rel === '' ? '.' : rel.split(path.sep).join('/');
}

/**
 * Replaces `file` with `bytes` atomically: a temp file beside it, fsync'd, renamed over it. A
 * reader sees the old content or the new, never a mix; a crash leaves at worst a stray temp file.
 * `keepMode` is the mode of the file replaced; a new file gets 0644 less the umask.
 */
export async function replaceFileAtomic(file: string, bytes: Uint8Array, keepMode?: number): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    // 'wx' is O_CREAT|O_EXCL: it never follows a symlink planted at the temp name.
    const handle = await open(tmp, 'wx', 0o644);
    try {
      await handle.writeFile(bytes);
      // open() applies the umask: a replaced file keeps the mode it had, not what the umask leaves.
      if (keepMode !== undefined) await handle.chmod(keepMode & 0o7777);
      // fsync before rename: otherwise a power loss can leave the new name on empty content.
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/**
 * The first match of a pattern in a line, or -1: a JavaScript regex, or the literal text when the
 * pattern is not a valid regex (e.g. "foo(": the model most likely meant the text).
 */
export function lineMatcher(pattern: string): (line: string) => number {
  try {
    const regex = new RegExp(pattern);
    return (line) => line.search(regex);
  } catch {
    return (line) => line.indexOf(pattern);
  }
}

/** A directory entry's identity: where it is, its inode, and when it (or its entries) last changed. */
export interface PathStamp {
  path: string;
  dev: string;
  ino: string;
  mtimeNs: string;
  ctimeNs: string;
}

/**
 * Which file a path names right now, as JSON (for `tool/start`'s preimage). An existing file:
 * its inode, size and times; `replaceFileAtomic` renames a new inode over the old one, so the
 * same identity later means it was never replaced. An absent one: the stamp of its nearest
 * existing directory (up to `root`), whose times change when an entry is added to or removed
 * from it, so the same stamp later means nothing was created there (and then deleted) either.
 * Synchronous: a few stats, taken in the tick a start is staged. Errors other than "no such
 * file" throw.
 */
export function fileIdentity(file: string, root: string): FileIdentity {
  const st = statOrNull(file);
  if (st) return { exists: true, path: file, dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs) };
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const d = statOrNull(dir);
    if (d) return { exists: false, dir: { path: dir, dev: String(d.dev), ino: String(d.ino), mtimeNs: String(d.mtimeNs), ctimeNs: String(d.ctimeNs) } };
    if (dir === root || path.dirname(dir) === dir) return { exists: false, dir: null };
  }
}

function statOrNull(p: string) {
  try {
    return statSync(p, { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw err;
  }
}

/** A file's identity as `fileIdentity` records it. */
export type FileIdentity =
  | ({ exists: true; size: string } & PathStamp)
  | { exists: false; dir: PathStamp | null };

const STAMP_KEYS = ['path', 'dev', 'ino', 'mtimeNs', 'ctimeNs'] as const;

function isStamp(v: unknown): v is PathStamp {
  return v !== null && typeof v === 'object' && STAMP_KEYS.every((k) => typeof (v as Record<string, unknown>)[k] === 'string');
}

/** True when `recorded` is a file identity (a preimage some other tool version wrote may not be). */
export function isFileIdentity(recorded: unknown): recorded is FileIdentity {
  if (recorded === null || typeof recorded !== 'object') return false;
  const r = recorded as Record<string, unknown>;
  if (r.exists === false) return r.dir === null || isStamp(r.dir);
  return r.exists === true && typeof r.size === 'string' && isStamp(r);
}

const sameStamp = (a: PathStamp, b: PathStamp): boolean => STAMP_KEYS.every((k) => a[k] === b[k]);

/**
 * True when two identities prove nothing happened between them: the same unchanged file, or no
 * file and the same unchanged directory where it would be. An absent file with no directory
 * stamp proves nothing.
 */
export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  if (a.exists && b.exists) return a.size === b.size && sameStamp(a, b);
  if (!a.exists && !b.exists) return a.dir !== null && b.dir !== null && sameStamp(a.dir, b.dir);
  return false;
}
