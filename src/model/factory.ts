import type { ModelAdapter, ModelCapabilities } from './model-port.js';
import { parseModelSpec } from './model-spec.js';
import { loadAgentScript } from './script.js';
import { createOpenAIChatModel } from './openai-chat.js';
import { createOpenAIResponsesModel } from './openai-responses.js';
import { createScriptedModel } from './scripted-model.js';

/**
 * Builds the adapter a `--model` spec names. `cursor` is how many responses the actor's log
 * says were consumed, so a resumed scripted run continues where it was.
 */
export async function createModelAdapter(
  spec: string,
  opts: {
    cursor: number;
    agentName?: string;
    baseUrl?: string | null;
    apiKey?: string;
    /** Overrides of the built-in capability table for this model (from the config). */
    capabilities?: Partial<ModelCapabilities>;
  },
): Promise<ModelAdapter> {
  const parsed = parseModelSpec(spec);
  switch (parsed.provider) {
    case 'scripted': {
      const { responses, summaries } = await loadAgentScript(parsed.file, opts.agentName ?? 'main');
      return createScriptedModel({ responses, ...(summaries ? { summaries } : {}), cursor: opts.cursor, source: parsed.file, record: false });
    }
    case 'openai':
    case 'openai-responses': {
      const client = {
        // A local compatible server may take no key; the client needs a non-empty one.
        apiKey: opts.apiKey || 'none',
        model: parsed.model,
        ...(opts.baseUrl ? { baseURL: opts.baseUrl } : {}),
        ...(opts.capabilities ? { capabilities: opts.capabilities } : {}),
      };
      return parsed.provider === 'openai' ? createOpenAIChatModel(client) : createOpenAIResponsesModel(client);
    }
  }
}
