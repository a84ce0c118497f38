import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ReconcileVerdict, ToolDefinition } from '../tool.js';
import { isInside, resolveInWorkspace, writeTarget } from '../workspace-path.js';
import { fileIdentity, isFileIdentity, pathResource, replaceFileAtomic, sameIdentity } from './text-file.js';
import { writeFilePreview } from './write-file-preview.js';

const WriteFileInput = z.strictObject({
  path: z.string().min(1).describe('File path relative to the workspace root; parent directories are created'),
  content: z.string().describe('The complete new content of the file'),
});
/** Input of `write_file`. */
export type WriteFileInput = z.infer<typeof WriteFileInput>;

/** `write_file {path, content}`: replaces a file's content atomically (temp file + rename). */
export const writeFileTool: ToolDefinition<WriteFileInput> = {
  name: 'write_file',
  version: '1',
  description: 'Write a text file in the workspace, replacing its whole content. Creates parent directories as needed.',
  input: WriteFileInput,
  level: 'write',
  // After a crash mid-call the file tells what happened (see `reconcile`): a blind rewrite could
  // undo a later write, so the call runs again only when the file is provably untouched.
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'reconcile' } }),
  resources: (input, { workspace }) => [pathResource(workspace, input.path, 'write')],
  // the file's identity before the write: the write renames a new inode over it, so an unchanged
  // identity later proves it never landed
  preimage: (input, { workspace }) => {
    const root = path.resolve(workspace);
    const file = path.resolve(root, input.path);
    // a path outside is refused when the call runs: nothing to record
    return isInside(root, file) ? fileIdentity(file, root) : undefined;
  },
  reconcile,
  // a person approving the write sees the diff against the file as it is now
  preview: writeFilePreview,
  timeoutMs: 30_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const file = await resolveInWorkspace(ctx.workspace, input.path, { write: true });
    // Checked before mkdir, so a refused write creates no directory either.
    const existing = await writeTarget(file, input.path, 'write_file');
    // The resolved path is real up to its deepest existing ancestor, so what mkdir creates is inside.
    await mkdir(path.dirname(file), { recursive: true });
    const bytes = Buffer.from(input.content, 'utf8');
    ctx.signal.throwIfAborted();
    await replaceFileAtomic(file, bytes, existing?.mode);
    return { ok: true, output: `wrote ${bytes.length} bytes to ${input.path}` };
  },
};

/**
 * After a crash between `tool/start` and its result: `applied` when the file holds exactly the
 * content the call was to write; `not_applied` when nothing happened to it since the preimage in
 * `tool/start` (the same inode, size and times; or still absent, its directory unchanged), so
 * running the call again writes it once; otherwise `unknown` (it changed, but not to this
 * content). Reads only.
 */
async function reconcile(input: WriteFileInput, ctx: { workspace: string; preimage: unknown }): Promise<ReconcileVerdict> {
  const root = path.resolve(ctx.workspace);
  const file = await resolveInWorkspace(ctx.workspace, input.path);
  const intended = Buffer.from(input.content, 'utf8');
  const current = await readFile(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (current?.equals(intended)) return { status: 'applied', output: `wrote ${intended.length} bytes to ${input.path}` };
  if (!isFileIdentity(ctx.preimage)) {
    return { status: 'unknown', reason: `${input.path} does not hold the content the call was to write, and its start recorded no preimage to tell whether it ran` };
  }
  // the same lexical path the preimage was taken of (the read above resolved links, inside the workspace)
  if (sameIdentity(ctx.preimage, fileIdentity(path.resolve(root, input.path), root))) return { status: 'not_applied' };
  return { status: 'unknown', reason: `${input.path} changed since the call started, but not to the content the call was to write` };
}
