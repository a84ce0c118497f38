import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { ModelError } from '../protocol/errors.js';
import { ModelErrorClassSchema, type ModelErrorClass } from '../protocol/events.js';
import type { ModelErrorInfo } from './model-port.js';

/** A model error from an OpenAI-compatible endpoint; carries the wait the provider asked for. */
export class OpenAIModelError extends ModelError {
  /** Milliseconds the provider asked to wait before retrying, when it said. */
  readonly retryAfterMs: number | null;
  /** The HTTP status, when there was a response. */
  readonly status: number | null;

  constructor(info: ModelErrorInfo, opts: { status?: number | null; cause?: unknown } = {}) {
    super(info.class, info.message, { retryable: info.retryable, cause: opts.cause });
    this.retryAfterMs = info.retryAfterMs;
    this.status = opts.status ?? null;
  }
}

/** How an adapter names itself in messages and which secrets it masks. */
export interface OpenAIErrorContext {
  /** `openai-chat` or `openai-responses`. */
  label: string;
  secrets: readonly string[];
  /** The request timeout the client was given, for the timeout message. */
  timeoutMs: number | undefined;
}

/**
 * Turns anything a call threw into an `OpenAIModelError`. `phase` says whether the response
 * headers had arrived: once they have, anything but a provider error is the stream breaking.
 */
export function toOpenAIModelError(err: unknown, signal: AbortSignal, phase: 'request' | 'body', ctx: OpenAIErrorContext): OpenAIModelError {
  if (err instanceof OpenAIModelError) return err;
  if (signal.aborted) return new OpenAIModelError(cancelledInfo(ctx.label));
  let info = classifyOpenAIError(err, ctx.secrets, ctx.label);
  // Once the headers are in, anything but a provider error event is the stream breaking: a
  // dropped connection, or a chunk that is not JSON (a proxy cutting a frame); a retry gets a fresh one.
  if (phase === 'body' && !(err instanceof APIError) && info.class !== 'cancelled') {
    info = { class: 'network', message: clean(`${ctx.label} stream broke: ${errorText(err)}${causeText(err)}`, ctx.secrets), retryable: true, retryAfterMs: null };
  }
  if (err instanceof APIConnectionTimeoutError) {
    info = { ...info, message: `${ctx.label} request timed out after ${ctx.timeoutMs ?? 600_000}ms before the response began` };
  }
  const status = err instanceof APIError && typeof err.status === 'number' ? err.status : null;
  // The provider's own text may echo the key (a 401 does): chain the cause only when it is clean.
  const cause = ctx.secrets.some((s) => errorText(err).includes(s)) ? undefined : err;
  return new OpenAIModelError(info, { status, cause });
}

const OVERFLOW_TEXT = /maximum context length|context[ _]length[ _]exceeded|context window|exceeds the available context size|prompt is too long/i;

/**
 * Maps anything an OpenAI-compatible call threw to a model error class. `secrets` (the API key)
 * are masked in the message, which is one line: the status and the provider's own words.
 * `label` names the adapter in messages (the Responses adapter shares this classifier).
 */
export function classifyOpenAIError(err: unknown, secrets: readonly string[] = [], label = 'openai-chat'): ModelErrorInfo {
  if (err instanceof ModelError) {
    const parsed = ModelErrorClassSchema.safeParse(err.code);
    const retryAfterMs = (err as Partial<OpenAIModelError>).retryAfterMs;
    return {
      class: parsed.success ? parsed.data : 'server',
      message: clean(err.message, secrets),
      retryable: err.retryable,
      retryAfterMs: typeof retryAfterMs === 'number' ? retryAfterMs : null,
    };
  }
  const info = (cls: ModelErrorClass, message: string, retryable: boolean, retryAfterMs: number | null = null): ModelErrorInfo => ({
    class: cls,
    message: clean(message, secrets),
    retryable,
    retryAfterMs,
  });
  if (err instanceof APIUserAbortError || (err instanceof Error && err.name === 'AbortError')) return cancelledInfo(label);
  if (err instanceof APIConnectionTimeoutError) return info('network', `${label} request timed out before the response began`, true);
  if (err instanceof APIConnectionError) {
    return info('network', `${label} could not connect: ${errorText(err)}${causeText(err)}`, true);
  }
  if (err instanceof APIError) {
    const status = typeof err.status === 'number' ? err.status : null;
    const body = (err.error ?? {}) as { message?: unknown; type?: unknown; code?: unknown };
    const providerText = typeof body.message === 'string' ? body.message : errorText(err).replace(/^\d{3}\s+/, '');
    const code = typeof err.code === 'string' ? err.code : typeof body.code === 'string' ? body.code : '';
    const type = typeof err.type === 'string' ? err.type : typeof body.type === 'string' ? body.type : '';
    const line = `${label} ${status ?? 'stream error'}: ${providerText}`;
    if (status === 429 || code === 'rate_limit_exceeded') return info('rate_limit', line, true, retryAfterOf(err.headers));
    if (status === 503 || status === 529 || /overloaded/i.test(type) || /overloaded/i.test(code)) {
      return info('overloaded', line, true, retryAfterOf(err.headers));
    }
    if (code === 'context_length_exceeded' || ((status === null || (status >= 400 && status < 500)) && OVERFLOW_TEXT.test(providerText))) {
      return info('context_overflow', line, false);
    }
    if (status === 401 || status === 403) return info('auth', line, false);
    if (status !== null && status >= 400 && status < 500) return info('invalid_request', line, false);
    // A 5xx, or an error event inside a stream that already began: the provider failed, try again.
    return info('server', line, true, retryAfterOf(err.headers));
  }
  // Outside the SDK's own errors: a chunk that is not JSON, or the socket closing under the body.
  if (err instanceof SyntaxError) return info('network', `${label} stream sent a malformed chunk: ${err.message}`, true);
  if (err instanceof TypeError && /terminated|fetch failed|socket|other side closed/i.test(errorText(err) + causeText(err))) {
    return info('network', `${label} connection broke: ${errorText(err)}${causeText(err)}`, true);
  }
  return info('server', `${label} failed: ${errorText(err)}`, false);
}

/** The info of a request the caller cancelled. */
export function cancelledInfo(label = 'openai-chat'): ModelErrorInfo {
  return { class: 'cancelled', message: `${label} request was cancelled`, retryable: false, retryAfterMs: null };
}

/** `retry-after-ms` (milliseconds), else `Retry-After` (seconds or an HTTP date). */
function retryAfterOf(headers: Headers | undefined): number | null {
  if (!headers || typeof headers.get !== 'function') return null;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Math.round(Number(ms));
  const after = headers.get('retry-after');
  if (after === null || after.trim() === '') return null;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? Math.round(seconds * 1000) : null;
  const at = Date.parse(after);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** The message of anything thrown. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** ` (<cause message>)` when the error chains one, else empty. */
export function causeText(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined;
  return cause instanceof Error && cause.message ? ` (${cause.message})` : '';
}

/** One line, no secrets, bounded. */
export function clean(message: string, secrets: readonly string[]): string {
  let out = message;
  for (const s of secrets) if (s) out = out.split(s).join('***');
  // Belt and braces for keys the adapter was not given (a proxy echoing another one).
  out = out.replace(/\bsk-[A-Za-z0-9_-]{8,}/g, 'sk-***').replace(/Bearer\s+\S+/gi, 'Bearer ***');
  out = out.replace(/\s+/g, ' ').trim();
  return out.length > 400 ? `${out.slice(0, 397)}...` : out;
}
