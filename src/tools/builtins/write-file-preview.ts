import { FILE_HEADERS_ONLY, formatPatch, structuredPatch, type StructuredPatch } from 'diff';
import type { PreviewContext, ToolPreview } from '../tool.js';
import { openForRead, resolveInWorkspace, writeTarget } from '../workspace-path.js';
import { looksBinary, splitLines } from './text-file.js';

/** A current file (or new content) larger than this is not diffed: the person is told so and shown the new content's head. */
export const MAX_DIFF_FILE_BYTES = 1024 * 1024;
/** Lines of a new file (or of content that cannot be diffed) shown. */
export const HEAD_LINES = 20;
/** Bounds on computing a diff (it runs on the host's event loop): past them the new content's head is shown instead. */
const DIFF_TIMEOUT_MS = 100;
const MAX_DIFF_EDITS = 5_000;

/**
 * What approving `write_file {path, content}` does to the file: a unified diff against the file
 * as it is now; for a new file its size, line count and first lines. Binary content and files
 * too large to diff are said, not dumped. Reads the current file through the same checks the
 * write makes (inside the workspace, no links out, a regular file of one name): a path the write
 * would refuse throws, and the approval shows the plan with why.
 */
export async function writeFilePreview(input: { path: string; content: string }, ctx: PreviewContext): Promise<ToolPreview> {
  const shown = ctx.plan.paths[0]?.path ?? input.path;
  const file = await resolveInWorkspace(ctx.workspace, input.path);
  const existing = await writeTarget(file, input.path, 'write_file');
  const next = Buffer.from(input.content, 'utf8');
  const lines = splitLines(input.content);
  const size = `${next.length} bytes, ${lines.length} line${lines.length === 1 ? '' : 's'}`;
  if (!existing) {
    if (looksBinary(next)) return { kind: 'diff', summary: `new file ${shown}, ${next.length} bytes of binary content`, text: 'binary content: not shown' };
    return { kind: 'diff', summary: `new file ${shown}, ${size}`, ...head(shown, lines, '/dev/null') };
  }
  if (existing.size > MAX_DIFF_FILE_BYTES || next.length > MAX_DIFF_FILE_BYTES) {
    return headInstead(`replace ${shown} (${existing.size} bytes) with ${size}`, `too large to diff here (over ${MAX_DIFF_FILE_BYTES} bytes)`, shown, lines);
  }
  const current = await readCurrent(ctx.workspace, input.path);
  if (current.equals(next)) return { kind: 'diff', summary: `no change: ${shown} already holds this content (${size})`, text: '' };
  if (looksBinary(current) || looksBinary(next)) {
    return { kind: 'diff', summary: `replace ${shown} (${current.length} bytes) with ${next.length} bytes`, text: 'binary content: not shown' };
  }
  const patch = diffOf(`a/${shown}`, `b/${shown}`, current.toString('utf8'), input.content);
  if (!patch) {
    return headInstead(`replace ${shown} (${current.length} bytes) with ${size}`, 'the two versions differ too much for a readable diff', shown, lines);
  }
  let added = 0;
  let removed = 0;
  for (const h of patch.hunks) {
    for (const l of h.lines) {
      if (l.startsWith('+')) added++;
      else if (l.startsWith('-')) removed++;
    }
  }
  return { kind: 'diff', summary: `edit ${shown} (+${added} -${removed})`, text: formatPatch(patch, FILE_HEADERS_ONLY).replace(/\n$/, '') };
}

/** When there is no diff to show: why, then the new content's first lines. */
function headInstead(summary: string, why: string, shown: string, lines: string[]): ToolPreview {
  const h = head(shown, lines, null);
  return { kind: 'diff', summary, ...h, text: `${why}; the new content begins:\n${h.text}` };
}

/** The first lines of the new content, as the head of a diff (`+` lines) when `from` names the old side. */
function head(shown: string, lines: string[], from: string | null): { text: string; truncated?: boolean; omitted?: string } {
  const body = lines.slice(0, HEAD_LINES).map((l) => (from === null ? l : `+${l}`));
  const text = (from === null ? body : [`--- ${from}`, `+++ b/${shown}`, ...body]).join('\n');
  if (lines.length <= HEAD_LINES) return { text };
  return { text, truncated: true, omitted: `${lines.length - HEAD_LINES} more lines not shown` };
}

/** The current file's bytes, read through the handle that was checked (at most MAX_DIFF_FILE_BYTES + 1). */
async function readCurrent(workspace: string, requested: string): Promise<Buffer> {
  const { handle } = await openForRead(workspace, requested, 'write_file');
  try {
    const buf = Buffer.alloc(MAX_DIFF_FILE_BYTES + 1);
    let got = 0;
    while (got < buf.length) {
      const { bytesRead } = await handle.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    if (got > MAX_DIFF_FILE_BYTES) throw new Error(`${requested} grew past ${MAX_DIFF_FILE_BYTES} bytes while it was read`);
    return buf.subarray(0, got);
  } finally {
    await handle.close();
  }
}

/**
 * A unified diff with 3 lines of context; undefined when it would take more than MAX_DIFF_EDITS
 * line edits (far more than a preview shows) or DIFF_TIMEOUT_MS. Synchronous: jsdiff's callback
 * mode yields to a timer per edit step, which makes a diff of a few thousand lines take seconds.
 */
function diffOf(oldName: string, newName: string, before: string, after: string): StructuredPatch | undefined {
  return structuredPatch(oldName, newName, before, after, undefined, undefined, { context: 3, maxEditLength: MAX_DIFF_EDITS, timeout: DIFF_TIMEOUT_MS });
}
