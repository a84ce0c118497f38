import type { ModelOutput } from '../../model/model-port.js';
import { ModelError } from '../../protocol/errors.js';
import type { ModelErrorClass, TurnSettings } from '../../protocol/events.js';
import type { BlobRef, HistoryItem, ToolCallRequest } from '../../protocol/history.js';
import type { BlobStore } from '../../store/blob-port.js';
import { missingBlob, type MissingBlobScope } from './missing-blob.js';
import { sealedText } from './sealed-text.js';

// Model output too big for the log (design §4): the whole text goes to the blob store before the
// event that names it is committed, the event keeps a preview and a reference, and whoever needs
// the whole (the next request, the tool, the person waiting for the answer) reads it back.

/**
 * Model output one event keeps inline. A commit holds the accepted output with its attempt/end,
 * then one tool/call per call repeating that call's arguments: 2 × 64 KiB and the envelopes stay
 * far below the server's max_payload (1 MiB unless configured otherwise), with room for the
 * other events a commit may carry.
 */
export const INLINE_OUTPUT_BYTES = 64 * 1024;

/** Characters of a blob-stored text kept inline as its preview: what `events` and a person see. */
export const OUTPUT_PREVIEW_CHARS = 2048;

/** The hard cap on one attempt's output when the config names none (`max_model_output_bytes`). */
export const DEFAULT_MAX_MODEL_OUTPUT_BYTES = 8 * 1024 * 1024;

/** The `ModelError` code (and attempt error class) of an attempt stopped at the output cap. */
export const OUTPUT_TOO_LARGE: Extract<ModelErrorClass, 'output_too_large'> = 'output_too_large';

/** The attempt's output passed the cap: stopped mid-stream, never retried (the same request would do it again). */
export function outputTooLarge(capBytes: number, seenBytes: number): ModelError {
  return new ModelError(
    OUTPUT_TOO_LARGE,
    `the model's output passed max_model_output_bytes (${capBytes} bytes) at ${seenBytes} bytes and was stopped; ` +
      'raise max_model_output_bytes in the config, or ask for smaller pieces (write a large file in parts)',
    { retryable: false },
  );
}

/** UTF-8 bytes of an attempt's output: its text and its tool calls' arguments. */
export function outputBytes(output: Pick<ModelOutput, 'content' | 'toolCalls'>): number {
  let n = output.content === null ? 0 : Buffer.byteLength(output.content);
  for (const c of output.toolCalls) n += Buffer.byteLength(c.arguments);
  return n;
}

/** What an event says of a text kept in a blob: the head of it and where the rest is. */
export function previewOf(text: string, ref: BlobRef): string {
  return `${text.slice(0, OUTPUT_PREVIEW_CHARS)}… [${ref.bytes} bytes in all, stored as blob ${ref.digest}]`;
}

/** An accepted output as its event records it: blob-stored parts are previews with a reference. */
export interface StoredOutput {
  content: string | null;
  contentRef?: BlobRef;
  toolCalls: ToolCallRequest[];
}

/**
 * Stores the largest parts of an output (its text, a call's arguments) as blobs until what is
 * left inline fits `INLINE_OUTPUT_BYTES`, and returns the output as its event records it. Each
 * blob is stored before this returns: the log never names a blob that is not there.
 */
export async function storeOutput(output: Pick<ModelOutput, 'content' | 'toolCalls'>, blobs: BlobStore, keep?: OutputTexts): Promise<StoredOutput> {
  const parts: Array<{ index: number; text: string; bytes: number }> = [];
  if (output.content !== null) parts.push({ index: -1, text: output.content, bytes: Buffer.byteLength(output.content) });
  output.toolCalls.forEach((c, index) => parts.push({ index, text: c.arguments, bytes: Buffer.byteLength(c.arguments) }));
  let inline = parts.reduce((n, p) => n + p.bytes, 0);
  const stored: StoredOutput = { content: output.content, toolCalls: output.toolCalls };
  if (inline <= INLINE_OUTPUT_BYTES) return stored;
  stored.toolCalls = output.toolCalls.slice();
  parts.sort((x, y) => y.bytes - x.bytes);
  for (const part of parts) {
    if (inline <= INLINE_OUTPUT_BYTES) break;
    const ref: BlobRef = { digest: await blobs.put(part.text), bytes: part.bytes };
    keep?.keep(ref, part.text);
    const preview = previewOf(part.text, ref);
    inline -= part.bytes - Buffer.byteLength(preview);
    if (part.index < 0) {
      stored.content = preview;
      stored.contentRef = ref;
    } else {
      const c = stored.toolCalls[part.index]!;
      stored.toolCalls[part.index] = { id: c.id, name: c.name, arguments: preview, argumentsRef: ref };
    }
  }
  return stored;
}

/**
 * Cuts the long strings of a value the log records beside blob-stored arguments (a call's parsed
 * input, an approval's plan), so the event stays small; the whole is the blob `ref`.
 */
export function clipStrings(value: unknown, ref: BlobRef): unknown {
  if (typeof value === 'string') {
    return value.length > OUTPUT_PREVIEW_CHARS
      ? `${value.slice(0, OUTPUT_PREVIEW_CHARS)}… [${Buffer.byteLength(value)} bytes; the call's arguments are blob ${ref.digest}]`
      : value;
  }
  if (Array.isArray(value)) return value.map((v) => clipStrings(v, ref));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clipStrings(v, ref)]));
  }
  return value;
}

/**
 * The whole texts of blob-stored model output, for one incarnation of an actor: the open step's
 * tool-call arguments, read synchronously where a call is planned (loaded before the effects
 * that plan it), and the history's items with their texts resolved, kept by identity so a
 * turn's request bodies keep growing at their end (`GrowingBody` matches items by identity).
 */
export class OutputTexts {
  private texts = new Map<string, string>();
  private items = new WeakMap<HistoryItem, HistoryItem>();

  /** `scope`: the agent, and how to find the event of its log that names a blob, for the error of a missing one. */
  constructor(private readonly blobs: BlobStore, private readonly scope: MissingBlobScope = {}) {}

  /** Remembers a text just stored as `ref`. */
  keep(ref: BlobRef, text: string): void {
    this.texts.set(ref.digest, text);
  }

  /**
   * The whole text of `ref`, read from the blob store unless it is remembered; a blob the store
   * lacks is a final `store.blob_missing` naming the event that names it.
   */
  async load(ref: BlobRef, what = 'model output'): Promise<string> {
    const known = this.texts.get(ref.digest);
    if (known !== undefined) return known;
    const text = await this.blobs.getText(ref.digest);
    if (text === undefined) throw await missingBlob(this.scope, ref, what);
    this.texts.set(ref.digest, text);
    return text;
  }

  /** Loads the blob-stored arguments of these calls, so `argumentsOf` can answer synchronously. */
  async loadCalls(calls: ReadonlyArray<{ argumentsRef?: BlobRef }>): Promise<void> {
    for (const c of calls) if (c.argumentsRef && !this.texts.has(c.argumentsRef.digest)) await this.load(c.argumentsRef);
  }

  /** A call's whole arguments; its blob must have been loaded (`loadCalls`). */
  argumentsOf(call: { arguments: string; argumentsRef?: BlobRef }): string {
    if (!call.argumentsRef) return call.arguments;
    const text = this.texts.get(call.argumentsRef.digest);
    if (text === undefined) throw new Error(`arguments blob ${call.argumentsRef.digest} was not loaded before the call was planned`);
    return text;
  }

  /** The history as the model is sent it: every blob-stored text whole; items without one as they are. */
  async history(items: readonly HistoryItem[]): Promise<HistoryItem[]> {
    const out: HistoryItem[] = new Array<HistoryItem>(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (item.role === 'tool' && item.contentRef) {
        out[i] = this.items.get(item) ?? (await this.resolveTool(item, item.contentRef));
        continue;
      }
      out[i] = item.role === 'assistant' && (item.contentRef || item.toolCalls.some((c) => c.argumentsRef))
        ? (this.items.get(item) ?? (await this.resolve(item)))
        : item;
    }
    return out;
  }

  private async resolve(item: Extract<HistoryItem, { role: 'assistant' }>): Promise<HistoryItem> {
    const toolCalls: ToolCallRequest[] = [];
    for (const c of item.toolCalls) {
      toolCalls.push(c.argumentsRef ? { id: c.id, name: c.name, arguments: await this.load(c.argumentsRef) } : c);
    }
    const resolved: HistoryItem = { role: 'assistant', content: item.contentRef ? await this.load(item.contentRef) : item.content, toolCalls };
    this.items.set(item, resolved);
    return resolved;
  }

  /** A tool item whose observation the log keeps out (a sensitive answer): the model reads the blob. */
  private async resolveTool(item: Extract<HistoryItem, { role: 'tool' }>, ref: BlobRef): Promise<HistoryItem> {
    const resolved: HistoryItem = { role: 'tool', callId: item.callId, name: item.name, content: sealedText(await this.load(ref, 'a sensitive answer')) };
    this.items.set(item, resolved);
    return resolved;
  }

  /** Forgets the remembered texts (a turn ended: its calls are closed, its requests sent). */
  reset(): void {
    this.texts = new Map();
    this.items = new WeakMap();
  }
}

/**
 * The cap on one attempt's output a turn runs with: `max_model_output_bytes` of the config it
 * started with (recorded in `turn/start`, so a resumed turn keeps it), else the default.
 */
export function maxOutputBytesOf(settings: TurnSettings): number {
  const v = settings.config?.['maxModelOutputBytes'];
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : DEFAULT_MAX_MODEL_OUTPUT_BYTES;
}
