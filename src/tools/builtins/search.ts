import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolDefinition } from '../tool.js';
import { resolveInWorkspace } from '../workspace-path.js';
import { displayPath, looksBinary, pathResource, splitLines } from './text-file.js';

/** Matches reported before the search stops. */
export const MAX_SEARCH_MATCHES = 200;
/** Files larger than this are skipped: they are rarely source and slow every search. */
export const MAX_SEARCH_FILE_BYTES = 1024 * 1024;
/** Matched lines are cut to this many characters so one minified line cannot flood the output. */
const MAX_LINE_CHARS = 300;
const SKIP_DIRS = new Set(['.git', 'node_modules']);

const SearchInput = z.strictObject({
  pattern: z.string().min(1).describe('Regular expression (JavaScript syntax) or literal text to find'),
  path: z.string().min(1).optional().describe('File or directory to search, relative to the workspace root (default ".")'),
});
/** Input of `search`. */
export type SearchInput = z.infer<typeof SearchInput>;

/** `search {pattern, path?}`: finds lines matching a regex (or literal text) in workspace files. */
export const searchTool: ToolDefinition<SearchInput> = {
  name: 'search',
  version: '1',
  description:
    'Search text files in the workspace for a regular expression (or literal text when it is not a valid regex). ' +
    'Returns "path:line: text" for each match; skips .git, node_modules, binary files and files over 1 MiB.',
  input: SearchInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: (input, { workspace }) => [pathResource(workspace, input.path ?? '.', 'read')],
  timeoutMs: 60_000,
  async execute(input, ctx) {
    ctx.signal.throwIfAborted();
    const root = await realpath(ctx.workspace);
    const start = await resolveInWorkspace(ctx.workspace, input.path ?? '.', { mustExist: true });
    const matches = matcher(input.pattern);
    const results: string[] = [];
    let truncated = false;

    for await (const file of walk(start, ctx.signal)) {
      const info = await stat(file);
      if (info.size > MAX_SEARCH_FILE_BYTES) continue;
      const bytes = await readFile(file);
      if (looksBinary(bytes)) continue;
      const lines = splitLines(bytes.toString('utf8'));
      for (const [i, line] of lines.entries()) {
        if (!matches(line)) continue;
        if (results.length === MAX_SEARCH_MATCHES) {
          truncated = true;
          break;
        }
        const text = line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line;
        results.push(`${displayPath(root, file)}:${i + 1}: ${text}`);
      }
      if (truncated) break;
    }
    if (results.length === 0) return { ok: true, output: `no matches for ${JSON.stringify(input.pattern)}` };
    const note = truncated ? `\n[stopped at ${MAX_SEARCH_MATCHES} matches; narrow the pattern or the path]` : '';
    return { ok: true, output: results.join('\n') + note };
  },
};

function matcher(pattern: string): (line: string) => boolean {
  try {
    const regex = new RegExp(pattern);
    return (line) => regex.test(line);
  } catch {
    // Not a valid regex (e.g. "foo(" ): the model most likely meant the literal text.
    return (line) => line.includes(pattern);
  }
}

/**
 * Regular files under `start` in sorted order, so results are stable. Symlinks are not
 * followed: they could lead out of the workspace or into a cycle.
 */
async function* walk(start: string, signal: AbortSignal): AsyncGenerator<string> {
  const info = await stat(start);
  if (!info.isDirectory()) {
    yield start;
    return;
  }
  const entries = await readdir(start, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    signal.throwIfAborted();
    const full = path.join(start, entry.name);
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) yield* walk(full, signal);
    } else if (entry.isFile()) {
      yield full;
    }
  }
}
