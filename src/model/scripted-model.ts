import { sha256Digest } from '../protocol/canonical-json.js';
import { GrowingBody, writeBody, type BodyLayout, type WireItems } from './request-body.js';
import { ConfigError, ModelError } from '../protocol/errors.js';
import { ModelErrorClassSchema, type FinishReason, type ModelErrorClass } from '../protocol/events.js';
import type { ToolCallRequest, Usage } from '../protocol/history.js';
import type {
  ModelAdapter,
  ModelCapabilities,
  ModelErrorInfo,
  ModelOutput,
  ModelRequest,
  ModelStreamEvent,
  PreparedRequest,
} from './model-port.js';
import type { ScriptResponse } from './script.js';

/** A model error that also says how long the provider asked us to wait. */
export class ScriptedModelError extends ModelError {
  /** Milliseconds the provider asked to wait before retrying, when it said. */
  readonly retryAfterMs: number | null;

  constructor(code: ModelErrorClass, message: string, opts: { retryable: boolean; retryAfterMs?: number | null; cause?: unknown }) {
    super(code, message, { retryable: opts.retryable, cause: opts.cause });
    this.retryAfterMs = opts.retryAfterMs ?? null;
  }
}

/** Options of `createScriptedModel`. */
export interface ScriptedModelOptions {
  responses: ScriptResponse[];
  /** Index of the next response; a resumed run passes where it stopped. */
  cursor?: number;
  /** Where the responses came from (a file path), for error messages. */
  source?: string;
  /** Keep every prepared request in `requests` (default true; the CLI turns it off: bodies grow with history). */
  record?: boolean;
  /** The model name this adapter reports; requests carry their own. */
  model?: string;
  /**
   * What compaction attempts answer, by the request's `purpose.index`: they never take from
   * `responses`. Absent, or past its end: a deterministic summary built from the request.
   */
  summaries?: string[];
}

/** The scripted adapter: replays fixed responses in order, and records what it was asked. */
export interface ScriptedModel extends ModelAdapter {
  readonly provider: 'scripted';
  readonly model: string;
  /** Index of the next response to deliver. */
  readonly cursor: number;
  /** Every prepared request `stream` was given, in order. */
  readonly requests: PreparedRequest[];
  /** Throws when responses remain unused. */
  assertComplete(): void;
}

const CAPABILITIES: ModelCapabilities = Object.freeze({
  contextWindow: 128_000,
  maxOutputTokens: 4096,
  parallelToolCalls: true,
  structuredOutput: true,
  vision: false,
});

const RETRYABLE: ReadonlySet<ModelErrorClass> = new Set(['rate_limit', 'server', 'network', 'overloaded']);

/** Builds a scripted model over a list of responses. */
export function createScriptedModel(opts: ScriptedModelOptions): ScriptedModel {
  const responses = opts.responses;
  const source = opts.source ?? '<inline>';
  const requests: PreparedRequest[] = [];
  let cursor = opts.cursor ?? 0;
  const bodies = new GrowingBody(asIs);

  async function* summarize(prepared: PreparedRequest, signal: AbortSignal, index: number): AsyncGenerator<ModelStreamEvent> {
    const content = opts.summaries?.[index] ?? deterministicSummary(prepared.request);
    for (const text of splitNearMiddle(content)) {
      await Promise.resolve();
      checkAborted(signal);
      yield { type: 'text_delta', text };
    }
    await Promise.resolve();
    checkAborted(signal);
    yield { type: 'done', output: { content, toolCalls: [], finishReason: 'stop', usage: usageOf({}, prepared, content, []) } };
  }

  async function* run(prepared: PreparedRequest, signal: AbortSignal): AsyncGenerator<ModelStreamEvent> {
    const purpose = prepared.request.purpose;
    if (purpose?.kind === 'compaction') {
      yield* summarize(prepared, signal, purpose.index);
      return;
    }
    const index = cursor;
    const response = responses[index];
    if (!response) {
      throw new ModelError('server', `scripted model ran out of responses after ${responses.length} (script ${source})`, {
        retryable: false,
      });
    }
    if (response.delay_ms) await sleep(response.delay_ms, signal);
    checkAborted(signal);
    if (response.error) {
      // An error response is "delivered" by being thrown: the retry sees the next response.
      cursor = index + 1;
      const { type, retry_after_ms } = response.error;
      throw new ScriptedModelError(type, `scripted ${type} error (response ${index} of script ${source})`, {
        retryable: RETRYABLE.has(type),
        retryAfterMs: retry_after_ms ?? null,
      });
    }

    const content = response.content ?? null;
    const toolCalls = (response.tool_calls ?? []).map(
      (call, i): ToolCallRequest => ({
        // Derived from the position, not drawn, so a replayed run gets the same IDs.
        id: call.id ?? `call_s${index}_${i}`,
        name: call.name,
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
      }),
    );

    // Yield to the event loop between chunks, so a fault (abort, crash) can land mid-stream.
    if (content) {
      for (const text of splitNearMiddle(content)) {
        await Promise.resolve();
        checkAborted(signal);
        yield { type: 'text_delta', text };
      }
    }
    for (const [i, call] of toolCalls.entries()) {
      const half = Math.ceil(call.arguments.length / 2);
      await Promise.resolve();
      checkAborted(signal);
      yield { type: 'tool_call_delta', index: i, id: call.id, name: call.name, argumentsDelta: call.arguments.slice(0, half) };
      await Promise.resolve();
      checkAborted(signal);
      yield { type: 'tool_call_delta', index: i, argumentsDelta: call.arguments.slice(half) };
    }
    await Promise.resolve();
    checkAborted(signal);

    const finishReason: FinishReason = response.finish_reason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
    const output: ModelOutput = { content, toolCalls, finishReason, usage: usageOf(response, prepared, content, toolCalls) };
    // Advance before handing over `done`: a consumer may stop iterating right after it.
    cursor = index + 1;
    yield { type: 'done', output };
  }

  return {
    provider: 'scripted',
    model: opts.model ?? 'scripted',
    get cursor() {
      return cursor;
    },
    requests,
    capabilities: () => ({ ...CAPABILITIES }),
    prepare(request) {
      return Object.assign(bodies.write(scriptedLayout(request), request.messages), { request });
    },
    stream(prepared, signal) {
      if (opts.record !== false) requests.push(prepared);
      return run(prepared, signal);
    },
    classifyError: classifyScriptedError,
    assertComplete() {
      if (cursor < responses.length) {
        throw new ConfigError(
          'config.script',
          `script ${source} has ${responses.length - cursor} unused responses (used ${cursor} of ${responses.length})`,
        );
      }
    },
  };
}

/**
 * A compaction's summary when the script gives none: the first line of each message of the range
 * (the request's last message), at most 40, each cut at 160 characters. The same range gives the
 * same summary.
 */
export function deterministicSummary(request: ModelRequest): string {
  const last = request.messages[request.messages.length - 1];
  const text = last && last.role !== 'assistant' ? last.content : '';
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('['));
  const picked = lines.slice(0, 40).map((l) => (l.length > 160 ? `${l.slice(0, 159)}…` : l));
  return [`The compacted steps (${lines.length} messages):`, ...picked, ...(lines.length > 40 ? [`… and ${lines.length - 40} more`] : [])].join('\n');
}

/** The wire body's layout: a fixed key order, stable parts first, so equal requests give equal bytes. */
function scriptedLayout(request: ModelRequest): BodyLayout {
  const head: Record<string, unknown> = {
    model: request.model,
    instructions: request.instructions,
    tools: request.tools,
    max_output_tokens: request.maxOutputTokens,
  };
  // only when asked for: bodies without a schema stay byte-identical to older recordings
  if (request.outputSchema) head['output_schema'] = request.outputSchema;
  return { head, key: 'messages', lead: [], tail: {} };
}

const asIs: WireItems = (item) => [item];

/** Builds the wire body at once (the adapter writes the same bytes step by step, `GrowingBody`). */
export function prepareScripted(request: ModelRequest): PreparedRequest {
  const body = writeBody(scriptedLayout(request), request.messages, asIs);
  return { body, digest: sha256Digest(body), request };
}

/** Maps anything a scripted stream threw to a model error class. */
export function classifyScriptedError(err: unknown): ModelErrorInfo {
  if (err instanceof ModelError) {
    const parsed = ModelErrorClassSchema.safeParse(err.code);
    const retryAfterMs = (err as Partial<ScriptedModelError>).retryAfterMs;
    return {
      class: parsed.success ? parsed.data : 'server',
      message: err.message,
      retryable: err.retryable,
      retryAfterMs: typeof retryAfterMs === 'number' ? retryAfterMs : null,
    };
  }
  if (err instanceof Error && err.name === 'AbortError') {
    return { class: 'cancelled', message: err.message, retryable: false, retryAfterMs: null };
  }
  return { class: 'server', message: err instanceof Error ? err.message : String(err), retryable: false, retryAfterMs: null };
}

/** Splits text in two at the word boundary nearest the middle (or the middle itself). */
function splitNearMiddle(text: string): string[] {
  if (text.length < 2) return [text];
  const mid = Math.floor(text.length / 2);
  let at = -1;
  for (let d = 0; d < mid && at < 0; d++) {
    if (text[mid + d] === ' ') at = mid + d + 1;
    else if (text[mid - d] === ' ') at = mid - d + 1;
  }
  if (at <= 0 || at >= text.length) at = mid;
  // Never cut a surrogate pair in half: each delta must be valid text on its own.
  const code = text.charCodeAt(at);
  if (code >= 0xdc00 && code <= 0xdfff) at += 1;
  return at >= text.length ? [text] : [text.slice(0, at), text.slice(at)];
}

function usageOf(response: ScriptResponse, prepared: PreparedRequest, content: string | null, calls: ToolCallRequest[]): Usage {
  if (response.usage) {
    return { inputTokens: response.usage.input_tokens, outputTokens: response.usage.output_tokens, estimated: false };
  }
  const outputChars = (content?.length ?? 0) + calls.reduce((n, c) => n + c.name.length + c.arguments.length, 0);
  return { inputTokens: Math.ceil(prepared.body.length / 4), outputTokens: Math.ceil(outputChars / 4), estimated: true };
}

function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw cancelled(signal.reason);
}

function cancelled(cause: unknown): ModelError {
  return new ModelError('cancelled', 'scripted model stream was cancelled', { retryable: false, cause });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(cancelled(signal.reason));
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(cancelled(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
