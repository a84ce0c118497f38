import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolDefinition } from '../tool.js';
import { resolveInWorkspace, writeTarget } from '../workspace-path.js';
import { pathResource, replaceFileAtomic } from './text-file.js';

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
