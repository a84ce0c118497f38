import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';

/**
 * Reading a text file an agent (or a cloned repository) may have planted: AGENTS.md, SKILL.md.
 * Such a file may be a symlink out of the workspace, a FIFO that blocks any reader, a device, a
 * directory, a huge file or a binary one. Each is refused with a reason a person can act on, and
 * the read never blocks and never reads more than its limit.
 */

/** What reading a text file gave: its text, nothing there, or a refusal with the reason. */
export type TextFileRead =
  | {
    kind: 'text';
    /** The decoded text (a leading byte order mark dropped). */
    text: string;
    /** The raw bytes behind `text` (at most the limit). */
    bytes: Buffer;
    /** True when the file was longer than the limit and `text` is its beginning. */
    truncated: boolean;
    /** The real path read (symlinks resolved). */
    realPath: string;
  }
  | { kind: 'missing' }
  | { kind: 'refused'; reason: string };

/** How to read: the byte limit, what to do past it, and the directory the file must resolve inside. */
export interface TextFileOptions {
  maxBytes: number;
  /** `truncate`: keep the first `maxBytes` (cut at a character boundary); `refuse`: refuse the file. */
  overLimit: 'truncate' | 'refuse';
  /** A real (symlink-free) directory the file's real path must lie in; null: anywhere. */
  within: string | null;
}

/** True when `child` is `parent` or lies under it; both absolute. */
export function isInside(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/** The real path of `path`, or `path` itself when it cannot be resolved (it does not exist). */
export async function realOrSelf(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    return path;
  }
}

/** `sha256:<hex>` of some bytes or of a string's UTF-8. */
export function sha256Digest(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Reads `path` as UTF-8 text under the rules of `opts`; never throws for what is on disk. */
export async function readTextFile(path: string, opts: TextFileOptions): Promise<TextFileRead> {
  try {
    await lstat(path);
  } catch (err) {
    if (isMissing(err)) return { kind: 'missing' };
    return { kind: 'refused', reason: `cannot be read: ${codeOf(err)}` };
  }
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    // a dangling symlink: there is nothing to read behind it
    return { kind: 'refused', reason: `is a symlink that resolves nowhere (${codeOf(err)})` };
  }
  if (opts.within !== null && !isInside(real, opts.within)) {
    return { kind: 'refused', reason: `resolves to ${real}, outside ${opts.within}` };
  }
  try {
    const st = await stat(real);
    if (!st.isFile()) return { kind: 'refused', reason: `is ${kindOf(st)}, not a regular file` };
  } catch (err) {
    return { kind: 'refused', reason: `cannot be read: ${codeOf(err)}` };
  }
  let buf: Buffer;
  let size: number;
  try {
    // O_NONBLOCK: a FIFO swapped in after the stat must not hang the reader; O_NOFOLLOW: nor a new symlink
    const handle = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    try {
      const st = await handle.stat();
      if (!st.isFile()) return { kind: 'refused', reason: `is ${kindOf(st)}, not a regular file` };
      size = st.size;
      // one byte more than the limit tells a file of exactly the limit from a longer one
      buf = Buffer.alloc(Math.min(size, opts.maxBytes) + 1);
      let got = 0;
      while (got < buf.length) {
        const { bytesRead } = await handle.read(buf, got, buf.length - got, got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      buf = buf.subarray(0, got);
    } finally {
      await handle.close();
    }
  } catch (err) {
    return { kind: 'refused', reason: `cannot be read: ${codeOf(err)}` };
  }
  const truncated = buf.length > opts.maxBytes;
  if (truncated && opts.overLimit === 'refuse') {
    return { kind: 'refused', reason: `is ${Math.max(size, buf.length)} bytes, over the limit of ${opts.maxBytes}` };
  }
  const bytes = truncated ? buf.subarray(0, characterBoundary(buf, opts.maxBytes)) : buf;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { kind: 'refused', reason: 'is not UTF-8 text' };
  }
  if (text.includes('\u0000')) return { kind: 'refused', reason: 'holds NUL bytes (a binary file, not text)' };
  return { kind: 'text', text, bytes, truncated, realPath: real };
}

/** The largest cut ≤ `limit` that does not split a UTF-8 character; `buf` holds at least `limit + 1` bytes. */
function characterBoundary(buf: Buffer, limit: number): number {
  let end = limit;
  // buf[end] is the first byte left out: while it continues a character, that character straddles the cut
  for (let back = 0; back < 3 && end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80; back++) end--;
  return end;
}

function kindOf(st: { isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean }): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a file';
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function codeOf(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? (err instanceof Error ? err.message : String(err));
}
