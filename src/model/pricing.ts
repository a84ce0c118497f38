import type { Usage } from '../protocol/history.js';

/** What a model costs, in US dollars per million tokens. */
export interface Price {
  inputPerMTok: number;
  outputPerMTok: number;
}

/**
 * List prices of common OpenAI models (USD per 1M tokens, standard tier, no cache discount).
 * Providers change prices: `[pricing."<model>"]` in the config overrides an entry or adds one.
 */
export const BUILTIN_PRICES: Readonly<Record<string, Price>> = Object.freeze({
  'gpt-4.1': { inputPerMTok: 2.0, outputPerMTok: 8.0 },
  'gpt-4.1-mini': { inputPerMTok: 0.4, outputPerMTok: 1.6 },
  'gpt-4.1-nano': { inputPerMTok: 0.1, outputPerMTok: 0.4 },
  'gpt-4o': { inputPerMTok: 2.5, outputPerMTok: 10.0 },
  'gpt-4o-mini': { inputPerMTok: 0.15, outputPerMTok: 0.6 },
  o3: { inputPerMTok: 2.0, outputPerMTok: 8.0 },
  'o4-mini': { inputPerMTok: 1.1, outputPerMTok: 4.4 },
  'gpt-5': { inputPerMTok: 1.25, outputPerMTok: 10.0 },
  'gpt-5-mini': { inputPerMTok: 0.25, outputPerMTok: 2.0 },
  'gpt-5-nano': { inputPerMTok: 0.05, outputPerMTok: 0.4 },
});

/**
 * The price of a model: a configured one, else the built-in one; a dated snapshot name
 * (`gpt-4.1-2025-04-14`) falls back to its family. Null when unknown: its cost is unknown, never 0.
 */
export function priceFor(model: string, overrides: Readonly<Record<string, Price>> = {}): Price | null {
  const exact = overrides[model] ?? BUILTIN_PRICES[model];
  if (exact) return exact;
  const family = model.replace(/-\d{4}-\d{2}-\d{2}$/, '');
  return family !== model ? (overrides[family] ?? BUILTIN_PRICES[family] ?? null) : null;
}

/** The cost of a usage at a price, in USD; null when the price is unknown. */
export function costOf(usage: Usage, price: Price | null): number | null {
  if (!price) return null;
  const usd = (usage.inputTokens * price.inputPerMTok + usage.outputTokens * price.outputPerMTok) / 1_000_000;
  // whole micro-dollars: sums of many attempts stay exact enough and print cleanly
  return Math.round(usd * 1_000_000) / 1_000_000;
}
