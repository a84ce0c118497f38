import { ConfigError } from '../protocol/errors.js';

/** A parsed `--model` value: which adapter, and its file or model name. */
export type ModelSpec =
  | { provider: 'scripted'; file: string }
  | { provider: 'openai' | 'openai-responses'; model: string };

const ACCEPTED = 'scripted:<file.json>, openai:<model>, openai-responses:<model>';

/** Parses `scripted:<file.json>`, `openai:<model>` or `openai-responses:<model>`. */
export function parseModelSpec(spec: string): ModelSpec {
  const trimmed = spec.trim();
  const colon = trimmed.indexOf(':');
  if (trimmed === '' || colon < 0) {
    throw specError(trimmed === '' ? 'model spec is empty' : `model spec "${trimmed}" has no provider prefix`);
  }
  const provider = trimmed.slice(0, colon);
  // Only the first colon separates: file paths and model names may contain more.
  const rest = trimmed.slice(colon + 1);
  switch (provider) {
    case 'scripted':
      if (rest === '') throw specError('model spec "scripted:" names no script file');
      return { provider, file: rest };
    case 'openai':
    case 'openai-responses':
      if (rest === '') throw specError(`model spec "${provider}:" names no model`);
      return { provider, model: rest };
    default:
      throw specError(`unknown model provider "${provider}" in "${trimmed}"`);
  }
}

function specError(message: string): ConfigError {
  return new ConfigError('config.model_spec', `${message}; accepted forms: ${ACCEPTED}`);
}

/** The model name a spec sends to its provider: `openai:gpt-4.1` → `gpt-4.1`; a script's spec as is. */
export function modelName(spec: string): string {
  const parsed = parseModelSpec(spec);
  return parsed.provider === 'scripted' ? spec : parsed.model;
}
