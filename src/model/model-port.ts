import type { FinishReason, ModelErrorClass, ReasoningEffort } from '../protocol/events.js';
import type { HistoryItem, ToolCallRequest, Usage } from '../protocol/history.js';
import type { BlobDelta } from '../protocol/blob-delta.js';
import type { ToolSpec } from '../protocol/tool-spec.js';

/** What a Step asks of a model, before an adapter turns it into a wire body. */
export interface ModelRequest {
  model: string;
  /** Stable parts first (instructions, tools), volatile last (history), so prompt caches hit. */
  instructions: string;
  tools: ToolSpec[];
  messages: HistoryItem[];
  maxOutputTokens: number | null;
  /** A JSON Schema the final answer must match; adapters ask for it natively where they can. */
  outputSchema?: Record<string, unknown> | null;
  /** Reasoning effort, for models that take one. */
  effort?: ReasoningEffort | null;
  /**
   * What the request is for when it is not the step's own: a compaction's summary (`index`: how
   * many compaction summaries the agent received before; the scripted model answers from its
   * `summaries` list by it). Not sent.
   */
  purpose?: { kind: 'compaction'; index: number };
}

/** A request in its final form: the exact body an adapter sends, and its digest. */
export interface PreparedRequest {
  /** The exact body (JSON text) that is sent; stored as a blob named by `digest`. */
  body: string;
  /** `sha256:<hex>` of `body`. */
  digest: string;
  request: ModelRequest;
  /** UTF-8 length of `body`, when the adapter knew it without measuring. */
  bytes?: number;
  /** This body continues the turn's last prepared body: its blob may be stored as the rest alone. */
  delta?: BlobDelta;
}

/** What a model produced, once the stream is done. */
export interface ModelOutput {
  content: string | null;
  toolCalls: ToolCallRequest[];
  finishReason: FinishReason;
  usage: Usage;
}

/** Events of a model stream; deltas go to clients live, only `done` is committed. */
export type ModelStreamEvent =
  | { type: 'text_delta'; text: string }
  | { type: 'tool_call_delta'; index: number; id?: string; name?: string; argumentsDelta: string }
  | { type: 'done'; output: ModelOutput };

/** What a model can do, frozen into each Step. */
export interface ModelCapabilities {
  contextWindow: number | null;
  maxOutputTokens: number | null;
  parallelToolCalls: boolean;
  structuredOutput: boolean;
  vision: boolean;
}

/** A classified model failure. */
export interface ModelErrorInfo {
  class: ModelErrorClass;
  message: string;
  retryable: boolean;
  retryAfterMs: number | null;
}

/** The model port (design §9): every adapter implements it. */
export interface ModelAdapter {
  /** `scripted`, `openai-chat`, `openai-responses`. */
  readonly provider: string;
  capabilities(model: string): ModelCapabilities;
  /** Builds the exact body to send; pure and deterministic for the same request. */
  prepare(request: ModelRequest): PreparedRequest;
  /** Streams one attempt. Throws a `ModelError` whose `code` is a `ModelErrorClass`. */
  stream(prepared: PreparedRequest, signal: AbortSignal): AsyncIterable<ModelStreamEvent>;
  /** Maps anything `stream` threw to a model error class. */
  classifyError(err: unknown): ModelErrorInfo;
}
