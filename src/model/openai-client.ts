import OpenAI from 'openai';

/** The options both OpenAI adapters build their client from. */
export interface OpenAIClientOptions {
  apiKey: string;
  baseURL?: string;
  timeoutMs?: number;
}

/**
 * The `openai` client as the adapters use it. Every option the SDK would otherwise read from
 * the environment is given: config loading owns it. Its retries are off: the runtime's
 * Attempt machine retries, with the identical prepared request, and logs each try.
 */
export function createOpenAIClient(opts: OpenAIClientOptions): OpenAI {
  return new OpenAI({
    apiKey: opts.apiKey,
    baseURL: opts.baseURL ?? 'https://api.openai.com/v1',
    organization: null,
    project: null,
    webhookSecret: null,
    maxRetries: 0,
    ...(opts.timeoutMs === undefined ? {} : { timeout: opts.timeoutMs }),
    // The SDK logs unparsable chunks to the console; the adapters report them as errors instead.
    logLevel: 'off',
  });
}
