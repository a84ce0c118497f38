import { constants, type Stats } from 'node:fs';
import { type FileHandle, lstat, open, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../protocol/errors.js';
import { protectedPart } from './protected-paths.js';

/** Options of `resolveInWorkspace`. */
export interface ResolveOptions {
  /** Fail with `tool.not_found` when the target does not exist. */
  mustExist?: boolean;
  /**
   * The call writes the target: refuse one that symbolic links lead into a protected path
   * (protected-paths.ts) its name does not show. The policy judged the name; a protected name
   * it let through was allowed by a rule that names it.
   */
  write?: boolean;
}

// C0 controls and DEL: NUL truncates paths in C APIs, newlines forge log lines and prompts.
const CONTROL = /[\u0000-\u001f\u007f]/;
const MAX_LINK_HOPS = 40;

/**
 * Resolves a path a model asked for to a real absolute path inside the workspace, or throws a
 * ToolError whose message the model can act on. Symlinks are followed (at every level, even
 * dangling ones) before the containment check, so no link can lead out.
 */
export async function resolveInWorkspace(workspace: string, requested: string, opts: ResolveOptions = {}): Promise<string> {
  if (typeof requested !== 'string' || requested.trim() === '') {
    throw new ToolError('tool.path_invalid', 'path is empty; pass a path relative to the workspace root, such as "src/index.ts"');
  }
  if (CONTROL.test(requested)) {
    throw new ToolError(
      'tool.path_invalid',
      `path ${JSON.stringify(requested)} contains NUL or control characters; pass a plain path relative to the workspace root`,
    );
  }
  let root: string;
  try {
    root = await realpath(workspace);
  } catch (err) {
    throw new ToolError('tool.not_found', `the workspace ${workspace} does not exist`, { cause: err });
  }
  const target = await realTarget(path.resolve(root, requested), 0, requested);
  if (!isInside(root, target)) {
    throw new ToolError(
      'tool.path_outside',
      `path ${JSON.stringify(requested)} is outside the workspace; only paths inside the workspace root are allowed (use a relative path such as "src/a.ts", without "..")`,
    );
  }
  if (opts.write) {
    const via = protectedPart(relative(root, target));
    if (via !== null && protectedPart(relative(path.resolve(workspace), path.resolve(workspace, requested))) === null) {
      throw new ToolError(
        'tool.path_protected',
        `path ${JSON.stringify(requested)} leads through a symbolic link into ${via}, which the runtime protects; write files of the workspace itself`,
      );
    }
  }
  if (opts.mustExist) {
    try {
      await lstat(target);
    } catch (err) {
      throw new ToolError('tool.not_found', `no such file or directory: ${JSON.stringify(requested)}; list_dir shows what exists`, {
        cause: err,
      });
    }
  }
  return target;
}

/** True when `candidate` is `root` or below it on a separator boundary (`/w/ab` is not in `/w/a`). */
export function isInside(root: string, candidate: string): boolean {
  if (candidate === root) return true;
  const prefix = root.endsWith(path.sep) ? root : root + path.sep;
  return candidate.startsWith(prefix);
}

/** What a tool is about to do with a file, for the checks of `assertOwnFile`. */
export type FileIntent = 'read' | 'write';

/**
 * Refuses a file that is inside the workspace by name but may not be by content: a regular
 * file with more than one name (a hard link; realpath cannot see where its other names are,
 * so one may be outside), and anything that is not a regular file (a fifo blocks a reader,
 * a device or socket is not text). `info` must describe the file itself (lstat or fstat).
 */
export function assertOwnFile(info: Stats, requested: string, intent: FileIntent, tool: string): void {
  const shown = JSON.stringify(requested);
  if (info.isDirectory()) {
    throw new ToolError('tool.is_directory', `${shown} is a directory; ${intent === 'read' ? 'use list_dir to see its entries' : 'pass a file path'}`);
  }
  if (!info.isFile()) {
    throw new ToolError(
      'tool.not_regular_file',
      `${shown} is a ${fileKind(info)}, not a regular file; ${tool} only ${intent === 'read' ? 'reads' : 'writes'} regular files`,
    );
  }
  if (info.nlink > 1) {
    throw new ToolError(
      'tool.path_hard_link',
      `${shown} is a hard link (the same file has ${info.nlink} names, and one may be outside the workspace), so ${tool} refuses to ` +
        `${intent} it; ask the user to replace it with a plain copy if you need it`,
    );
  }
}

/**
 * The state of a file about to be written: null when it does not exist yet, else its stats
 * once `assertOwnFile` accepted it. `file` is a resolved path (resolveInWorkspace).
 */
export async function writeTarget(file: string, requested: string, tool: string): Promise<Stats | null> {
  let info: Stats;
  try {
    info = await lstat(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ENOTDIR') {
      throw new ToolError('tool.not_directory', `a parent of ${JSON.stringify(requested)} is a file, not a directory; pick another path`, {
        cause: err,
      });
    }
    throw err;
  }
  // resolveInWorkspace returned a real path: a link here was put in since, so resolve again.
  if (info.isSymbolicLink()) {
    throw new ToolError('tool.path_invalid', `${JSON.stringify(requested)} changed into a symbolic link while ${tool} ran; try again`);
  }
  assertOwnFile(info, requested, 'write', tool);
  return info;
}

/**
 * Opens a workspace file for reading and checks it through the open handle, so the file
 * checked is the file read: O_NOFOLLOW refuses a final component swapped for a symlink since
 * it was resolved, and O_NONBLOCK keeps a fifo from blocking the open. The caller closes it.
 */
export async function openForRead(workspace: string, requested: string, tool: string): Promise<{ file: string; handle: FileHandle; info: Stats }> {
  const file = await resolveInWorkspace(workspace, requested, { mustExist: true });
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new ToolError('tool.path_invalid', `${JSON.stringify(requested)} changed into a symbolic link while ${tool} ran; try again`, {
        cause: err,
      });
    }
    throw err;
  });
  try {
    const info = await handle.stat();
    assertOwnFile(info, requested, 'read', tool);
    return { file, handle, info };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** `candidate` relative to `root`, with `/` separators. */
function relative(root: string, candidate: string): string {
  return path.relative(root, candidate).split(path.sep).join('/');
}

function fileKind(info: Stats): string {
  if (info.isFIFO()) return 'named pipe (fifo)';
  if (info.isSocket()) return 'socket';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'device';
  if (info.isSymbolicLink()) return 'symbolic link';
  return 'special file';
}

/**
 * The real path of `p`, whose last components may not exist yet: the deepest existing
 * ancestor is realpath'd and the rest appended. A dangling symlink is followed by hand,
 * because writing through it would create its target wherever it points.
 */
async function realTarget(p: string, hops: number, requested: string): Promise<string> {
  try {
    return await realpath(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw loopError(requested, err);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
  }
  const stat = await lstat(p).catch(() => null);
  if (stat?.isSymbolicLink()) {
    if (hops >= MAX_LINK_HOPS) throw loopError(requested);
    const link = await readlink(p);
    return realTarget(path.resolve(path.dirname(p), link), hops + 1, requested);
  }
  const parent = path.dirname(p);
  if (parent === p) return p;
  return path.join(await realTarget(parent, hops, requested), path.basename(p));
}

function loopError(requested: string, cause?: unknown): ToolError {
  return new ToolError('tool.path_invalid', `path ${JSON.stringify(requested)} goes through a symbolic link loop`, { cause });
}
