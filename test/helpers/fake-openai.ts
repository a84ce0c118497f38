import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One tool call a scripted turn makes; `id: null` sends none (as some compatible servers do). */
export interface FakeToolCall {
  id?: string | null;
  name: string;
  arguments: string;
}

/** A failure the fake server injects instead of (or in the middle of) a normal answer. */
export type FakeFault =
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: unknown }
  | { kind: 'drop-mid-stream'; afterChunks: number }
  | { kind: 'slow-first-byte'; delayMs: number }
  | { kind: 'malformed-chunk'; afterChunks: number }
  | { kind: 'empty-choices-chunk' }
  | { kind: 'role-only-first-chunk' };

/** What the fake server answers to one model request. */
export interface FakeTurn {
  content?: string;
  toolCalls?: FakeToolCall[];
  /** Defaults to `tool_calls` when there are calls, else `stop`. */
  finishReason?: string;
  /** `null`: send no usage at all; absent: a count derived from the request and the output. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Split text and arguments into pieces of this many characters (default 8). */
  chunkChars?: number;
  fault?: FakeFault;
}

/** A request as the fake server received it. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body, or `undefined` when there was none. */
  body: unknown;
  /** The body exactly as it arrived. */
  rawBody: string;
}

/** Options of `startFakeOpenAI`. */
export interface FakeOpenAIOptions {
  /** Answers for model requests, in order; one is used per POST to chat/completions or responses. */
  turns?: FakeTurn[];
  /** Decides each answer instead of `turns`; `index` counts model requests from 0. */
  handler?: (req: RecordedRequest, index: number) => FakeTurn;
  /** Model ids `GET /v1/models` lists (default `['test-model']`). */
  models?: string[];
}

/** A running fake server. */
export interface FakeOpenAI {
  /** `http://127.0.0.1:<port>/v1`, to pass as the client's `baseURL`. */
  baseURL: string;
  /** Every request received, in order (models listings included). */
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** Canned faults for the errors providers commonly return. */
export const FAULTS = {
  /** 429 with `Retry-After` (seconds or an HTTP date) and/or `retry-after-ms`. */
  rateLimited(opts: { retryAfter?: string; retryAfterMs?: number } = {}): FakeFault {
    const headers: Record<string, string> = {};
    if (opts.retryAfter !== undefined) headers['retry-after'] = opts.retryAfter;
    if (opts.retryAfterMs !== undefined) headers['retry-after-ms'] = String(opts.retryAfterMs);
    return {
      kind: 'status',
      status: 429,
      headers,
      body: errorBody('Rate limit reached for requests per min (RPM). Please try again later.', 'requests', 'rate_limit_exceeded'),
    };
  },
  serverError(): FakeFault {
    return { kind: 'status', status: 500, body: errorBody('The server had an error while processing your request.', 'server_error', null) };
  },
  overloaded(): FakeFault {
    return { kind: 'status', status: 503, body: errorBody('The engine is currently overloaded, please try again later.', 'server_error', null) };
  },
  contextLengthExceeded(): FakeFault {
    return {
      kind: 'status',
      status: 400,
      body: errorBody(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
        'invalid_request_error',
        'context_length_exceeded',
        'messages',
      ),
    };
  },
  /** 401 whose message echoes the bearer token the server received, in full (worse than OpenAI, which masks it). */
  unauthorized(): FakeFault {
    return { kind: 'status', status: 401 };
  },
} as const;

const CREATED = 1_700_000_000;

/** Starts a fake OpenAI-compatible server on a free loopback port. */
export async function startFakeOpenAI(opts: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const requests: RecordedRequest[] = [];
  const models = opts.models ?? ['test-model'];
  const timers = new Set<NodeJS.Timeout>();
  let modelRequests = 0;

  const server = createServer((req, res) => {
    res.on('error', () => undefined);
    void readBody(req).then((rawBody) => handle(req, res, rawBody));
  });

  async function handle(req: IncomingMessage, res: ServerResponse, rawBody: string): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      return sendJson(res, 400, errorBody('We could not parse the JSON body of your request.', 'invalid_request_error', null));
    }
    const recorded: RecordedRequest = { method: req.method ?? 'GET', path, headers: req.headers, body, rawBody };
    requests.push(recorded);

    if (req.method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: models.map((id) => ({ id, object: 'model', created: CREATED, owned_by: 'fake-openai' })),
      });
    }
    const kind = req.method === 'POST' && path === '/v1/chat/completions' ? 'chat' : req.method === 'POST' && path === '/v1/responses' ? 'responses' : null;
    if (!kind) return sendJson(res, 404, errorBody(`Unknown request URL: ${req.method} ${path}.`, 'invalid_request_error', 'unknown_url'));

    const index = modelRequests++;
    const turn = opts.handler ? opts.handler(recorded, index) : opts.turns?.[index];
    if (!turn) {
      const had = opts.turns?.length ?? 0;
      return sendJson(res, 500, errorBody(`fake-openai: no scripted turn left for model request ${index} (script has ${had})`, 'server_error', 'fake_turns_exhausted'));
    }

    const fault = turn.fault;
    if (fault?.kind === 'status') {
      const payload = fault.body ?? (fault.status === 401 ? unauthorizedBody(req.headers) : errorBody(`fake status ${fault.status}`, 'server_error', null));
      return sendJson(res, fault.status, payload, fault.headers);
    }
    if (fault?.kind === 'slow-first-byte') {
      const gone = await delay(fault.delayMs, res, timers);
      if (gone) return;
    }

    const b = (body ?? {}) as Record<string, unknown>;
    const model = typeof b['model'] === 'string' ? b['model'] : 'test-model';
    const usage = turn.usage === null ? null : (turn.usage ?? defaultUsage(rawBody, turn));
    if (kind === 'chat') {
      if (b['stream'] !== true) return sendJson(res, 200, chatCompletion(turn, index, model, usage));
      const includeUsage = (b['stream_options'] as { include_usage?: unknown } | undefined)?.include_usage === true;
      const chunks = chatChunks(turn, index, model, includeUsage ? usage : null).map((c) => `data: ${JSON.stringify(c)}\n\n`);
      chunks.push('data: [DONE]\n\n');
      return sendStream(res, chunks, fault);
    }
    if (b['stream'] !== true) return sendJson(res, 200, responseObject(turn, index, model, usage, 'done'));
    const events = responseEvents(turn, index, model, usage).map((e) => `event: ${e['type'] as string}\ndata: ${JSON.stringify(e)}\n\n`);
    return sendStream(res, events, fault);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function errorBody(message: string, type: string, code: string | null, param: string | null = null): unknown {
  return { error: { message, type, param, code } };
}

function unauthorizedBody(headers: IncomingHttpHeaders): unknown {
  const token = (headers.authorization ?? '').replace(/^Bearer\s+/i, '');
  return errorBody(
    `Incorrect API key provided: ${token}. You can find your API key at https://platform.openai.com/account/api-keys.`,
    'invalid_request_error',
    'invalid_api_key',
  );
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
}

function sendJson(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(payload);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Resolves true when the client went away before the delay ended. */
function delay(ms: number, res: ServerResponse, timers: Set<NodeJS.Timeout>): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = (): void => {
      clearTimeout(timer);
      timers.delete(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      timers.delete(timer);
      res.off('close', onClose);
      resolve(false);
    }, ms);
    timers.add(timer);
    res.once('close', onClose);
  });
}

function write(res: ServerResponse, text: string): Promise<boolean> {
  return new Promise((resolve) => {
    if (res.destroyed || res.writableEnded) return resolve(false);
    res.write(text, (err) => resolve(!err));
  });
}

async function sendStream(res: ServerResponse, frames: string[], fault: FakeFault | undefined): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const [i, frame] of frames.entries()) {
    if (fault?.kind === 'drop-mid-stream' && i === fault.afterChunks) {
      // Cut the connection without ending the chunked body: the client sees a premature close.
      res.socket?.destroy();
      return;
    }
    if (fault?.kind === 'malformed-chunk' && i === fault.afterChunks) {
      await write(res, 'data: {"id":"chatcmpl-broken","choices":[{"delta":{"content":"oops\n\n');
      res.end();
      return;
    }
    if (!(await write(res, frame))) return;
  }
  res.end();
}

interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

function defaultUsage(rawBody: string, turn: FakeTurn): WireUsage {
  const outChars = (turn.content ?? '').length + (turn.toolCalls ?? []).reduce((n, c) => n + c.name.length + c.arguments.length, 0);
  return { prompt_tokens: Math.ceil(rawBody.length / 4), completion_tokens: Math.ceil(outChars / 4) };
}

function pieces(text: string, size: number): string[] {
  if (text.length === 0) return [];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function finishReasonOf(turn: FakeTurn): string {
  return turn.finishReason ?? ((turn.toolCalls?.length ?? 0) > 0 ? 'tool_calls' : 'stop');
}

function callId(call: FakeToolCall, turnIndex: number, i: number): string | null {
  return call.id === undefined ? `call_fake${turnIndex}_${i}` : call.id;
}

function chatUsage(u: WireUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function chatCompletion(turn: FakeTurn, index: number, model: string, usage: WireUsage | null): unknown {
  const calls = turn.toolCalls ?? [];
  const message: Record<string, unknown> = { role: 'assistant', content: turn.content ?? null, refusal: null, annotations: [] };
  if (calls.length > 0) {
    message['tool_calls'] = calls.map((c, i) => {
      const id = callId(c, index, i);
      return { ...(id === null ? {} : { id }), type: 'function', function: { name: c.name, arguments: c.arguments } };
    });
  }
  return {
    id: `chatcmpl-fake${index}`,
    object: 'chat.completion',
    created: CREATED,
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReasonOf(turn) }],
    ...(usage ? { usage: chatUsage(usage) } : {}),
    system_fingerprint: 'fp_fake',
  };
}

/** The chunks of a streamed Chat Completion, as OpenAI sends them. */
function chatChunks(turn: FakeTurn, index: number, model: string, usage: WireUsage | null): Array<Record<string, unknown>> {
  const size = Math.max(1, turn.chunkChars ?? 8);
  const base = { id: `chatcmpl-fake${index}`, object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_fake' };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): Record<string, unknown> => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const out: Array<Record<string, unknown>> = [];
  if (turn.fault?.kind === 'empty-choices-chunk') out.push({ ...base, choices: [] });
  out.push(chunk(turn.fault?.kind === 'role-only-first-chunk' ? { role: 'assistant' } : { role: 'assistant', content: '', refusal: null }));
  for (const text of pieces(turn.content ?? '', size)) out.push(chunk({ content: text }));

  const calls = turn.toolCalls ?? [];
  // Parallel calls interleave: every call's header first, then argument pieces round-robin by index.
  calls.forEach((c, i) => {
    const id = callId(c, index, i);
    out.push(chunk({ tool_calls: [{ index: i, ...(id === null ? {} : { id }), type: 'function', function: { name: c.name, arguments: '' } }] }));
  });
  const argPieces = calls.map((c) => pieces(c.arguments, size));
  const rounds = Math.max(0, ...argPieces.map((p) => p.length));
  for (let r = 0; r < rounds; r++) {
    argPieces.forEach((p, i) => {
      const piece = p[r];
      if (piece !== undefined) out.push(chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] }));
    });
  }
  out.push(chunk({}, finishReasonOf(turn)));
  if (usage) out.push({ ...base, choices: [], usage: chatUsage(usage) });
  return out;
}

type OutputItem = Record<string, unknown>;

function responseUsage(u: WireUsage | null): unknown {
  if (!u) return null;
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens,
  };
}

function outputItems(turn: FakeTurn, index: number, status: 'in_progress' | 'completed'): OutputItem[] {
  const items: OutputItem[] = [];
  if (turn.content !== undefined) {
    const done = status === 'completed';
    items.push({
      id: `msg_fake${index}`,
      type: 'message',
      status,
      role: 'assistant',
      content: done ? [{ type: 'output_text', text: turn.content, annotations: [], logprobs: [] }] : [],
    });
  }
  (turn.toolCalls ?? []).forEach((c, i) => {
    items.push({
      id: `fc_fake${index}_${i}`,
      type: 'function_call',
      status,
      call_id: callId(c, index, i) ?? `call_fake${index}_${i}`,
      name: c.name,
      arguments: status === 'completed' ? c.arguments : '',
    });
  });
  return items;
}

function responseObject(turn: FakeTurn, index: number, model: string, usage: WireUsage | null, phase: 'created' | 'done'): Record<string, unknown> {
  const reason = finishReasonOf(turn);
  const incomplete = phase === 'done' && (reason === 'length' || reason === 'content_filter');
  return {
    id: `resp_fake${index}`,
    object: 'response',
    created_at: CREATED,
    status: phase === 'created' ? 'in_progress' : incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: reason === 'length' ? 'max_output_tokens' : 'content_filter' } : null,
    instructions: null,
    max_output_tokens: null,
    model,
    output: phase === 'created' ? [] : outputItems(turn, index, 'completed'),
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: phase === 'created' ? null : responseUsage(usage),
    metadata: {},
  };
}

/** The events of a streamed Responses API call, as OpenAI sends them. */
function responseEvents(turn: FakeTurn, index: number, model: string, usage: WireUsage | null): Array<Record<string, unknown>> {
  const size = Math.max(1, turn.chunkChars ?? 8);
  const events: Array<Record<string, unknown>> = [];
  const emit = (type: string, fields: Record<string, unknown>): void => {
    events.push({ type, sequence_number: events.length, ...fields });
  };
  const created = responseObject(turn, index, model, usage, 'created');
  emit('response.created', { response: created });
  emit('response.in_progress', { response: created });
  const started = outputItems(turn, index, 'in_progress');
  const finished = outputItems(turn, index, 'completed');
  started.forEach((item, outputIndex) => {
    const itemId = item['id'] as string;
    emit('response.output_item.added', { output_index: outputIndex, item });
    if (item['type'] === 'message') {
      const text = turn.content ?? '';
      const emptyPart = { type: 'output_text', text: '', annotations: [], logprobs: [] };
      emit('response.content_part.added', { item_id: itemId, output_index: outputIndex, content_index: 0, part: emptyPart });
      for (const delta of pieces(text, size)) {
        emit('response.output_text.delta', { item_id: itemId, output_index: outputIndex, content_index: 0, delta, logprobs: [] });
      }
      emit('response.output_text.done', { item_id: itemId, output_index: outputIndex, content_index: 0, text, logprobs: [] });
      emit('response.content_part.done', { item_id: itemId, output_index: outputIndex, content_index: 0, part: { ...emptyPart, text } });
    } else {
      const args = (finished[outputIndex]?.['arguments'] as string | undefined) ?? '';
      for (const delta of pieces(args, size)) {
        emit('response.function_call_arguments.delta', { item_id: itemId, output_index: outputIndex, delta });
      }
      emit('response.function_call_arguments.done', { item_id: itemId, output_index: outputIndex, name: item['name'], arguments: args });
    }
    emit('response.output_item.done', { output_index: outputIndex, item: finished[outputIndex] });
  });
  const done = responseObject(turn, index, model, usage, 'done');
  emit(done['status'] === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: done });
  return events;
}
