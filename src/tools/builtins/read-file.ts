import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';
import { openForRead } from '../workspace-path.js';
import { looksBinary, pathResource, splitLines } from './text-file.js';

/** Lines returned when the model gives no `limit`. */
export const DEFAULT_READ_LIMIT = 2000;
/** Files larger than this are refused: paging lines still reads the whole file into memory. */
export const MAX_READ_BYTES = 16 * 1024 * 1024;

const ReadFileInput = z.strictObject({
  path: z.string().min(1).describe('File path relative to the workspace root'),
  offset: z.number().int().min(1).optional().describe('1-based line to start at (default 1)'),
  limit: z.number().int().min(1).optional().describe(`Maximum number of lines to return (default ${DEFAULT_READ_LIMIT})`),
});
/** Input of `read_file`. */
export type ReadFileInput = z.infer<typeof ReadFileInput>;

/** `read_file {path, offset?, limit?}`: reads lines of a text file in the workspace. */
export const readFileTool: ToolDefinition<ReadFileInput> = {
  name: 'read_file',
  version: '1',
  description:
    'Read a text file in the workspace. Returns its lines; for long files pass offset (1-based) and limit to page through it.',
  input: ReadFileInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: (input, { workspace }) => [pathResource(workspace, input.path, 'read')],
  timeoutMs: 30_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const { handle, info } = await openForRead(ctx.workspace, input.path, 'read_file');
    let bytes: Buffer;
    try {
      if (info.size > MAX_READ_BYTES) {
        throw new ToolError(
          'tool.too_large',
          `${input.path} is ${info.size} bytes, over the ${MAX_READ_BYTES}-byte limit of read_file; use search to find the lines you need`,
        );
      }
      bytes = await handle.readFile({ signal: ctx.signal });
    } finally {
      await handle.close();
    }
    if (looksBinary(bytes)) {
      throw new ToolError('tool.binary_file', `${input.path} looks like a binary file (it contains NUL bytes); read_file reads text files only`);
    }
    const lines = splitLines(bytes.toString('utf8'));
    const total = lines.length;
    const offset = input.offset ?? 1;
    const limit = input.limit ?? DEFAULT_READ_LIMIT;
    if (total === 0) return { ok: true, output: `[${input.path} is empty]` };
    if (offset > total) {
      throw new ToolError('tool.invalid_range', `offset ${offset} is past the end of ${input.path}, which has ${total} lines`);
    }
    const end = Math.min(total, offset - 1 + limit);
    const body = lines.slice(offset - 1, end).join('\n');
    if (offset === 1 && end === total) return { ok: true, output: body };
    const next = end < total ? `; pass offset=${end + 1} to read more` : '';
    return { ok: true, output: `[lines ${offset}-${end} of ${total} in ${input.path}${next}]\n${body}` };
  },
};
