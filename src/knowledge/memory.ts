import { projectRoot } from './project-docs.js';
import { createHash, randomBytes } from 'node:crypto';
import { constants, realpathSync } from 'node:fs';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { ToolError } from '../protocol/errors.js';
import { acquireFileLock } from './memory-lock.js';
import { mergeRanges } from './retriever.js';

/**
 * Memory (design §4 of issue 30): two Markdown files the agent keeps across sessions, outside
 * the repository, under the user's config dir. `MEMORY.md` is per workspace (environment facts,
 * verified ways of working); `USER.md` is per user (preferences). Each file's version is the
 * sha256 of its bytes. Edits take a file lock and apply to the file as it is inside the lock, so
 * an edit made meanwhile (by a person or another agent) is kept, never overwritten.
 */

/** Which memory file: the workspace's `MEMORY.md` or the user's `USER.md`. */
export type MemoryFile = 'memory' | 'user';

/** Where a workspace's memory files are. */
export interface MemoryPaths {
  memory: string;
  user: string;
  /** `<basename>-<12 hex of sha256(realpath)>`: the workspace's folder under `<userConfigDir>/memory/`. */
  workspaceKey: string;
}

/** One memory file as read: its content and version (`digest`). */
export interface MemorySnapshot {
  file: MemoryFile;
  path: string;
  content: string;
  /** `sha256:<hex>` of the bytes; '' when the file does not exist. */
  digest: string;
  bytes: number;
  exists: boolean;
}

/** An edit of a memory file: append an entry, replace or remove text that occurs exactly once. */
export type MemoryEdit = { action: 'add'; text: string } | { action: 'replace'; oldText: string; text: string } | { action: 'remove'; oldText: string };

/** Stable codes of memory errors. */
export const MEMORY_CODES = {
  notFound: 'memory.not_found',
  ambiguous: 'memory.ambiguous',
  emptyText: 'memory.empty_text',
  tooLarge: 'memory.too_large',
  unreadable: 'memory.unreadable',
  writeFailed: 'memory.write_failed',
  lockLost: 'memory.lock_lost',
  conflict: 'memory.conflict',
  emptyQuery: 'memory.empty_query',
} as const;

/** A memory file may not grow past this by an edit: what is loaded at session start must stay small. */
export const MAX_MEMORY_BYTES = 256 * 1024;
/** A file larger than this (grown by hand) is not read at all. */
const MAX_READ_BYTES = 4 * 1024 * 1024;
const HEADINGS: Record<MemoryFile, string> = { memory: '# Memory', user: '# User preferences' };
const FILE_NAMES: Record<MemoryFile, string> = { memory: 'MEMORY.md', user: 'USER.md' };

/**
 * The memory files of `workspace`: `USER.md` at `<userConfigDir>/USER.md`, `MEMORY.md` at
 * `<userConfigDir>/memory/<key>/MEMORY.md`. The key names the workspace's project (its git top
 * level, as AGENTS.md's broadest level: a run from a sub-folder shares the project's memory) by
 * its real path, so a symlinked or relative path finds the same memory and two projects of one
 * name do not share it.
 */
export function memoryPaths(workspace: string, userConfigDir: string): MemoryPaths {
  const abs = projectRoot(resolve(workspace));
  let real = abs;
  try {
    real = realpathSync(abs);
  } catch {
    // a workspace that does not exist (yet) is keyed by its absolute path
  }
  const hash = createHash('sha256').update(real).digest('hex').slice(0, 12);
  const name = basename(real).replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_').slice(0, 40) || 'root';
  const workspaceKey = `${name}-${hash}`;
  const base = resolve(userConfigDir);
  return { memory: join(base, 'memory', workspaceKey, FILE_NAMES.memory), user: join(base, FILE_NAMES.user), workspaceKey };
}

/** `sha256:<hex>` of some bytes: a memory file's version. */
export function memoryDigest(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/**
 * Reads one memory file. A missing file is an empty snapshot (`exists: false`, digest '');
 * a symlink, a directory or a file over 4 MiB is refused with `memory.unreadable`.
 */
export async function readMemory(paths: MemoryPaths, file: MemoryFile): Promise<MemorySnapshot> {
  const path = paths[file];
  let handle;
  try {
    // O_NOFOLLOW: a symlink planted in place of the file must not make us read (or later replace) another file
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { file, path, content: '', digest: '', bytes: 0, exists: false };
    throw unreadable(path, code === 'ELOOP' ? 'it is a symbolic link' : (err as Error).message, err);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw unreadable(path, 'it is not a regular file');
    if (info.size > MAX_READ_BYTES) throw unreadable(path, `it is ${info.size} bytes, over the ${MAX_READ_BYTES} a memory file may have`);
    const data = await handle.readFile();
    return { file, path, content: data.toString('utf8'), digest: memoryDigest(data), bytes: data.length, exists: true };
  } finally {
    await handle.close();
  }
}

function snapshotOf(file: MemoryFile, path: string, content: string): MemorySnapshot {
  const data = Buffer.from(content, 'utf8');
  return { file, path, content, digest: memoryDigest(data), bytes: data.length, exists: true };
}

function unreadable(path: string, why: string, cause?: unknown): ToolError {
  return new ToolError(MEMORY_CODES.unreadable, `cannot read the memory file ${path}: ${why}`, {
    cause,
    hint: 'replace it with a plain Markdown file, or remove it',
  });
}

/**
 * Edits a memory file under its lock with compare-by-digest: inside the lock the file is read
 * again and the edit applies to what is there now, so an external edit is never overwritten.
 * `add` appends `- <text>`, its further lines indented under the bullet and blank ones dropped
 * (creating the file, 0600 in 0700 dirs, with its heading); adding an entry the file already
 * holds changes nothing, so an edit run again after a crash does not repeat it.
 * `replace` / `remove` need `oldText` exactly once. Written atomically (temp file, fsync, rename).
 */
export async function editMemory(
  paths: MemoryPaths, file: MemoryFile, edit: MemoryEdit, opts: { lockTimeoutMs?: number } = {},
): Promise<{ before: MemorySnapshot; after: MemorySnapshot; changed: boolean }> {
  return writeLocked(paths, file, opts.lockTimeoutMs, 'editing', (before) => applyEdit(before, edit));
}

/**
 * Replaces a whole memory file with `content`, under its lock, only if its version is still
 * `expectedDigest` ('' for "does not exist yet"): `actorloop memory --edit` saves what a person
 * wrote this way, so an entry an agent added while the editor was open is not lost.
 */
export async function writeMemory(
  paths: MemoryPaths, file: MemoryFile, content: string, opts: { expectedDigest: string; lockTimeoutMs?: number },
): Promise<{ before: MemorySnapshot; after: MemorySnapshot; changed: boolean }> {
  return writeLocked(paths, file, opts.lockTimeoutMs, 'writing', (before) => {
    if (before.digest !== opts.expectedDigest) {
      throw new ToolError(MEMORY_CODES.conflict, `${paths[file]} changed since it was read (now ${before.digest || 'missing'}, read as ${opts.expectedDigest || 'missing'})`, {
        retryable: true,
        hint: 'read it again and make the change on what it holds now',
      });
    }
    return content;
  });
}

/**
 * Writes what `next` makes of the file as it is inside its lock (read again there): nothing when
 * it is unchanged, refused past its bound, and not at all when the lock was taken over meanwhile
 * (a holder paused past the stale age may have lost it: then someone else edits now).
 */
async function writeLocked(
  paths: MemoryPaths, file: MemoryFile, lockTimeoutMs: number | undefined, doing: string, next: (before: MemorySnapshot) => string,
): Promise<{ before: MemorySnapshot; after: MemorySnapshot; changed: boolean }> {
  const path = paths[file];
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const lock = await acquireFileLock(path, lockTimeoutMs);
  try {
    const before = await readMemory(paths, file);
    const content = next(before);
    if (before.exists && content === before.content) return { before, after: before, changed: false };
    checkBound(file, content);
    if (!(await lock.held())) {
      throw new ToolError(MEMORY_CODES.lockLost, `the lock on ${path} was taken over while ${doing}; nothing was written`, { retryable: true, hint: 'run the edit again' });
    }
    await writeAtomic(path, content);
    return { before, after: snapshotOf(file, path, content), changed: true };
  } finally {
    await lock.release();
  }
}

function checkBound(file: MemoryFile, content: string): void {
  const bytes = Buffer.byteLength(content);
  if (bytes > MAX_MEMORY_BYTES) {
    throw new ToolError(MEMORY_CODES.tooLarge, `${FILE_NAMES[file]} would be ${bytes} bytes, over the ${MAX_MEMORY_BYTES} a memory file may have`, {
      hint: 'remove entries that are no longer true, or replace several with one shorter entry',
    });
  }
}

/** The heading a new memory file starts with. */
export function memoryHeading(file: MemoryFile): string {
  return `${HEADINGS[file]}\n`;
}

/** The content after an edit, or a ToolError for an edit the current content does not allow. */
function applyEdit(snap: MemorySnapshot, edit: MemoryEdit): string {
  const current = snap.exists && snap.content.trim() !== '' ? snap.content : `${HEADINGS[snap.file]}\n`;
  switch (edit.action) {
    case 'add': {
      const text = edit.text.trim();
      if (text === '') throw new ToolError(MEMORY_CODES.emptyText, 'the entry to add is empty', { hint: 'give the fact or preference to remember as text' });
      // an entry's lines stay together, indented under its bullet: a blank line would end the entry
      const entry = `- ${text.split(/\r?\n/).filter((l) => l.trim() !== '').map((l, i) => (i === 0 ? l : `  ${l.trimEnd()}`)).join('\n')}`;
      if (containsEntry(current, entry)) return current;
      const sep = current.endsWith('\n\n') ? '' : current.endsWith('\n') ? (current.trimEnd() === HEADINGS[snap.file] ? '\n' : '') : '\n';
      return `${current}${sep}${entry}\n`;
    }
    case 'replace':
      return spliceOnce(snap, current, edit.oldText, edit.text);
    case 'remove':
      return spliceOnce(snap, current, edit.oldText, null);
  }
}

function containsEntry(content: string, entry: string): boolean {
  const at = content.indexOf(entry);
  return at >= 0 && (at === 0 || content[at - 1] === '\n') && (at + entry.length === content.length || content[at + entry.length] === '\n');
}

/** Replaces (or removes, `text` null) the one occurrence of `oldText`; a removed whole line goes with its line break. */
function spliceOnce(snap: MemorySnapshot, content: string, oldText: string, text: string | null): string {
  const name = FILE_NAMES[snap.file];
  if (oldText === '') throw new ToolError(MEMORY_CODES.emptyText, 'old_text is empty', { hint: `quote the text of ${name} to ${text === null ? 'remove' : 'replace'}` });
  const found: number[] = [];
  for (let at = content.indexOf(oldText); at >= 0; at = content.indexOf(oldText, at + 1)) found.push(at);
  if (found.length === 0) {
    throw new ToolError(MEMORY_CODES.notFound, `old_text was not found in ${name}${snap.exists ? '' : ' (the file does not exist yet)'}`, {
      hint: `it may have changed since you read it: search it again with memory_search and quote the text exactly as it is now`,
    });
  }
  if (found.length > 1) {
    throw new ToolError(MEMORY_CODES.ambiguous, `old_text was found ${found.length} times in ${name}`, {
      hint: 'quote more of the surrounding text so that it occurs exactly once',
    });
  }
  const at = found[0]!;
  let start = at;
  let end = at + oldText.length;
  if (text === null) {
    // what is left of the line(s) is only a bullet or blank: take the whole line with it
    const lineStart = content.lastIndexOf('\n', start - 1) + 1;
    const nl = content.indexOf('\n', end);
    const lineEnd = nl < 0 ? content.length : nl;
    const rest = content.slice(lineStart, start) + content.slice(end, lineEnd);
    if (/^\s*(?:[-*+]\s*)?$/.test(rest)) {
      const wasEntry = /^\s*[-*+]\s/.test(content.slice(lineStart, lineEnd));
      start = lineStart;
      end = nl < 0 ? lineEnd : nl + 1;
      // the lines indented under a removed entry are part of it: left behind they would join the entry above
      while (wasEntry && end < content.length) {
        const n = content.indexOf('\n', end);
        if (!/^ {2,}\S/.test(content.slice(end, n < 0 ? content.length : n))) break;
        end = n < 0 ? content.length : n + 1;
      }
    }
  }
  return content.slice(0, start) + (text ?? '') + content.slice(end);
}

/** Temp file in the same directory, fsync, rename over, fsync the directory: a crash leaves the old file or the new one. */
async function writeAtomic(path: string, content: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw new ToolError(MEMORY_CODES.writeFailed, `cannot write ${path}: ${(err as Error).message}`, { cause: err, retryable: true });
  }
  const dir = await open(dirname(path), constants.O_RDONLY).catch(() => null);
  if (dir) {
    await dir.sync().catch(() => undefined);
    await dir.close();
  }
}

/** An index line is cut to this many characters: the index must stay small whatever the file holds. */
const INDEX_LINE_CHARS = 120;

/**
 * What the model is given of a memory file at session start: the whole content when it is
 * within `budgetBytes`; past it an index (each heading and the first line of each entry, with
 * its line number) and a note to read the rest with `memory_search`, cut to the budget (the note
 * and one index line are given even past a budget too small for them). Deterministic: the same
 * snapshot and budget give the same text.
 */
export function memoryContextText(snapshot: MemorySnapshot, budgetBytes: number): { text: string; summarized: boolean } {
  if (snapshot.bytes <= budgetBytes) return { text: snapshot.content, summarized: false };
  const name = FILE_NAMES[snapshot.file];
  const lines = snapshot.content.split(/\r?\n/);
  const index: string[] = [];
  for (const [i, line] of lines.entries()) {
    if (/^#{1,6}\s/.test(line) || /^(?:[-*+]|\d+[.)])\s+\S/.test(line)) {
      index.push(`${i + 1}: ${line.length > INDEX_LINE_CHARS ? `${line.slice(0, INDEX_LINE_CHARS - 1)}…` : line}`);
    }
  }
  const head =
    `${name} is ${snapshot.bytes} bytes, more than the ${budgetBytes} loaded at session start, so only its index is here: ` +
    'each heading and the first line of each entry, with its line number. Read entries with memory_search.\n';
  let text = head;
  let shown = 0;
  for (const line of index) {
    // the note about what was left out must fit too
    if (Buffer.byteLength(text) + Buffer.byteLength(line) + 1 + 60 > budgetBytes && shown > 0) break;
    text += `${line}\n`;
    shown++;
  }
  if (shown < index.length) text += `(${index.length - shown} more entries not shown)\n`;
  return { text, summarized: true };
}

/** One excerpt of a memory file that `searchMemory` found. */
export interface MemoryExcerpt {
  file: MemoryFile;
  path: string;
  /** The version of the file the excerpt was read from. */
  digest: string;
  startLine: number;
  endLine: number;
  text: string;
}

/**
 * Excerpts of both memory files with lines matching any word of `query` (case-insensitive),
 * `contextLines` around each match, overlapping ranges merged, best first (most distinct words,
 * then most matching lines), at most `maxResults`.
 */
export async function searchMemory(
  paths: MemoryPaths, query: string, opts: { maxResults?: number; contextLines?: number } = {},
): Promise<MemoryExcerpt[]> {
  const words = [...new Set(query.toLowerCase().split(/\s+/).filter((w) => w !== ''))];
  if (words.length === 0) throw new ToolError(MEMORY_CODES.emptyQuery, 'the memory search query is empty', { hint: 'give one or more words to look for' });
  const context = Math.max(0, opts.contextLines ?? 2);
  const found: Array<MemoryExcerpt & { words: number; hits: number; order: number }> = [];
  for (const [order, file] of (['memory', 'user'] as const).entries()) {
    const snap = await readMemory(paths, file);
    if (!snap.exists) continue;
    const lines = snap.content.split(/\r?\n/);
    const hits = lines.flatMap((l, i) => (words.some((w) => l.toLowerCase().includes(w)) ? [i] : []));
    for (const [from, to] of mergeRanges(hits, context, lines.length)) {
      const slice = lines.slice(from, to + 1);
      const lower = slice.join('\n').toLowerCase();
      found.push({
        file, path: snap.path, digest: snap.digest, startLine: from + 1, endLine: to + 1, text: slice.join('\n'),
        words: words.filter((w) => lower.includes(w)).length, hits: hits.filter((h) => h >= from && h <= to).length, order,
      });
    }
  }
  found.sort((a, b) => b.words - a.words || b.hits - a.hits || a.order - b.order || a.startLine - b.startLine);
  return found.slice(0, opts.maxResults ?? 10).map(({ file, path, digest, startLine, endLine, text }) => ({ file, path, digest, startLine, endLine, text }));
}
