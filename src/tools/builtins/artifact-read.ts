import { Buffer } from 'node:buffer';
import { z } from 'zod';
import { ID_PREFIXES, isId } from '../../protocol/ids.js';
import { ToolError } from '../../protocol/errors.js';
import {
  ARTIFACT_PAGE_LINES,
  countLines,
  DEFAULT_OBSERVATION_BUDGET_BYTES,
  describeBinary,
  formatBytes,
  formatCount,
  formatLines,
  isText,
} from '../observation.js';
import { createRedactor, type Redactor } from '../redact.js';
import type { ToolDefinition } from '../tool.js';
import { lineMatcher } from './text-file.js';

/** Matches `grep` reports before it stops (and the most `limit` may ask for with `grep`). */
export const MAX_ARTIFACT_GREP_MATCHES = 200;
/** Bytes of one hex-dump row; `offset`/`limit` of a binary artifact count rows. */
export const HEX_ROW_BYTES = 16;
/** Hex-dump rows returned for a binary artifact when the model gives no `limit`. */
export const DEFAULT_HEX_ROWS = 16;
/** The most hex-dump rows one call returns: 128 rows of ~78 characters stay within the budget. */
export const MAX_HEX_ROWS = 128;
// A page stops before it outgrows the observation budget, or the pipeline would store the page
// itself as another artifact. The margin leaves room for the header.
const PAGE_BUDGET_BYTES = DEFAULT_OBSERVATION_BUDGET_BYTES - 2048;
// Matched lines are cut to this many characters, around the match, so one minified line cannot flood the output.
const MAX_GREP_LINE_CHARS = 300;
// Secrets crossing the edge of a hex-dump window are still found: the scan looks this far beyond it.
const MASK_MARGIN_BYTES = 8192;

const ArtifactReadInput = z.strictObject({
  id: z.string().min(1).describe('Artifact ID from a tool output header, e.g. art_0Q2V8M4K7T9H3C6X1B5N8R2W4Z'),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('1-based line to start at (default 1); with grep, the line to start searching at; for a binary artifact, the hex-dump row (16 bytes each)'),
  limit: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      `Maximum lines to return (default ${ARTIFACT_PAGE_LINES}); with grep, maximum matches (default and at most ${MAX_ARTIFACT_GREP_MATCHES}); ` +
        `for a binary artifact, hex-dump rows (default ${DEFAULT_HEX_ROWS}, at most ${MAX_HEX_ROWS})`,
    ),
  grep: z
    .string()
    .min(1)
    .optional()
    .describe('Regular expression (JavaScript syntax), or literal text when it is not a valid regex: returns only the matching lines, numbered'),
});
/** Input of `artifact_read`. */
export type ArtifactReadInput = z.infer<typeof ArtifactReadInput>;

/** Options of `createArtifactReadTool`. */
export interface ArtifactReadOptions {
  /**
   * Masks secrets in hex dumps of binary artifacts (text artifacts were redacted when stored).
   * Default: the built-in patterns only; pass the pipeline's redactor to mask configured values too.
   */
  redactor?: Redactor;
}

/** `artifact_read {id, offset?, limit?, grep?}`: pages or greps a stored tool output. */
export function createArtifactReadTool(opts: ArtifactReadOptions = {}): ToolDefinition<ArtifactReadInput> {
  const redactor = opts.redactor ?? createRedactor();
  return {
    name: 'artifact_read',
    version: '1',
    description:
      'Read a tool output that was too large to show in full and was stored as an artifact (its ID, art_…, is in the output header). ' +
      'Pages by lines with offset (1-based) and limit, or returns the lines matching grep (a regex, or literal text) with their numbers. ' +
      'Binary artifacts are described and shown as a hex dump.',
    input: ArtifactReadInput,
    level: 'read',
    executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
    // Artifacts are immutable and content-addressed: reading one conflicts with nothing.
    resources: () => [],
    timeoutMs: 30_000,
    async execute(input, ctx) {
      ctx.signal.throwIfAborted();
      const id = normalizeId(input.id);
      const bytes = await ctx.artifacts.read(id);
      if (bytes === undefined) {
        throw new ToolError(
          'tool.not_found',
          `no artifact ${id} in this session; artifact IDs appear in the header of a tool output that was too large to show ("stored as artifact art_…"): copy the ID from there`,
        );
      }
      const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      if (!isText(buf)) {
        if (input.grep !== undefined) {
          throw new ToolError(
            'tool.binary_artifact',
            `${id} is binary (${describeBinary(buf)}); grep works on text artifacts only. Page its hex dump with offset and limit`,
          );
        }
        return { ok: true, output: hexPage(id, buf, input, redactor) };
      }
      const text = buf.toString('utf8');
      const total = countLines(buf);
      if (total === 0) return { ok: true, output: `[${id} is empty]` };
      if (input.grep !== undefined) return { ok: true, output: grepLines(id, text, total, input.grep, input) };
      return { ok: true, output: textPage(id, text, total, input) };
    },
  };
}

/** `artifact_read` with the built-in secret patterns for hex-dump masking. */
export const artifactReadTool: ToolDefinition<ArtifactReadInput> = createArtifactReadTool();

/** Accepts a lowercase body (Crockford base32 is case-insensitive) and refuses anything that is not an artifact ID. */
function normalizeId(raw: string): string {
  const prefix = `${ID_PREFIXES.artifact}_`;
  const id = raw.trim().startsWith(prefix) ? prefix + raw.trim().slice(prefix.length).toUpperCase() : raw.trim();
  if (!isId('artifact', id)) {
    throw new ToolError(
      'tool.invalid_id',
      `${JSON.stringify(raw)} is not an artifact ID: expected art_ followed by 26 characters (0-9 and A-Z without I, L, O, U), as shown in a tool output header`,
    );
  }
  return id;
}

/** Calls `fn(line, number)` for each line from `from` on (without its `\n` or `\r\n`) until it returns false. */
function eachLine(text: string, from: number, fn: (line: string, n: number) => boolean): void {
  let pos = 0;
  let n = 1;
  while (n < from) {
    const nl = text.indexOf('\n', pos);
    if (nl === -1) return;
    pos = nl + 1;
    n++;
  }
  while (pos < text.length) {
    const nl = text.indexOf('\n', pos);
    const stop = nl === -1 ? text.length : nl;
    const line = text.slice(pos, text.charCodeAt(stop - 1) === 13 && stop > pos ? stop - 1 : stop);
    if (!fn(line, n)) return;
    if (nl === -1) return;
    pos = nl + 1;
    n++;
  }
}

function textPage(id: string, text: string, total: number, input: ArtifactReadInput): string {
  const offset = input.offset ?? 1;
  const limit = input.limit ?? ARTIFACT_PAGE_LINES;
  if (offset > total) {
    throw new ToolError('tool.invalid_range', `offset ${offset} is past the end of ${id}, which has ${formatLines(total)}`);
  }
  const out: string[] = [];
  let used = 0;
  let cutNote = '';
  eachLine(text, offset, (line, n) => {
    const size = Buffer.byteLength(line, 'utf8') + 1;
    if (out.length > 0 && used + size > PAGE_BUDGET_BYTES) return false;
    if (size > PAGE_BUDGET_BYTES) {
      // One line larger than a page: show its start, and point to grep for the rest.
      const shown = cutChars(line, PAGE_BUDGET_BYTES / 3);
      cutNote = ` (line ${n} cut at ${formatCount(shown.length)} of ${formatCount(line.length)} characters; grep finds text within it)`;
      out.push(shown);
      return false;
    }
    out.push(line);
    used += size;
    return out.length < limit;
  });
  const end = offset + out.length - 1;
  const more = end < total ? `; pass offset=${end + 1} to read more` : '';
  return `[lines ${offset}-${end} of ${formatCount(total)} in ${id}${cutNote}${more}]\n${out.join('\n')}`;
}

/** Cuts to at most `max` UTF-16 units without splitting a surrogate pair. */
function cutChars(s: string, max: number): string {
  let cut = Math.min(s.length, Math.floor(max));
  const c = s.charCodeAt(cut - 1);
  if (cut < s.length && c >= 0xd800 && c <= 0xdbff) cut--;
  return s.slice(0, cut);
}


function grepLines(id: string, text: string, total: number, pattern: string, input: ArtifactReadInput): string {
  const from = input.offset ?? 1;
  const cap = Math.min(input.limit ?? MAX_ARTIFACT_GREP_MATCHES, MAX_ARTIFACT_GREP_MATCHES);
  const match = lineMatcher(pattern);
  const results: string[] = [];
  let stoppedAt = 0;
  eachLine(text, from, (line, n) => {
    const at = match(line);
    if (at === -1) return true;
    if (results.length === cap) {
      stoppedAt = n;
      return false;
    }
    results.push(`${n}: ${around(line, at)}`);
    return true;
  });
  const where = `${id} (${formatLines(total)}${from > 1 ? `, from line ${from}` : ''})`;
  if (results.length === 0) return `no matches for ${JSON.stringify(pattern)} in ${where}`;
  const note = stoppedAt ? `\n[stopped at ${cap} matches; pass offset=${stoppedAt} to continue, or narrow the pattern]` : '';
  return `[lines matching ${JSON.stringify(pattern)} in ${where}]\n${results.join('\n')}${note}`;
}

/** A matched line, or for a long line a window around the match. */
function around(line: string, at: number): string {
  if (line.length <= MAX_GREP_LINE_CHARS) return line;
  const start = Math.max(0, at - 100);
  const window = cutChars(line.slice(start), MAX_GREP_LINE_CHARS);
  return `${start > 0 ? '…' : ''}${window}${start + window.length < line.length ? '…' : ''}`;
}

function hexPage(id: string, buf: Buffer, input: ArtifactReadInput, redactor: Redactor): string {
  const rows = Math.max(1, Math.ceil(buf.length / HEX_ROW_BYTES));
  const offset = input.offset ?? 1;
  const limit = Math.min(input.limit ?? DEFAULT_HEX_ROWS, MAX_HEX_ROWS);
  if (offset > rows) {
    throw new ToolError('tool.invalid_range', `offset ${offset} is past the end of ${id}, whose hex dump has ${formatCount(rows)} rows of ${HEX_ROW_BYTES} bytes`);
  }
  const from = (offset - 1) * HEX_ROW_BYTES;
  const to = Math.min(buf.length, from + limit * HEX_ROW_BYTES);
  const masked = secretBytes(buf, from, to, redactor);
  const out: string[] = [];
  for (let at = from; at < to; at += HEX_ROW_BYTES) out.push(hexRow(buf, at, Math.min(to, at + HEX_ROW_BYTES), masked, from));
  const end = offset + out.length - 1;
  const more = end < rows ? `; pass offset=${end + 1} to read more` : '';
  const maskNote = masked.count > 0 ? `; ${masked.count} bytes that look like secrets are shown as **` : '';
  return (
    `[${id} is binary (${describeBinary(buf)}, ${formatBytes(buf.length)}) and cannot be shown as text. ` +
    `Hex dump of bytes ${from}-${to - 1}, rows ${offset}-${end} of ${formatCount(rows)}${maskNote}${more}]\n${out.join('\n')}`
  );
}

/**
 * Which bytes of `[from, to)` lie in a secret. Binary artifacts are stored unredacted, so the
 * dump masks what the redactor finds in the bytes read as Latin-1 (one character per byte).
 */
function secretBytes(buf: Buffer, from: number, to: number, redactor: Redactor): { hit: Uint8Array; count: number } {
  const start = Math.max(0, from - MASK_MARGIN_BYTES);
  const view = buf.toString('latin1', start, Math.min(buf.length, to + MASK_MARGIN_BYTES));
  const hit = new Uint8Array(to - from);
  let count = 0;
  for (const s of redactor.spans(view)) {
    for (let i = Math.max(start + s.start, from); i < Math.min(start + s.end, to); i++) {
      hit[i - from] = 1;
      count++;
    }
  }
  return { hit, count };
}

/** One `hexdump -C` style row: offset, 16 hex bytes in two groups, printable ASCII. */
function hexRow(buf: Buffer, at: number, end: number, masked: { hit: Uint8Array }, from: number): string {
  let hex = '';
  let ascii = '';
  for (let i = 0; i < HEX_ROW_BYTES; i++) {
    if (i === 8) hex += ' ';
    const p = at + i;
    if (p >= end) {
      hex += '   ';
      continue;
    }
    const b = buf[p]!;
    const secret = masked.hit[p - from] === 1;
    hex += secret ? ' **' : ` ${b.toString(16).padStart(2, '0')}`;
    ascii += secret ? '*' : b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.';
  }
  return `${at.toString(16).padStart(8, '0')} ${hex}  |${ascii}|`;
}
