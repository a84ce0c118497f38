import { constants } from 'node:fs';
import { lstat, open, readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolContext, ToolDefinition, ToolResult } from '../tool.js';
import { assertOwnFile, resolveInWorkspace } from '../workspace-path.js';
import { findRipgrep, ripgrepSearch, type SearchMatch, type SearchOutcome } from './ripgrep.js';
import { displayPath, lineMatcher, looksBinary, pathResource, splitLines } from './text-file.js';

/** Matches reported before the search stops. */
export const MAX_SEARCH_MATCHES = 200;
/** Files larger than this are skipped: they are rarely source and slow every search. */
export const MAX_SEARCH_FILE_BYTES = 1024 * 1024;
/** Matched lines are cut to this many characters so one minified line cannot flood the output. */
const MAX_LINE_CHARS = 300;
const SKIP_DIRS = new Set(['.git', 'node_modules']);
const SNIFF_BYTES = 8192;

const SearchInput = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .describe('Regular expression (the common syntax: . * + ? [] () | ^ $) or literal text, taken literally when it is not a valid regex'),
  path: z.string().min(1).optional().describe('File or directory to search, relative to the workspace root (default ".")'),
});
/** Input of `search`. */
export type SearchInput = z.infer<typeof SearchInput>;

/**
 * `search {pattern, path?}`: finds lines matching a regex (or literal text) in workspace files,
 * with ripgrep when it is on PATH and a JavaScript walk otherwise; both give the same output.
 * Hard-linked files are skipped (their content may be a file outside the workspace).
 */
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
  execute: search,
};

async function search(input: SearchInput, ctx: ToolContext): Promise<ToolResult> {
  ctx.signal.throwIfAborted();
  const requested = input.path ?? '.';
  const root = await realpath(ctx.workspace);
  const start = await resolveInWorkspace(ctx.workspace, requested, { mustExist: true });
  const info = await lstat(start);
  // A file named explicitly gets the reason it cannot be searched; inside a walk it is skipped.
  if (!info.isDirectory()) assertOwnFile(info, requested, 'read', 'search');
  let outcome: SearchOutcome | null = null;
  // rg refuses a line break in a regex and splits a literal on it; no line can hold one anyway.
  const rg = /[\r\n]/.test(input.pattern) ? null : await findRipgrep(ctx.env, root);
  if (rg) {
    outcome = await ripgrepSearch({
      rg,
      pattern: input.pattern,
      start,
      cwd: root,
      maxFileBytes: MAX_SEARCH_FILE_BYTES,
      limit: MAX_SEARCH_MATCHES,
      signal: ctx.signal,
      logger: ctx.logger,
      accept: searchable,
    });
  }
  outcome ??= await jsSearch(input.pattern, start, ctx.signal);
  const { matches, truncated } = outcome;
  if (matches.length === 0) return { ok: true, output: `no matches for ${JSON.stringify(input.pattern)}` };
  const lines = matches.map((m) => `${displayPath(root, m.file)}:${m.line}: ${cut(m.text)}`);
  const note = truncated ? `\n[stopped at ${MAX_SEARCH_MATCHES} matches; narrow the pattern or the path]` : '';
  return { ok: true, output: lines.join('\n') + note };
}

function cut(line: string): string {
  return line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line;
}

async function jsSearch(pattern: string, start: string, signal: AbortSignal): Promise<SearchOutcome> {
  const matches = matcher(pattern);
  const found: SearchMatch[] = [];
  for await (const file of walk(start, signal)) {
    const bytes = await readSearchable(file);
    if (!bytes) continue;
    for (const [i, line] of splitLines(bytes.toString('utf8')).entries()) {
      if (!matches(line)) continue;
      if (found.length === MAX_SEARCH_MATCHES) return { matches: found, truncated: true };
      found.push({ file, line: i + 1, text: line });
    }
  }
  return { matches: found, truncated: false };
}

function matcher(pattern: string): (line: string) => boolean {
  const first = lineMatcher(pattern);
  return (line) => first(line) >= 0;
}

/**
 * The bytes of a file the search may look into, or null: a regular file with one name (a hard
 * link may be a file outside), at most MAX_SEARCH_FILE_BYTES, not binary, readable. Checked on
 * the open handle, so the file checked is the file read.
 */
async function readSearchable(file: string, sniffOnly = false): Promise<Buffer | null> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!handle) return null;
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.nlink > 1 || info.size > MAX_SEARCH_FILE_BYTES) return null;
    const length = sniffOnly ? Math.min(SNIFF_BYTES, info.size) : info.size;
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, 0);
    const bytes = buffer.subarray(0, bytesRead);
    return looksBinary(bytes) ? null : bytes;
  } catch {
    return null;
  } finally {
    await handle.close();
  }
}

/** Whether rg's matches in `file` may be reported: the checks of the JavaScript engine rg cannot make. */
async function searchable(file: string): Promise<boolean> {
  return (await readSearchable(file, true)) !== null;
}

/**
 * Regular files under `start` in path order, so results are stable: names compare as UTF-8
 * bytes, as ripgrep sorts them. Symlinks are not followed: they could lead out of the
 * workspace or into a cycle.
 */
async function* walk(start: string, signal: AbortSignal): AsyncGenerator<string> {
  const info = await lstat(start);
  if (!info.isDirectory()) {
    yield start;
    return;
  }
  const entries = await readdir(start, { withFileTypes: true }).catch(() => []);
  entries.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
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
