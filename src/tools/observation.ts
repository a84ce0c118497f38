import { Buffer, isUtf8 } from 'node:buffer';
import { sha256Digest } from '../protocol/canonical-json.js';
import { derivedId } from '../protocol/ids.js';
import type { Redactor } from './redact.js';

/** The observation budget when none is configured: output larger than this becomes an artifact. */
export const DEFAULT_OBSERVATION_BUDGET_BYTES = 16384;
/** Lines `artifact_read` returns per page by default, and the `limit` a preview header suggests. */
export const ARTIFACT_PAGE_LINES = 400;

/** Tool output kept out of the observation, to be stored as a blob and read with `artifact_read`. */
export interface ObservationArtifact {
  /** `art_` + 26 Crockford base32 characters of the digest: the same content gives the same ID. */
  id: string;
  /** `sha256:<hex>` of `content`, its name in the blob store. */
  digest: string;
  bytes: number;
  /** True for bytes that are not UTF-8 text; those are stored raw and never shown as text. */
  binary: boolean;
  /** Line count of a text artifact; null for binary. */
  lines: number | null;
  /** The full content to store: redacted for text, raw for binary. */
  content: Uint8Array;
}

/** A tool output shaped for the model: what it and the log see, and what is stored aside. */
export interface ShapedObservation {
  /** What the model sees and the log stores. */
  output: string;
  /** Secrets replaced in the output (and in the artifact, which holds the same redacted text). */
  redactions: number;
  artifact: ObservationArtifact | null;
}

/** Options of `shapeObservation`. */
export interface ShapeObservationOptions {
  /** Largest output shown in full, in UTF-8 bytes (default 16 KiB); a preview stays within it. */
  budgetBytes?: number;
  redactor: Redactor;
  /** Bytes of the preview's head (default 60% of the budget). */
  headBytes?: number;
  /** Bytes of the preview's tail (default 30% of the budget). */
  tailBytes?: number;
}

const NL = 0x0a;
const CR = 0x0d;
// Room kept in the budget for the omission marker and the newlines around it.
const MARKER_RESERVE = 96;

/**
 * Redacts a tool output and fits it to the observation budget (design §8). Text within the
 * budget is shown whole; longer text is stored as an artifact and shown as a header, a head and
 * a tail; bytes that are not UTF-8 text (or contain NUL) are stored raw and only described.
 * Works on the bytes with `indexOf` scans, so 50 MB of output costs its copies, not a line array.
 */
export function shapeObservation(raw: string | Uint8Array, opts: ShapeObservationOptions): ShapedObservation {
  const budget = opts.budgetBytes ?? DEFAULT_OBSERVATION_BUDGET_BYTES;
  if (typeof raw === 'string' ? raw.includes('\u0000') : !isText(raw)) {
    return binaryObservation(typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw, opts.redactor);
  }
  const rawBytes = typeof raw === 'string' ? null : asBuffer(raw);
  const { text, count } = opts.redactor.redact(rawBytes ? rawBytes.toString('utf8') : (raw as string));
  // Unredacted bytes are reused as they are: re-encoding 50 MB would only copy them.
  const unchanged = count === 0 && rawBytes !== null;
  const size = unchanged ? rawBytes.length : Buffer.byteLength(text, 'utf8');
  if (size <= budget) return { output: text, redactions: count, artifact: null };

  const content = unchanged ? rawBytes : Buffer.from(text, 'utf8');
  const lines = countLines(content);
  const artifact = makeArtifact(content, false, lines);
  return { output: preview(content, lines, artifact.id, budget, opts), redactions: count, artifact };
}

/** True when bytes are shown as text: valid UTF-8 without NUL (NUL marks binary, as git and grep decide). */
export function isText(bytes: Uint8Array): boolean {
  return !bytes.includes(0) && isUtf8(bytes);
}

/** A guess at what binary content is, from its magic number. */
export function describeBinary(bytes: Uint8Array): string {
  const starts = (...magic: number[]): boolean => magic.every((b, i) => bytes[i] === b);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'PNG image';
  if (starts(0xff, 0xd8, 0xff)) return 'JPEG image';
  if (starts(0x47, 0x49, 0x46, 0x38)) return 'GIF image';
  if (starts(0x1f, 0x8b)) return 'gzip data';
  if (starts(0x50, 0x4b, 0x03, 0x04) || starts(0x50, 0x4b, 0x05, 0x06)) return 'zip archive';
  if (starts(0x7f, 0x45, 0x4c, 0x46)) return 'ELF executable';
  if (starts(0x25, 0x50, 0x44, 0x46, 0x2d)) return 'PDF document';
  // No NUL but not UTF-8: most likely text in another encoding (Latin-1, UTF-16 without NUL is rare).
  return bytes.includes(0) ? 'binary data' : 'binary data or text that is not UTF-8';
}

/** A byte count for people: `512 B`, `48.2 KiB`, `50.0 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** A count with thousands separators, as headers show them. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** `1 line`, `2,000 lines`: a count and its noun, pluralized. */
export function formatLines(n: number): string {
  return `${formatCount(n)} ${n === 1 ? 'line' : 'lines'}`;
}

/** Lines in text bytes, as `splitLines` counts them: a final newline ends the last line. */
export function countLines(bytes: Uint8Array, from = 0, to = bytes.length): number {
  if (to <= from) return 0;
  return countNewlines(bytes, from, to) + (bytes[to - 1] === NL ? 0 : 1);
}

function countNewlines(bytes: Uint8Array, from: number, to: number): number {
  let n = 0;
  for (let i = bytes.indexOf(NL, from); i !== -1 && i < to; i = bytes.indexOf(NL, i + 1)) n++;
  return n;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function makeArtifact(content: Uint8Array, binary: boolean, lines: number | null): ObservationArtifact {
  const digest = sha256Digest(content);
  // Derived from the digest, so a retried call that prints the same output names the same artifact.
  return { id: derivedId('artifact', digest), digest, bytes: content.byteLength, binary, lines, content };
}

/**
 * Binary output is stored, not shown, but it is stored redacted too: secrets in it (key lines
 * followed by a NUL, an environment block) are found in the bytes read as Latin-1, one character
 * a byte, so a span is a byte range, and each of its bytes becomes `*` before the store sees it.
 */
function binaryObservation(raw: Uint8Array, redactor: Redactor): ShapedObservation {
  const spans = redactor.spans(asBuffer(raw).toString('latin1'));
  let content = raw;
  if (spans.length > 0) {
    const masked = Buffer.from(raw);
    for (const span of spans) masked.fill(0x2a, span.start, span.end);
    content = masked;
  }
  const artifact = makeArtifact(content, true, null);
  const what = describeBinary(content);
  const output =
    `[binary output (${what}, ${formatBytes(content.byteLength)}) stored as artifact ${artifact.id}; ` +
    `it is not shown as text. artifact_read {"id":"${artifact.id}"} shows its type and a hex dump]`;
  return { output, redactions: spans.length, artifact };
}

/** The header, head, omission marker and tail the model sees of a text artifact. */
function preview(content: Buffer, lines: number, id: string, budget: number, opts: ShapeObservationOptions): string {
  let headBytes = opts.headBytes ?? Math.floor(budget * 0.6);
  let tailBytes = opts.tailBytes ?? Math.floor(budget * 0.3);
  const room = Math.max(0, budget - MARKER_RESERVE);
  if (headBytes + tailBytes > room) {
    // Sizes the caller asked for do not fit: shrink both, keeping their proportion.
    const scale = room / (headBytes + tailBytes);
    headBytes = Math.floor(headBytes * scale);
    tailBytes = Math.floor(tailBytes * scale);
  }
  // A final newline ends the last line; it is not a line of its own to show.
  const end = content[content.length - 1] === NL ? content.length - 1 : content.length;
  const headEnd = cutHead(content, Math.min(headBytes, end));
  const tailStart = cutTail(content, Math.max(headEnd, end - tailBytes), end);

  const headLines = headEnd === 0 ? 0 : countNewlines(content, 0, headEnd) + 1;
  const headWhole = headEnd === 0 || content[headEnd] === NL;
  const tailLines = tailStart >= end ? 0 : countNewlines(content, tailStart, end) + 1;
  const omittedLines = Math.max(0, lines - headLines - tailLines);
  const omittedBytes = formatBytes(tailStart - headEnd);
  const marker = omittedLines > 0 ? `[… ${formatLines(omittedLines)} omitted (${omittedBytes}) …]` : `[… ${omittedBytes} omitted …]`;
  const next = headWhole ? headLines + 1 : Math.max(1, headLines);

  const header =
    `[output is ${formatBytes(content.length)}, ${formatLines(lines)}; stored as artifact ${id} — ` +
    `read more with artifact_read {"id":"${id}","offset":${next},"limit":${ARTIFACT_PAGE_LINES}} ` +
    `or grep with {"id":"${id}","grep":"pattern"}]`;
  const head = content.toString('utf8', 0, content[headEnd - 1] === CR ? headEnd - 1 : headEnd);
  const tail = content.toString('utf8', tailStart, content[end - 1] === CR ? end - 1 : end);
  return [header, head, marker, tail].join('\n');
}

/**
 * Where the head ends (exclusive): at a line end when one falls in the second half of the
 * window, else mid-line on a UTF-8 character boundary (one huge line still shows its start).
 */
function cutHead(content: Buffer, limit: number): number {
  if (limit <= 0) return 0;
  const nl = content.lastIndexOf(NL, limit);
  if (nl >= limit / 2 && nl <= limit) return nl;
  let cut = limit;
  while (cut > 0 && (content[cut]! & 0xc0) === 0x80) cut--;
  return cut;
}

/** Where the tail starts: after a line end in the first half of the window, else on a UTF-8 boundary. */
function cutTail(content: Buffer, from: number, end: number): number {
  if (from >= end) return end;
  const nl = content.indexOf(NL, from);
  if (nl !== -1 && nl < end && nl - from <= (end - from) / 2) return nl + 1;
  let cut = from;
  while (cut < end && (content[cut]! & 0xc0) === 0x80) cut++;
  return cut;
}
