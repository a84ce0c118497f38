import WebSocket from 'ws';
import { ActorloopError, ConfigError, NotFoundError } from '../protocol/errors.js';
import {
  EventsNotificationSchema,
  RPC_ERRORS,
  RpcErrorSchema,
  RpcResultSchemas,
  StreamedEventSchema,
  type RpcMethod,
  type RpcParams,
  type RpcResult,
} from '../protocol/gateway.js';
import { z } from 'zod';

// A client of the gateway (`actorloop serve`, docs/gateway.md): JSON-RPC 2.0 over one WebSocket
// for commands and subscriptions. What a CLI command needs to drive a
// runtime it has no NATS or LMDB of: every answer is checked against the protocol's schemas.

/** One committed event as the gateway streams it. */
export type StreamedEvent = z.infer<typeof StreamedEventSchema>;

/** Where the gateway is and how to log in. */
export interface GatewayTarget {
  /** Its base URL, e.g. `http://127.0.0.1:7420`. */
  url: string;
  /** The bearer token; null: none found (a gateway started with `--no-auth` takes none). */
  token: string | null;
  /** Where the token was read from, or (none found) looked for: a refusal names it. */
  tokenFile?: string;
}

const UNREACHABLE_HINT = 'start it with `actorloop serve` (same --data-dir and --nats as the host), or pass the URL it prints to --gateway';

/** The gateway's base URL checked: http(s), no path beyond `/`; a mistake is a usage error. */
export function gatewayBase(url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError('gateway.url', `--gateway ${url} is not a URL`, { hint: 'pass --gateway http://127.0.0.1:7420 (what `actorloop serve` prints)' });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ConfigError('gateway.url', `--gateway ${url} is not an http(s) URL`, { hint: 'pass --gateway http://127.0.0.1:7420 (what `actorloop serve` prints)' });
  }
  return u;
}

function unreachable(url: string, why: string): ConfigError {
  return new ConfigError('gateway.unreachable', `cannot reach the gateway at ${url}: ${why}`, { hint: UNREACHABLE_HINT });
}

const TOKEN_HINT = "run this command as the user who started `actorloop serve`, with its --data-dir (the CLI reads gateway/token there), or pass --gateway-token-file <that file, or the one given to serve --token-file>";

function refusedLogin(target: GatewayTarget, status: number): ActorloopError {
  const { url } = target;
  if (status === 401) {
    if (target.token === null) {
      const where = target.tokenFile !== undefined ? `: no token this user can read at ${target.tokenFile}` : '';
      return new ConfigError('gateway.unauthorized', `the gateway at ${url} needs its token (401)${where}`, { hint: TOKEN_HINT });
    }
    const from = target.tokenFile !== undefined ? ` from ${target.tokenFile}` : '';
    return new ConfigError('gateway.unauthorized', `the gateway at ${url} refused the token${from} (401): it is not this gateway's`, { hint: TOKEN_HINT });
  }
  return new ConfigError('gateway.refused', `the gateway at ${url} refused the connection (${status})`, {
    hint: status === 403 ? 'a gateway started with --no-auth answers loopback names only: use http://127.0.0.1:<port>' : UNREACHABLE_HINT,
  });
}

/** The error a JSON-RPC error object stands for: an unknown actor is not found (exit 3), a refusal a usage error (exit 2). */
function errorOf(method: string, raw: unknown): ActorloopError {
  const parsed = RpcErrorSchema.safeParse(raw);
  if (!parsed.success) return new ActorloopError('gateway.bad_answer', `the gateway answered ${method} with an error that is not JSON-RPC`);
  const { code, message, data } = parsed.data;
  const appCode = typeof (data as { code?: unknown } | undefined)?.code === 'string' ? (data as { code: string }).code : null;
  // the message is the gateway's userMessage(): its hint is in it already
  if (code === RPC_ERRORS.notFound || (appCode !== null && appCode.endsWith('not_found'))) return new NotFoundError(appCode ?? 'gateway.not_found', message);
  if (code === RPC_ERRORS.application || code === RPC_ERRORS.invalidParams || code === RPC_ERRORS.faultsDisabled) {
    return new ConfigError(appCode ?? 'gateway.refused', message);
  }
  return new ActorloopError('gateway.rpc_failed', `the gateway failed ${method}: ${message} (${code})`);
}

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/**
 * A JSON-RPC connection to the gateway's `/v1/rpc`. A request is answered by its id; an
 * `events.event` notification goes to its subscription's handler. A connection that closes fails
 * every request under way and ends every subscription with an error.
 */
export class GatewayClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly subscriptions = new Map<string, { onEvent: (e: StreamedEvent) => void; onError: (e: Error) => void }>();
  /** Notifications of a subscription whose answer has not come yet. */
  private readonly early = new Map<string, StreamedEvent[]>();
  private closed: Error | null = null;

  private constructor(private readonly ws: WebSocket, url: string) {
    ws.on('message', (data) => this.onFrame(data.toString()));
    ws.on('close', () => this.fail(new ActorloopError('gateway.closed', `the gateway at ${url} closed the connection`, { retryable: true })));
    ws.on('error', (err) => this.fail(unreachable(url, err.message)));
  }

  /** Opens the WebSocket (the bearer token in its upgrade); unreachable or refused: one line, exit 2. */
  static async connect(target: GatewayTarget): Promise<GatewayClient> {
    const base = gatewayBase(target.url);
    const rpc = new URL('/v1/rpc', base);
    rpc.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(rpc, { headers: target.token ? { authorization: `Bearer ${target.token}` } : {} });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => {
        reject(refusedLogin(target, res.statusCode ?? 0));
        res.resume();
        ws.terminate();
      });
      ws.once('error', (err) => reject(unreachable(target.url, (err as NodeJS.ErrnoException).code ?? err.message)));
    });
    return new GatewayClient(ws, target.url);
  }

  /** Calls a method; its result is checked against the protocol's schema. */
  async call<M extends RpcMethod>(method: M, params: RpcParams<M>): Promise<RpcResult<M>> {
    if (this.closed) throw this.closed;
    const id = this.nextId++;
    const raw = await new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { method, resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
    const parsed = (RpcResultSchemas[method] as z.ZodType).safeParse(raw);
    if (!parsed.success) throw new ActorloopError('gateway.bad_answer', `the gateway's answer to ${method} does not fit protocol v1`);
    return parsed.data as RpcResult<M>;
  }

  /**
   * Subscribes to an agent's events (its tree's with `tree`) after a stream sequence: each
   * committed event goes to `onEvent` in commit order; a subscription the gateway ends, or a
   * connection that closes, goes to `onError`.
   */
  async subscribeEvents(
    params: RpcParams<'events.subscribe'>,
    onEvent: (e: StreamedEvent) => void,
    onError: (e: Error) => void,
  ): Promise<string> {
    const { subscription } = await this.call('events.subscribe', params);
    this.subscriptions.set(subscription, { onEvent, onError });
    // its first notifications may have come before the answer that names it
    for (const e of this.early.get(subscription) ?? []) onEvent(e);
    this.early.delete(subscription);
    return subscription;
  }

  /** Ends a subscription: its events stop here at once, and the gateway is asked to stop sending them (best effort). */
  unsubscribe(subscription: string): void {
    if (!this.subscriptions.delete(subscription) || this.closed) return;
    this.call('events.unsubscribe', { subscription }).catch(() => {});
  }

  /** Closes the connection (its subscriptions end with it on the gateway). */
  close(): void {
    this.closed ??= new ActorloopError('gateway.closed', 'the gateway connection is closed');
    this.subscriptions.clear();
    this.ws.close();
  }

  private onFrame(text: string): void {
    let msg: { id?: unknown; result?: unknown; error?: unknown; method?: unknown; params?: unknown };
    try {
      msg = JSON.parse(text) as typeof msg;
    } catch {
      return;
    }
    if (typeof msg.id === 'number' && this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id)!;
      this.pending.delete(msg.id);
      if (msg.error !== undefined) p.reject(errorOf(p.method, msg.error));
      else p.resolve(msg.result);
      return;
    }
    if (msg.method === 'events.event') {
      const n = EventsNotificationSchema.safeParse(msg.params);
      if (!n.success) return;
      const e = { streamSeq: n.data.streamSeq, actor: n.data.actor, event: n.data.event };
      const sub = this.subscriptions.get(n.data.subscription);
      if (sub) sub.onEvent(e);
      else if (!this.closed) this.early.set(n.data.subscription, [...(this.early.get(n.data.subscription) ?? []), e]);
    } else if (msg.method === 'subscription.error') {
      const params = msg.params as { subscription?: string; error?: unknown } | undefined;
      const sub = params?.subscription ? this.subscriptions.get(params.subscription) : undefined;
      sub?.onError(errorOf('events.subscribe', params?.error));
    }
  }

  private fail(err: Error): void {
    if (this.closed) return;
    this.closed = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    for (const s of this.subscriptions.values()) s.onError(err);
    this.subscriptions.clear();
  }
}
