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

/**
 * POSTs a prepared request's exact bytes and streams the server-sent events back, as the SDK's
 * `create(…, {stream: true})` does. Handing `create` the parsed body made the SDK write it again:
 * a parse and a stringify of the whole history every step, and bytes on the wire that matched
 * the prepared ones only as long as that round trip was exact.
 */
export function postPrepared<Event>(client: OpenAI, path: string, body: string, signal: AbortSignal): Promise<AsyncIterable<Event>> {
  return client.post<AsyncIterable<Event>>(path, {
    body,
    headers: { 'content-type': 'application/json' },
    stream: true,
    signal,
  });
}
