import { APIError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
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
import { openAIModelCapabilities } from './openai-chat.js';
import { cancelledInfo, classifyOpenAIError, OpenAIModelError, toOpenAIModelError } from './openai-errors.js';
import { estimateUsage } from './tokens.js';
import { createOpenAIClient, postPrepared } from './openai-client.js';
import { GrowingBody, writeBody, type BodyLayout } from './request-body.js';

const LABEL = 'openai-responses';

/** Options of `createOpenAIResponsesModel`. */
export interface OpenAIResponsesModelOptions {
  apiKey: string;
  /** An endpoint ending in `/v1` (default `https://api.openai.com/v1`; the environment is not read). */
  baseURL?: string;
  model: string;
  /** Time allowed until the response headers arrive (default 600000, the SDK's). */
  timeoutMs?: number;
  /** Overrides the built-in capability table, for every model this adapter is asked about. */
  capabilities?: Partial<ModelCapabilities>;
}

/** The Responses API adapter, stateless: the whole input goes with every request. */
export interface OpenAIResponsesModel extends ModelAdapter {
  readonly provider: 'openai-responses';
  readonly model: string;
}

/**
 * Builds the exact Responses body. Keys in a fixed order, stable parts first (instructions, tool
 * schemas), nothing volatile: the same request gives the same bytes, and a later step's body only
 * appends to `input`, so provider prompt caches hit. `store: false` and no `previous_response_id`:
 * the log, not the provider, holds the conversation.
 */
export function prepareOpenAIResponses(request: ModelRequest): PreparedRequest {
  const text = writeBody(responsesLayout(request), request.messages, toInputItems);
  return { body: text, digest: sha256Digest(text), request };
}

/** The layout `prepareOpenAIResponses` writes (the adapter writes the same bytes step by step, `GrowingBody`). */
function responsesLayout(request: ModelRequest): BodyLayout {
  const head: Record<string, unknown> = { model: request.model, instructions: request.instructions };
  if (request.tools.length > 0) {
    head['tools'] = request.tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.parameters, strict: false }));
  }
  const tail: Record<string, unknown> = {};
  if (request.maxOutputTokens !== null) tail['max_output_tokens'] = request.maxOutputTokens;
  if (request.effort) tail['reasoning'] = { effort: request.effort };
  // Structured output, natively: the runtime validates the answer against the schema either way.
  if (request.outputSchema) {
    tail['text'] = { format: { type: 'json_schema', name: 'final_answer', schema: request.outputSchema, strict: false } };
  }
  tail['stream'] = true;
  tail['store'] = false;
  return { head, key: 'input', lead: [], tail };
}

function toInputItems(item: HistoryItem): Array<Record<string, unknown>> {
  switch (item.role) {
    case 'user':
      return [{ role: 'user', content: item.content }];
    case 'assistant': {
      const items: Array<Record<string, unknown>> = [];
      // A message only when there is text, or nothing else: a calls-only turn is just its calls.
      if ((item.content !== null && item.content !== '') || item.toolCalls.length === 0) {
        items.push({ role: 'assistant', content: item.content ?? '' });
      }
      for (const c of item.toolCalls) items.push({ type: 'function_call', call_id: c.id, name: c.name, arguments: c.arguments });
      return items;
    }
    case 'tool':
      return [{ type: 'function_call_output', call_id: item.callId, output: item.content }];
  }
}

/** Builds the `openai-responses` adapter. */
export function createOpenAIResponsesModel(opts: OpenAIResponsesModelOptions): OpenAIResponsesModel {
  const client = createOpenAIClient(opts);
  const bodies = new GrowingBody(toInputItems);
  const secrets = opts.apiKey ? [opts.apiKey] : [];
  const ctx = { label: LABEL, secrets, timeoutMs: opts.timeoutMs };
  const classify = (err: unknown): ModelErrorInfo => classifyOpenAIError(err, secrets, LABEL);

  async function* run(prepared: PreparedRequest, signal: AbortSignal): AsyncGenerator<ModelStreamEvent> {
    // Exactly the prepared bytes go on the wire.
    let stream: AsyncIterable<ResponseStreamEvent>;
    try {
      stream = await postPrepared<ResponseStreamEvent>(client, '/responses', prepared.body, signal);
    } catch (err) {
      throw toOpenAIModelError(err, signal, 'request', ctx);
    }

    const acc = new ResponseAccumulator(prepared.digest);
    try {
      for await (const event of stream) {
        const failure = acc.add(event);
        for (const ev of acc.drain()) yield ev;
        if (failure) throw streamFailure(failure, classify);
      }
    } catch (err) {
      throw toOpenAIModelError(err, signal, 'body', ctx);
    }
    // The SDK ends an aborted stream quietly; the signal says what happened.
    if (signal.aborted) throw new OpenAIModelError(cancelledInfo(LABEL));
    if (acc.status === null) {
      throw new OpenAIModelError({
        class: 'network',
        message: `${LABEL} stream ended before response.completed (cut short)`,
        retryable: true,
        retryAfterMs: null,
      });
    }
    yield { type: 'done', output: acc.output(prepared) };
  }

  return {
    provider: LABEL,
    model: opts.model,
    capabilities: (model) => openAIModelCapabilities(model, opts.capabilities),
    prepare(request) {
      return Object.assign(bodies.write(responsesLayout(request), request.messages), { request });
    },
    stream: (prepared, signal) => run(prepared, signal),
    classifyError: classify,
  };
}

/** An `error` event, or the error of `response.failed`. */
interface StreamFailure {
  code: string | null;
  message: string;
}

// Response error codes that name something wrong with the request: retrying the same body cannot help.
const REQUEST_FAULT_CODES = /^(invalid_|empty_image|image_|failed_to_download_image)/;

/** Classifies an error the provider reported inside a stream that had begun. */
function streamFailure(failure: StreamFailure, classify: (err: unknown) => ModelErrorInfo): OpenAIModelError {
  const apiError = new APIError(undefined, { message: failure.message, code: failure.code, type: failure.code }, undefined, undefined);
  let info = classify(apiError);
  if (info.class === 'server' && failure.code !== null && REQUEST_FAULT_CODES.test(failure.code)) {
    info = { ...info, class: 'invalid_request', retryable: false };
  }
  return new OpenAIModelError(info, { cause: apiError });
}

interface PartialCall {
  id: string | null;
  name: string;
  arguments: string;
}

type Terminal = 'completed' | 'incomplete';

/** Loosely typed output item: compatible servers may omit fields the SDK types call required. */
interface WireItem {
  type?: string;
  call_id?: string | null;
  name?: string;
  arguments?: string;
  content?: Array<{ type?: string; text?: string; refusal?: string }>;
}

/** Gathers a streamed response: text, function calls by output index, terminal status and usage. */
class ResponseAccumulator {
  content = '';
  refusal = '';
  status: Terminal | null = null;
  incompleteReason: string | null = null;
  usage: { input_tokens?: number; output_tokens?: number } | null = null;
  private readonly calls: PartialCall[] = [];
  /** Output index → position in `calls`. */
  private readonly callAt = new Map<number, number>();
  /** Output indexes of messages whose text (or refusal) arrived as deltas. */
  private readonly textSeen = new Set<number>();
  private pending: ModelStreamEvent[] = [];

  constructor(private readonly digest: string) {}

  /** Stable per request: a retry of the same body names the same calls the same way. */
  private stableId(index: number): string {
    return `call_${this.digest.replace(/^sha256:/, '').slice(0, 12)}_${index}`;
  }

  drain(): ModelStreamEvent[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }

  /** Takes one event; returns the failure when the provider reported one. */
  add(event: ResponseStreamEvent): StreamFailure | null {
    switch (event.type) {
      case 'response.output_text.delta':
        this.textSeen.add(event.output_index);
        this.text(event.delta);
        return null;
      case 'response.refusal.delta':
        this.textSeen.add(event.output_index);
        this.refusal += event.delta;
        return null;
      case 'response.output_item.added':
        this.item(event.item as WireItem, event.output_index, false);
        return null;
      case 'response.function_call_arguments.delta': {
        const index = this.callAt.get(event.output_index) ?? this.openCall(event.output_index, null, '');
        this.calls[index]!.arguments += event.delta;
        this.pending.push({ type: 'tool_call_delta', index, argumentsDelta: event.delta });
        return null;
      }
      case 'response.output_item.done':
        this.item(event.item as WireItem, event.output_index, true);
        return null;
      case 'response.completed':
      case 'response.incomplete': {
        const r = event.response;
        // Servers that stream nothing but the final response still give their output here.
        (r.output ?? []).forEach((item, i) => this.item(item as WireItem, i, true));
        this.status = event.type === 'response.completed' ? 'completed' : 'incomplete';
        this.incompleteReason = r.incomplete_details?.reason ?? null;
        this.usage = r.usage ?? null;
        return null;
      }
      case 'response.failed':
        return { code: event.response.error?.code ?? null, message: event.response.error?.message ?? 'the response failed' };
      case 'error':
        return { code: event.code, message: event.message };
      default:
        return null;
    }
  }

  private text(delta: string): void {
    if (delta === '') return;
    this.content += delta;
    this.pending.push({ type: 'text_delta', text: delta });
  }

  private openCall(outputIndex: number, id: string | null, name: string): number {
    const index = this.calls.length;
    this.calls.push({ id, name, arguments: '' });
    this.callAt.set(outputIndex, index);
    const ev: Extract<ModelStreamEvent, { type: 'tool_call_delta' }> = { type: 'tool_call_delta', index, id: id ?? this.stableId(index), argumentsDelta: '' };
    if (name) ev.name = name;
    this.pending.push(ev);
    return index;
  }

  /** An item begins (`done` false) or is complete; a complete one fills in whatever no delta brought. */
  private item(item: WireItem, outputIndex: number, done: boolean): void {
    if (item.type === 'function_call') {
      const known = this.callAt.get(outputIndex);
      const index = known ?? this.openCall(outputIndex, item.call_id || null, item.name ?? '');
      const call = this.calls[index]!;
      if (known !== undefined) {
        if (!call.id && item.call_id) call.id = item.call_id;
        if (!call.name && item.name) call.name = item.name;
      }
      const full = item.arguments ?? '';
      // Arguments arrive as deltas; a server that sent none gives them whole on the finished item.
      if (full !== '' && call.arguments === '' && (done || known === undefined)) {
        call.arguments = full;
        this.pending.push({ type: 'tool_call_delta', index, argumentsDelta: full });
      }
      return;
    }
    if (item.type === 'message' && done && !this.textSeen.has(outputIndex)) {
      this.textSeen.add(outputIndex);
      for (const part of item.content ?? []) {
        if (part.type === 'output_text' && part.text) this.text(part.text);
        if (part.type === 'refusal' && part.refusal) this.refusal += part.refusal;
      }
    }
  }

  output(prepared: PreparedRequest): ModelOutput {
    // Arguments stay as the model wrote them, valid JSON or not: the runtime rejects bad ones back to the model.
    const toolCalls: ToolCallRequest[] = this.calls.map((c, index) => ({ id: c.id ?? this.stableId(index), name: c.name, arguments: c.arguments }));
    const refused = this.content === '' && this.refusal !== '' && toolCalls.length === 0;
    const content = this.content !== '' ? this.content : refused ? this.refusal : null;
    return { content, toolCalls, finishReason: this.finishReason(refused, toolCalls.length > 0), usage: this.usageOf(prepared, content, toolCalls) };
  }

  private finishReason(refused: boolean, hasCalls: boolean): FinishReason {
    if (this.status === 'incomplete') {
      // Cut short: even calls may carry truncated arguments, so the truncation is what is reported.
      return this.incompleteReason === 'content_filter' ? 'content_filter' : 'length';
    }
    if (refused) return 'refusal';
    return hasCalls ? 'tool_calls' : 'stop';
  }

  private usageOf(prepared: PreparedRequest, content: string | null, calls: ToolCallRequest[]): Usage {
    const u = this.usage;
    if (u && typeof u.input_tokens === 'number' && typeof u.output_tokens === 'number') {
      return { inputTokens: u.input_tokens, outputTokens: u.output_tokens, estimated: false };
    }
    // no usage from the server: counted here, with the model's tokenizer where one is known
    return estimateUsage(prepared.request, content, calls);
  }
}
