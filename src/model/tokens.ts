import { createRequire } from 'node:module';
import type { Usage } from '../protocol/history.js';
import type { ModelRequest } from './model-port.js';

/** A token count, and whether it was estimated rather than counted with the model's tokenizer. */
export interface TokenCount {
  tokens: number;
  estimated: boolean;
}

type Counter = (text: string) => number;
const counters = new Map<string, Counter>();
const load = createRequire(import.meta.url);

/**
 * The token counter of an encoding, loaded on first use: the o200k tables alone take ~0.9 s to
 * load, which every CLI start paid before, though only a model without reported usage needs them.
 */
function counter(encoding: 'o200k_base' | 'cl100k_base'): Counter {
  let c = counters.get(encoding);
  if (!c) {
    c = (load(`gpt-tokenizer/encoding/${encoding}`) as { countTokens: Counter }).countTokens;
    counters.set(encoding, c);
  }
  return c;
}

/** The tokenizer an OpenAI model uses, when known. */
export function encodingFor(model: string): 'o200k_base' | 'cl100k_base' | null {
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4|chatgpt-4o|gpt-oss)/.test(model)) return 'o200k_base';
  if (/^(gpt-4|gpt-3\.5)/.test(model)) return 'cl100k_base';
  return null;
}

/**
 * Counts the tokens of text with the model's real tokenizer (OpenAI's o200k and cl100k
 * encodings); for other models, an estimate of four characters a token, marked estimated.
 */
export function countTokens(text: string, model: string): TokenCount {
  switch (encodingFor(model)) {
    case 'o200k_base':
    case 'cl100k_base':
      return { tokens: counter(encodingFor(model)!)(text), estimated: false };
    case null:
      return { tokens: Math.ceil(text.length / 4), estimated: true };
  }
}

/**
 * Usage of a request and its output counted by actorloop, for a server that reported none: the
 * prompt's text (instructions, tool schemas, messages) and the output, with the model's tokenizer
 * where one is known. Always marked estimated: the provider's own count includes framing tokens.
 */
export function estimateUsage(
  request: ModelRequest,
  content: string | null,
  calls: Array<{ name: string; arguments: string }>,
): Usage {
  const parts: string[] = [request.instructions, JSON.stringify(request.tools)];
  for (const m of request.messages) {
    if (m.role === 'assistant') parts.push(m.content ?? '', ...m.toolCalls.map((c) => `${c.name}${c.arguments}`));
    else parts.push(m.content);
  }
  const output = (content ?? '') + calls.map((c) => `${c.name}${c.arguments}`).join('');
  return {
    inputTokens: countTokens(parts.join('\n'), request.model).tokens,
    outputTokens: countTokens(output, request.model).tokens,
    estimated: true,
  };
}

// What a provider adds around each message (role and separators) and before the reply, in
// OpenAI's chat format: counted so a worst case is never below the provider's own count.
const TOKENS_PER_MESSAGE = 4;
const TOKENS_PER_REPLY = 3;

/**
 * The input tokens of a request as a budget reserves them: its text counted with the model's
 * tokenizer (four characters a token where none is known), plus each message's framing.
 */
export function promptTokens(request: ModelRequest): number {
  return estimateUsage(request, null, []).inputTokens + (request.messages.length + 1) * TOKENS_PER_MESSAGE + TOKENS_PER_REPLY;
}

/** Counts streamed output tokens against a limit cheaply: deltas counted alone, the whole text recounted only when they pass it. */
export class StreamedTokens {
  private text = '';
  private counted = 0;
  private since = 0;
  constructor(private readonly model: string) {}

  /** Adds a delta; true once the output's tokens are over `limit`. */
  add(delta: string, limit: number): boolean {
    this.text += delta;
    this.since += countTokens(delta, this.model).tokens;
    if (this.counted + this.since <= limit) return false;
    // a delta alone counts a word cut in two as two tokens: recount the whole before judging
    this.counted = countTokens(this.text, this.model).tokens;
    this.since = 0;
    return this.counted > limit;
  }

  /** Tokens of the output so far (the last recount plus deltas since). */
  get tokens(): number {
    return this.counted + this.since;
  }
}
