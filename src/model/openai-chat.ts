import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { sha256Digest } from '../protocol/canonical-json.js';
import type { FinishReason } from '../protocol/events.js';
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
import { cancelledInfo, classifyOpenAIError, OpenAIModelError, toOpenAIModelError } from './openai-errors.js';
import { estimateUsage } from './tokens.js';
import { createOpenAIClient, postPrepared } from './openai-client.js';
import { GrowingBody, writeBody, type BodyLayout, type WireItems } from './request-body.js';

// Moved to openai-errors.ts (shared with openai-responses); re-exported so existing imports keep working.
export { classifyOpenAIError, OpenAIModelError } from './openai-errors.js';

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
  const text = writeBody(chatLayout(request), request.messages, chatWire);
  return { body: text, digest: sha256Digest(text), request };
}

/** The layout `prepareOpenAIChat` writes (the adapter writes the same bytes step by step, `GrowingBody`). */
function chatLayout(request: ModelRequest): BodyLayout {
  // the tool schemas before the messages: a request's bytes up to its last message are a prefix of the next one's
  const head: Record<string, unknown> = { model: request.model };
  if (request.tools.length > 0) {
    head['tools'] = request.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }
  const tail: Record<string, unknown> = {};
  if (request.maxOutputTokens !== null) tail['max_completion_tokens'] = request.maxOutputTokens;
  if (request.effort) tail['reasoning_effort'] = request.effort;
  // Structured output, natively: the runtime validates the answer against the schema either way.
  if (request.outputSchema) {
    tail['response_format'] = { type: 'json_schema', json_schema: { name: 'final_answer', schema: request.outputSchema, strict: false } };
  }
  tail['stream'] = true;
  tail['stream_options'] = { include_usage: true };
  return { head, key: 'messages', lead: [{ role: 'system', content: request.instructions }], tail };
}

const chatWire: WireItems = (item) => [toWireMessage(item)];

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
  const client = createOpenAIClient(opts);
  const bodies = new GrowingBody(chatWire);
  const secrets = opts.apiKey ? [opts.apiKey] : [];
  const classify = (err: unknown): ModelErrorInfo => classifyOpenAIError(err, secrets);

  const fail = (err: unknown, signal: AbortSignal, phase: 'request' | 'body'): OpenAIModelError =>
    toOpenAIModelError(err, signal, phase, { label: 'openai-chat', secrets, timeoutMs: opts.timeoutMs });

  async function* run(prepared: PreparedRequest, signal: AbortSignal): AsyncGenerator<ModelStreamEvent> {
    // Exactly the prepared bytes go on the wire.
    let stream: AsyncIterable<ChatCompletionChunk>;
    try {
      stream = await postPrepared<ChatCompletionChunk>(client, '/chat/completions', prepared.body, signal);
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
    prepare(request) {
      return Object.assign(bodies.write(chatLayout(request), request.messages), { request });
    },
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
    // no usage from the server: counted here, with the model's tokenizer where one is known
    return estimateUsage(prepared.request, content, calls);
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
