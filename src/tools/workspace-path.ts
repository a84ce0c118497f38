import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../protocol/errors.js';

/** Options of `resolveInWorkspace`. */
export interface ResolveOptions {
  /** Fail with `tool.not_found` when the target does not exist. */
  mustExist?: boolean;
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
