import { ToolError } from '../protocol/errors.js';
import type { Hunk } from './unified-diff.js';

/**
 * How far (in lines) from where its header puts it a hunk is looked for, as GNU patch's
 * "offset": models miscount line numbers, but a hunk found far away may be the wrong copy.
 */
export const MAX_HUNK_OFFSET = 100;
/** Lines of expected and actual text a mismatch shows: enough to see the difference, not a dump. */
const SHOWN_LINES = 4;
const SHOWN_CHARS = 160;

/** A text file as lines, with its line break and whether its last line ends with one. */
export interface TextLines {
  lines: string[];
  eol: '\n' | '\r\n';
  finalNewline: boolean;
}

/**
 * Splits a file's text into lines. A file whose every line break is CRLF is held without the
 * CRs and joined with CRLF again, so it stays CRLF; in an LF or mixed file a CR is part of its
 * line and must match exactly.
 */
export function splitText(text: string): TextLines {
  // An empty file has no last line to lack a newline: lines added to it end with one.
  if (text === '') return { lines: [], eol: '\n', finalNewline: true };
  const lf = text.split('\n').length - 1;
  const crlf = text.split('\r\n').length - 1;
  const eol = lf > 0 && lf === crlf ? '\r\n' : '\n';
  const lines = text.split(eol);
  const finalNewline = lines[lines.length - 1] === '';
  if (finalNewline) lines.pop();
  return { lines, eol, finalNewline };
}

/** The text of `t`: the inverse of `splitText`. */
export function joinText(t: TextLines): string {
  if (t.lines.length === 0) return '';
  return t.lines.join(t.eol) + (t.finalNewline ? t.eol : '');
}

/**
 * Applies hunks to a file's lines in memory, first to last, or throws `tool.patch_mismatch`
 * saying which hunk failed and how. Context and removed lines must match exactly; only the
 * position may be off (up to MAX_HUNK_OFFSET lines, nearest first; later hunks shift by the
 * offset found for earlier ones). A missing `\ No newline at end of file` marker keeps the
 * file's own final-newline state instead of failing.
 */
export function applyHunks(t: TextLines, hunks: Hunk[], shown: string): TextLines {
  // In a CRLF file a patch line may carry its CR (`git diff` output) or not (a model's patch).
  const norm = t.eol === '\r\n' ? (s: string) => (s.endsWith('\r') ? s.slice(0, -1) : s) : (s: string) => s;
  const src = t.lines;
  const out: string[] = [];
  let cursor = 0;
  let drift = 0;
  let finalNewline = t.finalNewline;
  for (const [k, h] of hunks.entries()) {
    const old = h.oldLines.map(norm);
    const neu = h.newLines.map(norm);
    // 0-based index of the first old line; a hunk with no old lines inserts after line oldStart.
    const stated = old.length === 0 ? h.oldStart : h.oldStart - 1;
    const want = stated + drift;
    const at = locate(src, old, want, cursor);
    if (at === null) throw mismatch(shown, k, h, src, old, want, cursor);
    drift = at - stated;
    out.push(...src.slice(cursor, at), ...neu);
    cursor = at + old.length;
    if (cursor === src.length) {
      if (h.newNoEol) finalNewline = false;
      // The old last line lacked a newline and the patch says so, or the new end is a line that had one.
      else if (h.oldNoEol || neu.length === 0) finalNewline = true;
    }
  }
  out.push(...src.slice(cursor));
  return { lines: out, eol: t.eol, finalNewline };
}

/** Where `old` is in `src` nearest to `want`, at or after `lo` and within MAX_HUNK_OFFSET, else null. */
function locate(src: string[], old: string[], want: number, lo: number): number | null {
  if (old.length === 0) return want >= lo && want <= src.length ? want : null;
  const hi = src.length - old.length;
  for (let d = 0; d <= MAX_HUNK_OFFSET; d++) {
    if (want - d < lo && want + d > hi) break;
    for (const p of d === 0 ? [want] : [want - d, want + d]) {
      if (p >= lo && p <= hi && matchesAt(src, old, p)) return p;
    }
  }
  return null;
}

function matchesAt(src: string[], old: string[], p: number): boolean {
  for (let j = 0; j < old.length; j++) if (src[p + j] !== old[j]) return false;
  return true;
}

function mismatch(shown: string, k: number, h: Hunk, src: string[], old: string[], want: number, lo: number): ToolError {
  const head = `hunk ${k + 1} of ${shown} (${h.header}, patch line ${h.patchLine}) does not apply`;
  const tail = `Re-read ${shown} with read_file and make the patch against its current content. No file was changed.`;
  let why: string;
  if (old.length === 0) {
    why = `it inserts after line ${want}, but ${want < lo ? `hunk ${k} already ends at line ${lo}` : `the file has ${src.length} lines`}`;
  } else {
    // Prefer a copy after the previous hunk: that is the one a fixed header would reach.
    let elsewhere = -1;
    for (let p = lo; p + old.length <= src.length && elsewhere < 0; p++) if (matchesAt(src, old, p)) elsewhere = p;
    for (let p = 0; p < lo && elsewhere < 0; p++) if (matchesAt(src, old, p)) elsewhere = p;
    if (elsewhere >= 0 && elsewhere < lo) {
      why = `its lines are at line ${elsewhere + 1}, inside or before hunk ${k}; hunks must be in file order and must not overlap`;
    } else if (elsewhere >= 0) {
      why =
        `its lines are at line ${elsewhere + 1}, but its header puts them at line ${want + 1}, ` +
        `more than ${MAX_HUNK_OFFSET} lines away; fix the line numbers of the @@ header`;
    } else {
      why = difference(src, old, Math.max(lo, Math.min(want, src.length)));
    }
  }
  return new ToolError('tool.patch_mismatch', `${head}: ${why}.\n${tail}`);
}

/** The first line where `old` and the file differ at `at`, with a few lines of each. */
function difference(src: string[], old: string[], at: number): string {
  let j = 0;
  while (j < old.length && src[at + j] === old[j]) j++;
  const show = (lines: string[], from: number): string =>
    lines.length === 0
      ? '  (end of file)'
      : lines.map((l, i) => `  ${from + i}: ${JSON.stringify(l.length > SHOWN_CHARS ? `${l.slice(0, SHOWN_CHARS)}…` : l)}`).join('\n');
  const line = at + j + 1;
  return (
    `its context and removed lines are not in the file (nor within ${MAX_HUNK_OFFSET} lines of line ${at + 1}); ` +
    `near line ${at + 1} the first difference is at line ${line}.\nThe patch expects:\n${show(old.slice(j, j + SHOWN_LINES), line)}\n` +
    `The file has:\n${show(src.slice(at + j, at + j + SHOWN_LINES), line)}`
  );
}
