import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { sha256Digest } from '../protocol/canonical-json.js';
import { ModelError } from '../protocol/errors.js';
import { ModelErrorClassSchema, type FinishReason, type ModelErrorClass } from '../protocol/events.js';
import type { HistoryItem, ToolCallRequest, Usage } from '../protocol/history.js';
import type {
  ModelAdapter,
  ModelCapabilities,
  ModelErrorInfo,
  ModelOutput,
  ModelRequest,
  ModelStreamEvent,
  PreparedRequest,
} from './model-port.js';

/** Options of `createOpenAIChatModel`. */
export interface OpenAIChatModelOptions {
  apiKey: string;
  /** An OpenAI-compatible endpoint ending in `/v1` (default `https://api.openai.com/v1`; the environment is not read). */
  baseURL?: string;
  model: string;
  /** Time allowed until the response headers arrive (default 600000, the SDK's). */
  timeoutMs?: number;
  /** Overrides the built-in capability table, for every model this adapter is asked about. */
  capabilities?: Partial<ModelCapabilities>;
}

/** The Chat Completions adapter (OpenAI and compatible servers: vLLM, Ollama, llama.cpp, LiteLLM). */
export interface OpenAIChatModel extends ModelAdapter {
  readonly provider: 'openai-chat';
  readonly model: string;
}

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

const CONSERVATIVE: ModelCapabilities = Object.freeze({
  contextWindow: null,
  maxOutputTokens: null,
  parallelToolCalls: false,
  structuredOutput: false,
  vision: false,
});

/** Built-in capabilities of common OpenAI models; dated snapshots (`gpt-4o-2024-08-06`) match their family. */
export const OPENAI_MODEL_CAPABILITIES: Readonly<Record<string, ModelCapabilities>> = Object.freeze({
  'gpt-4.1': { contextWindow: 1_047_576, maxOutputTokens: 32_768, parallelToolCalls: true, structuredOutput: true, vision: true },
  'gpt-4.1-mini': { contextWindow: 1_047_576, maxOutputTokens: 32_768, parallelToolCalls: true, structuredOutput: true, vision: true },
  'gpt-4o': { contextWindow: 128_000, maxOutputTokens: 16_384, parallelToolCalls: true, structuredOutput: true, vision: true },
  'gpt-4o-mini': { contextWindow: 128_000, maxOutputTokens: 16_384, parallelToolCalls: true, structuredOutput: true, vision: true },
  o3: { contextWindow: 200_000, maxOutputTokens: 100_000, parallelToolCalls: true, structuredOutput: true, vision: true },
  'o4-mini': { contextWindow: 200_000, maxOutputTokens: 100_000, parallelToolCalls: true, structuredOutput: true, vision: true },
});

/** Capabilities of `model` from the built-in table (longest matching family), with overrides applied. */
export function openAIModelCapabilities(model: string, overrides: Partial<ModelCapabilities> = {}): ModelCapabilities {
  let best: string | null = null;
  for (const family of Object.keys(OPENAI_MODEL_CAPABILITIES)) {
    const matches = model === family || model.startsWith(`${family}-`);
    // `gpt-4.1-mini-2025-04-14` starts with both `gpt-4.1-` and `gpt-4.1-mini-`: the longest wins.
    if (matches && (best === null || family.length > best.length)) best = family;
  }
  const base = best === null ? CONSERVATIVE : OPENAI_MODEL_CAPABILITIES[best]!;
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  return { ...base, ...defined };
}

/**
 * Builds the exact Chat Completions body. Keys in a fixed order, nothing volatile (no time, no
 * random ID): the same request gives the same bytes, and a later step's body extends the earlier
 * one's messages at the end, so provider prompt caches hit.
 */
export function prepareOpenAIChat(request: ModelRequest): PreparedRequest {
  const body: Record<string, unknown> = {
    model: request.model,
    messages: [{ role: 'system', content: request.instructions }, ...request.messages.map(toWireMessage)],
  };
  if (request.tools.length > 0) {
    body['tools'] = request.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }
  if (request.maxOutputTokens !== null) body['max_completion_tokens'] = request.maxOutputTokens;
  body['stream'] = true;
  body['stream_options'] = { include_usage: true };
  const text = JSON.stringify(body);
  return { body: text, digest: sha256Digest(text), request };
}

function toWireMessage(item: HistoryItem): Record<string, unknown> {
  switch (item.role) {
    case 'user':
      return { role: 'user', content: item.content };
    case 'assistant': {
      if (item.toolCalls.length === 0) return { role: 'assistant', content: item.content ?? '' };
      return {
        role: 'assistant',
        content: item.content,
        tool_calls: item.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
      };
    }
    case 'tool':
      return { role: 'tool', tool_call_id: item.callId, content: item.content };
  }
}

/** Builds the `openai-chat` adapter. */
export function createOpenAIChatModel(opts: OpenAIChatModelOptions): OpenAIChatModel {
  const client = new OpenAI({
    apiKey: opts.apiKey,
    // Every option the SDK would otherwise read from process.env is given: config loading owns the environment.
    baseURL: opts.baseURL ?? 'https://api.openai.com/v1',
    organization: null,
    project: null,
    webhookSecret: null,
    // The runtime's Attempt machine retries, with the identical prepared request, and logs each try.
    maxRetries: 0,
    ...(opts.timeoutMs === undefined ? {} : { timeout: opts.timeoutMs }),
    // The SDK logs unparsable chunks to the console; the adapter reports them as errors instead.
    logLevel: 'off',
  });
  const secrets = opts.apiKey ? [opts.apiKey] : [];
  const classify = (err: unknown): ModelErrorInfo => classifyOpenAIError(err, secrets);

  function fail(err: unknown, signal: AbortSignal, phase: 'request' | 'body'): OpenAIModelError {
    if (err instanceof OpenAIModelError) return err;
    if (signal.aborted) return new OpenAIModelError(cancelledInfo());
    let info = classify(err);
    // Once the headers are in, anything but a provider error event is the stream breaking: a
    // dropped connection, or a chunk that is not JSON (a proxy cutting a frame); a retry gets a fresh one.
    if (phase === 'body' && !(err instanceof APIError) && info.class !== 'cancelled') {
      info = { class: 'network', message: clean(`openai-chat stream broke: ${errorText(err)}${causeText(err)}`, secrets), retryable: true, retryAfterMs: null };
    }
    if (err instanceof APIConnectionTimeoutError) {
      info = { ...info, message: `openai-chat request timed out after ${opts.timeoutMs ?? 600_000}ms before the response began` };
    }
    const status = err instanceof APIError && typeof err.status === 'number' ? err.status : null;
    // The provider's own text may echo the key (a 401 does): chain the cause only when it is clean.
    const cause = secrets.some((s) => errorText(err).includes(s)) ? undefined : err;
    return new OpenAIModelError(info, { status, cause });
  }

  async function* run(prepared: PreparedRequest, signal: AbortSignal): AsyncGenerator<ModelStreamEvent> {
    // Exactly the prepared bytes go on the wire: parse them back rather than rebuilding the body.
    const body = JSON.parse(prepared.body) as OpenAI.Chat.ChatCompletionCreateParamsStreaming;
    let stream: AsyncIterable<ChatCompletionChunk>;
    try {
      stream = await client.chat.completions.create(body, { signal });
    } catch (err) {
      throw fail(err, signal, 'request');
    }

    const acc = new Accumulator(prepared.digest);
    try {
      for await (const chunk of stream) {
        for (const ev of acc.add(chunk)) yield ev;
      }
    } catch (err) {
      throw fail(err, signal, 'body');
    }
    // The SDK ends an aborted stream quietly; the signal says what happened.
    if (signal.aborted) throw new OpenAIModelError(cancelledInfo());
    if (acc.finish === null) {
      throw new OpenAIModelError({
        class: 'network',
        message: 'openai-chat stream ended without a finish reason (cut short)',
        retryable: true,
        retryAfterMs: null,
      });
    }
    yield { type: 'done', output: acc.output(prepared) };
  }

  return {
    provider: 'openai-chat',
    model: opts.model,
    capabilities: (model) => openAIModelCapabilities(model, opts.capabilities),
    prepare: prepareOpenAIChat,
    stream: (prepared, signal) => run(prepared, signal),
    classifyError: classify,
  };
}

interface PartialCall {
  id: string | null;
  name: string;
  arguments: string;
}

/** Gathers a streamed completion: text, tool calls by index, finish reason and usage. */
class Accumulator {
  content = '';
  refusal = '';
  finish: string | null = null;
  usage: { prompt_tokens: number; completion_tokens: number } | null = null;
  readonly calls: PartialCall[] = [];

  constructor(private readonly digest: string) {}

  /** Stable per request: a retry of the same body names the same calls the same way. */
  stableId(index: number): string {
    return `call_${this.digest.replace(/^sha256:/, '').slice(0, 12)}_${index}`;
  }

  /** Servers that omit `index` (older llama.cpp): a new id starts a call, anything else continues the last. */
  private indexWithoutIndex(id: string | undefined): number {
    if (id) {
      const known = this.calls.findIndex((c) => c?.id === id);
      return known >= 0 ? known : this.calls.length;
    }
    return Math.max(0, this.calls.length - 1);
  }

  add(chunk: ChatCompletionChunk): ModelStreamEvent[] {
    const events: ModelStreamEvent[] = [];
    if (chunk.usage) this.usage = chunk.usage;
    // Azure and some proxies send chunks with no choices (filter results, usage); only choice 0 counts.
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    if (!choice) return events;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.content += delta.content;
      events.push({ type: 'text_delta', text: delta.content });
    }
    if (typeof delta.refusal === 'string') this.refusal += delta.refusal;
    for (const tc of delta.tool_calls ?? []) {
      const index = typeof tc.index === 'number' ? tc.index : this.indexWithoutIndex(tc.id);
      const fresh = this.calls[index] === undefined;
      const call = (this.calls[index] ??= { id: null, name: '', arguments: '' });
      if (tc.id) call.id = tc.id;
      const name = tc.function?.name;
      // OpenAI sends the name once; some servers repeat it in every delta, which must not double it.
      if (name && name !== call.name) call.name += name;
      const argumentsDelta = tc.function?.arguments ?? '';
      call.arguments += argumentsDelta;
      const ev: Extract<ModelStreamEvent, { type: 'tool_call_delta' }> = { type: 'tool_call_delta', index, argumentsDelta };
      if (fresh) ev.id = call.id ?? this.stableId(index);
      if (tc.function?.name) ev.name = tc.function.name;
      events.push(ev);
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return events;
  }

  output(prepared: PreparedRequest): ModelOutput {
    const toolCalls: ToolCallRequest[] = [];
    this.calls.forEach((c, index) => {
      // Arguments stay as the model wrote them, valid JSON or not: the runtime rejects bad ones back to the model.
      if (c) toolCalls.push({ id: c.id ?? this.stableId(index), name: c.name, arguments: c.arguments });
    });
    const refused = this.content === '' && this.refusal !== '' && toolCalls.length === 0;
    const content = this.content !== '' ? this.content : refused ? this.refusal : null;
    const finishReason = refused ? 'refusal' : normalizeFinishReason(this.finish, toolCalls.length > 0);
    return { content, toolCalls, finishReason, usage: this.usageOf(prepared, content, toolCalls) };
  }

  private usageOf(prepared: PreparedRequest, content: string | null, calls: ToolCallRequest[]): Usage {
    if (this.usage) {
      return { inputTokens: this.usage.prompt_tokens ?? 0, outputTokens: this.usage.completion_tokens ?? 0, estimated: false };
    }
    const outputChars = (content?.length ?? 0) + calls.reduce((n, c) => n + c.name.length + c.arguments.length, 0);
    return { inputTokens: Math.ceil(prepared.body.length / 4), outputTokens: Math.ceil(outputChars / 4), estimated: true };
  }
}

/** Maps a provider finish reason to the normalized set (design §9). */
export function normalizeFinishReason(raw: string | null, hasCalls: boolean): FinishReason {
  switch (raw) {
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls';
    case 'length':
    case 'content_filter':
    case 'refusal':
    case 'error':
      return raw;
    case 'stop':
      // Some compatible servers (older Ollama) say `stop` with tool calls: the calls are what matter.
      return hasCalls ? 'tool_calls' : 'stop';
    default:
      // Unknown or missing (`eos`, null): calls must still run; otherwise the text is the answer.
      return hasCalls ? 'tool_calls' : 'stop';
  }
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

function cancelledInfo(label = 'openai-chat'): ModelErrorInfo {
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

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function causeText(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined;
  return cause instanceof Error && cause.message ? ` (${cause.message})` : '';
}

/** One line, no secrets, bounded. */
function clean(message: string, secrets: readonly string[]): string {
  let out = message;
  for (const s of secrets) if (s) out = out.split(s).join('***');
  // Belt and braces for keys the adapter was not given (a proxy echoing another one).
  out = out.replace(/\bsk-[A-Za-z0-9_-]{8,}/g, 'sk-***').replace(/Bearer\s+\S+/gi, 'Bearer ***');
  out = out.replace(/\s+/g, ' ').trim();
  return out.length > 400 ? `${out.slice(0, 397)}...` : out;
}
