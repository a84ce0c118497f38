import { describe, expect, it } from 'vitest';
import { BUILTIN_PRICES, costOf, priceFor } from '../../src/model/pricing.js';
import { countTokens, encodingFor, estimateUsage } from '../../src/model/tokens.js';
import { addCost } from '../../src/protocol/history.js';

describe('pricing', () => {
  it('prices known models, dated snapshots by their family, and overrides win', () => {
    expect(priceFor('gpt-4.1-mini')).toEqual(BUILTIN_PRICES['gpt-4.1-mini']);
    expect(priceFor('gpt-4.1-mini-2025-04-14')).toEqual(BUILTIN_PRICES['gpt-4.1-mini']);
    expect(priceFor('gpt-4.1-mini', { 'gpt-4.1-mini': { inputPerMTok: 1, outputPerMTok: 2 } })).toEqual({ inputPerMTok: 1, outputPerMTok: 2 });
    expect(priceFor('my-local-llama', { 'my-local-llama': { inputPerMTok: 0, outputPerMTok: 0 } })).toEqual({ inputPerMTok: 0, outputPerMTok: 0 });
    expect(priceFor('my-local-llama')).toBeNull();
  });

  it('computes cost from usage, and an unpriced model costs unknown, never 0', () => {
    const usage = { inputTokens: 1_000_000, outputTokens: 500_000, estimated: false };
    expect(costOf(usage, { inputPerMTok: 0.4, outputPerMTok: 1.6 })).toBeCloseTo(1.2, 9);
    expect(costOf({ inputTokens: 1234, outputTokens: 56, estimated: false }, { inputPerMTok: 2, outputPerMTok: 8 })).toBe(0.002916);
    expect(costOf(usage, null)).toBeNull();
    expect(addCost(0.1, 0.2)).toBeCloseTo(0.3, 9);
    expect(addCost(0.1, null)).toBeNull();
    expect(addCost(null, 0.1)).toBeNull();
  });
});

describe('tokens', () => {
  it('counts with the model family real tokenizer, and estimates for unknown models', () => {
    expect(encodingFor('gpt-4.1-mini')).toBe('o200k_base');
    expect(encodingFor('gpt-4o')).toBe('o200k_base');
    expect(encodingFor('o4-mini')).toBe('o200k_base');
    expect(encodingFor('gpt-4-0613')).toBe('cl100k_base');
    expect(encodingFor('llama3:8b')).toBeNull();
    expect(countTokens('hello world', 'gpt-4o')).toEqual({ tokens: 2, estimated: false });
    expect(countTokens('hello world', 'gpt-4')).toEqual({ tokens: 2, estimated: false });
    expect(countTokens('hello world!', 'llama3:8b')).toEqual({ tokens: 3, estimated: true });
  });
});

describe('usage counted by actorloop', () => {
  it('counts prompt and output with the model tokenizer and marks the usage estimated', () => {
    const request = {
      model: 'gpt-4o',
      instructions: 'Be brief.',
      tools: [],
      messages: [{ role: 'user' as const, content: 'hello world' }],
      maxOutputTokens: null,
    };
    const u = estimateUsage(request, 'hello world', [{ name: 'read_file', arguments: '{"path":"a"}' }]);
    expect(u.estimated).toBe(true);
    expect(u.outputTokens).toBe(countTokens('hello worldread_file{"path":"a"}', 'gpt-4o').tokens);
    expect(u.inputTokens).toBe(countTokens('Be brief.\n[]\nhello world', 'gpt-4o').tokens);
  });
});
