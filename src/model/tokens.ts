import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';

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
