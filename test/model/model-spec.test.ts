import { describe, expect, it } from 'vitest';
import { parseModelSpec } from '../../src/model/model-spec.js';
import { ConfigError } from '../../src/protocol/errors.js';

describe('parseModelSpec', () => {
  it('parses each accepted form', () => {
    expect(parseModelSpec('scripted:demo/script.json')).toEqual({ provider: 'scripted', file: 'demo/script.json' });
    expect(parseModelSpec('openai:gpt-4.1-mini')).toEqual({ provider: 'openai', model: 'gpt-4.1-mini' });
    expect(parseModelSpec('openai-responses:o4-mini')).toEqual({ provider: 'openai-responses', model: 'o4-mini' });
    // Only the first colon separates the provider: Windows paths and tagged models keep theirs.
    expect(parseModelSpec('openai:llama3:8b')).toEqual({ provider: 'openai', model: 'llama3:8b' });
  });

  it.each(['', '   ', 'gpt-4', 'anthropic:claude', 'scripted:', 'openai:'])('rejects %j listing the accepted forms', (spec) => {
    let caught: unknown;
    try {
      parseModelSpec(spec);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).code).toBe('config.model_spec');
    expect((caught as ConfigError).message).toContain('scripted:<file.json>, openai:<model>, openai-responses:<model>');
  });
});
