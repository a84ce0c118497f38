import { readdir, stat } from 'node:fs/promises';
import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';
import { resolveInWorkspace } from '../workspace-path.js';
import { pathResource } from './text-file.js';

/** Entries listed before the output is cut. */
export const MAX_DIR_ENTRIES = 1000;

const ListDirInput = z.strictObject({
  path: z.string().min(1).optional().describe('Directory path relative to the workspace root (default ".")'),
});
/** Input of `list_dir`. */
export type ListDirInput = z.infer<typeof ListDirInput>;

/** `list_dir {path}`: lists a directory, sorted, directories marked with a trailing `/`. */
export const listDirTool: ToolDefinition<ListDirInput> = {
  name: 'list_dir',
  version: '1',
  description: 'List the entries of a directory in the workspace, sorted by name; directories end with "/".',
  input: ListDirInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: (input, { workspace }) => [pathResource(workspace, input.path ?? '.', 'read')],
  timeoutMs: 30_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const requested = input.path ?? '.';
    const dir = await resolveInWorkspace(ctx.workspace, requested, { mustExist: true });
    if (!(await stat(dir)).isDirectory()) {
      throw new ToolError('tool.not_directory', `${requested} is a file, not a directory; use read_file to read it`);
    }
    // Hard links and special files are listed too: a name tells nothing of the content it
    // shares, and read_file explains its refusal when asked for one.
    const entries = await readdir(dir, { withFileTypes: true });
    // Code-unit order, not locale order: the same directory must list the same way everywhere.
    const names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (names.length === 0) return { ok: true, output: `[${requested} is empty]` };
    const shown = names.slice(0, MAX_DIR_ENTRIES);
    const note = names.length > shown.length ? `\n[${names.length - shown.length} more entries not shown]` : '';
    return { ok: true, output: shown.join('\n') + note };
  },
};
