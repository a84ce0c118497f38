import type { ApprovalPreview } from '../protocol/events.js';
import type { Redactor } from './redact.js';
import type { ExecutionPlan, PreviewContext, ToolDefinition, ToolPreview } from './tool.js';

/*
 * What a person approving a call is shown (design §8): the tool's own preview (a diff, the patch,
 * the argv), else the plan's view of the call, redacted like tool output and bounded, so it can
 * go in the `approval/requested` commit and every client shows the same text.
 */

/** The most bytes of preview text an approval records: a commit stays far below NATS's 1 MiB. */
export const PREVIEW_TEXT_BYTES = 16 * 1024;
/** The most characters of the one-line summary. */
export const PREVIEW_SUMMARY_CHARS = 300;
/** How long a tool's preview may take before the plan's view is shown instead. */
export const PREVIEW_TIMEOUT_MS = 2_000;

/** What `previewCall` needs beyond the tool and its input. */
export interface PreviewOptions extends Omit<PreviewContext, 'signal'> {
  redactor: Redactor;
  /** Aborts the preview (the turn was interrupted): the plan's view is returned at once. */
  signal?: AbortSignal;
  /** Default PREVIEW_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Default PREVIEW_TEXT_BYTES. */
  maxTextBytes?: number;
}

/**
 * The preview of one call: the tool's `preview` when it has one and it answers in time, else the
 * plan's view (with `fallback` saying why, when the tool's failed). Never throws: a preview that
 * cannot be made must not fail the call it describes.
 */
export async function previewCall(
  tool: Pick<ToolDefinition<unknown>, 'name' | 'preview'>,
  input: unknown,
  opts: PreviewOptions,
): Promise<ApprovalPreview> {
  const { redactor, signal, timeoutMs = PREVIEW_TIMEOUT_MS, maxTextBytes = PREVIEW_TEXT_BYTES, ...ctx } = opts;
  let shown: ToolPreview;
  let fallback: string | undefined;
  if (!tool.preview) {
    shown = planView(ctx.plan);
  } else {
    const stop = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const late = new Promise<never>((_, reject) => {
      const give = (why: string): void => {
        stop.abort();
        reject(new Error(why));
      };
      timer = setTimeout(() => give(`it took longer than ${timeoutMs} ms`), timeoutMs);
      onAbort = () => give('the turn stopped first');
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      shown = await Promise.race([Promise.resolve().then(() => tool.preview!(input, { ...ctx, signal: stop.signal })), late]);
    } catch (err) {
      fallback = `${tool.name} could not show this call (${err instanceof Error ? err.message : String(err)}); this is its plan`;
      shown = planView(ctx.plan);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }
  return boundPreview(shown, redactor, maxTextBytes, fallback);
}

/**
 * Redacts a tool's preview (the current file may hold a secret) and bounds it. Redaction comes
 * first: a cut through the middle of a secret could keep a part no pattern recognizes.
 */
export function boundPreview(shown: ToolPreview, redactor: Redactor, maxTextBytes = PREVIEW_TEXT_BYTES, fallback?: string): ApprovalPreview {
  const summary = cutChars(redactor.redact(shown.summary).text, PREVIEW_SUMMARY_CHARS);
  const cut = boundText(redactor.redact(shown.text).text, maxTextBytes);
  const omitted = [shown.omitted, cut.omitted].filter((o): o is string => o !== undefined && o !== '');
  return {
    kind: shown.kind,
    summary,
    text: cut.text,
    truncated: shown.truncated === true || cut.omitted !== undefined,
    ...(omitted.length > 0 ? { omitted: omitted.join('; ') } : {}),
    ...(fallback !== undefined ? { fallback: redactor.redact(fallback).text } : {}),
  };
}

/**
 * `text` cut to at most `maxBytes` of UTF-8 at a line end (a line longer than the bound is cut
 * inside, on a character boundary), with what was left out said.
 */
export function boundText(text: string, maxBytes: number): { text: string; omitted?: string } {
  const total = Buffer.byteLength(text, 'utf8');
  if (total <= maxBytes) return { text };
  const lines = text.split('\n');
  const kept: string[] = [];
  let bytes = 0;
  for (const line of lines) {
    const size = Buffer.byteLength(line, 'utf8') + 1;
    if (bytes + size > maxBytes) {
      if (kept.length === 0) kept.push(cutBytes(line, maxBytes));
      break;
    }
    kept.push(line);
    bytes += size;
  }
  const shown = kept.join('\n');
  const leftLines = lines.length - kept.length;
  const leftBytes = total - Buffer.byteLength(shown, 'utf8');
  const what = leftLines > 0 ? `${leftLines} more line${leftLines === 1 ? '' : 's'} (${leftBytes} bytes)` : `${leftBytes} more bytes`;
  return { text: shown, omitted: `${what} not shown: the preview is cut at ${maxBytes} bytes` };
}

/**
 * The plan's view of a call, for a tool without a preview (or whose preview failed): the
 * command, cwd, paths and network the plan names, then the arguments as JSON.
 */
export function planView(plan: ExecutionPlan): ToolPreview {
  const lines: string[] = [];
  if (plan.command !== undefined) lines.push(`command: ${plan.command}`);
  for (const argv of plan.commands ?? []) lines.push(`runs: ${argv.map(shownWord).join(' ')}`);
  if (plan.cwd !== undefined) lines.push(`cwd: ${plan.cwd}`);
  for (const p of plan.paths) lines.push(`${p.mode === 'write' ? 'writes' : 'reads'}: ${p.path}`);
  lines.push(`network: ${plan.network ? 'yes' : 'no'}`);
  if (plan.input !== undefined) lines.push('arguments:', JSON.stringify(plan.input, null, 2) ?? String(plan.input));
  const touched = plan.paths.map((p) => p.path);
  const summary = touched.length > 0 ? `${plan.tool} on ${touched.join(', ')}` : `${plan.tool} with the arguments below`;
  return { kind: 'input', summary, text: lines.join('\n') };
}

/** One argv word as a person reads it: as it is when plain, else single-quoted the way a shell would take it. */
export function shownWord(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

function cutChars(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function cutBytes(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, 'utf8').subarray(0, maxBytes);
  // a cut inside a multi-byte character decodes to U+FFFD: drop it
  return buf.toString('utf8').replace(/\uFFFD$/, '');
}
