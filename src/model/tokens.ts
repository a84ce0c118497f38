import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import type { Usage } from '../protocol/history.js';
import type { ModelRequest } from './model-port.js';

/** A token count, and whether it was estimated rather than counted with the model's tokenizer. */
export interface TokenCount {
  tokens: number;
  estimated: boolean;
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
      return { tokens: countO200k(text), estimated: false };
    case 'cl100k_base':
      return { tokens: countCl100k(text), estimated: false };
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
