import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';
import { resolveInWorkspace } from '../workspace-path.js';
import { pathResource } from './text-file.js';

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
  // Rewriting the same bytes is harmless, but a later write may have landed since: after a
  // crash mid-call the outcome is unknown and a person decides.
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (input, { workspace }) => [pathResource(workspace, input.path, 'write')],
  timeoutMs: 30_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const file = await resolveInWorkspace(ctx.workspace, input.path);
    const existing = await stat(file).catch(() => null);
    if (existing?.isDirectory()) throw new ToolError('tool.is_directory', `${input.path} is a directory; pass a file path`);
    const dir = path.dirname(file);
    // The resolved path is real up to its deepest existing ancestor, so what mkdir creates is inside.
    await mkdir(dir, { recursive: true });
    const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
    const bytes = Buffer.from(input.content, 'utf8');
    try {
      const handle = await open(tmp, 'wx', existing ? existing.mode & 0o7777 : 0o644);
      try {
        await handle.writeFile(bytes);
        // fsync before rename: otherwise a power loss can leave the new name on empty content.
        await handle.sync();
      } finally {
        await handle.close();
      }
      ctx.signal.throwIfAborted();
      await rename(tmp, file);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
    return { ok: true, output: `wrote ${bytes.length} bytes to ${input.path}` };
  },
};
