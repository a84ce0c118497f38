import { ConfigError } from '../protocol/errors.js';
import type { ModelAdapter } from './model-port.js';
import { parseModelSpec } from './model-spec.js';
import { loadScript } from './script.js';
import { createScriptedModel } from './scripted-model.js';

/**
 * Builds the adapter a `--model` spec names. `cursor` is how many responses the actor's log
 * says were consumed, so a resumed scripted run continues where it was.
 */
export async function createModelAdapter(spec: string, opts: { cursor: number; agentName?: string }): Promise<ModelAdapter> {
  const parsed = parseModelSpec(spec);
  switch (parsed.provider) {
    case 'scripted': {
      const responses = await loadScript(parsed.file, opts.agentName ?? 'main');
      return createScriptedModel({ responses, cursor: opts.cursor, source: parsed.file, record: false });
    }
    case 'openai':
    case 'openai-responses':
      throw new ConfigError('config.model_unavailable', `the ${parsed.provider} adapter is not built yet`, {
        hint: 'use --model scripted:<file.json> for now',
      });
  }
}
