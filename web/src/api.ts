import type { ActorEvent } from '../../src/protocol/events.js';
import type { RpcMethod, RpcParams, RpcResult } from '../../src/protocol/gateway.js';
import type { JobMethods } from './job-api.js';
import { EVENT_TYPES } from './event-types.js';
import type { StreamEvent } from './stream-event.js';
import type { ApprovalItem, PendingItem, QuestionItem } from './pending-item.js';
import type { ActorFacts } from './summary.js';

// The page's one door to the gateway (design §11): the `/v1` HTTP reads, the tree's event stream
// (SSE, resumed from the last stream sequence by the browser's EventSource with Last-Event-ID)
// and the JSON-RPC WebSocket every command goes through. The gateway's token is in an HttpOnly
// cookie (set when the page was opened once with `?token=`), which each of them carries by
// itself: no URL of the page holds the token, and no script of it can read it.

/** What the page says when the gateway refuses it for want of its token. */
export const NEEDS_TOKEN = 'this gateway needs its token: open the page at the URL `actorloop serve` printed (…/?token=…)';

/** GET a `/v1` JSON resource. */
export async function getJson<T>(path: string): Promise<T> {
  const res = await fetch(path);
  if (res.status === 401) throw new Error(NEEDS_TOKEN);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

/** One actor of `GET /v1/actors`. */
export interface ActorRow {
  id: string;
  parentId: string | null;
  rootId: string;
  name: string;
  kind: string;
  status: string;
  /** While waiting: on what (some gateways name it apart from the status). */
  waitingFor?: { kind: 'approval' | 'question' } | null;
  step: number | null;
  tool: string | null;
  tokens: number;
  costUsd: number | null;
  depth: number;
  /** The stream position of the tree's last commit the gateway folded for it (absent: a gateway that does not say). */
  streamSeq?: number;
}

/** `GET /v1/actors`: the actors, and whether the gateway lets clients kill hosts (`--allow-faults`). */
export interface ActorsResponse {
  actors: ActorRow[];
  faultsAllowed?: boolean;
  allowFaults?: boolean;
}

/** One run of `GET /v1/runs` (a root agent, its tree summed). */
export interface RunRow {
  id: string;
  name: string;
  task: string | null;
  status: string;
  /** Why it ended, other than completed (a reason code or words). */
  reason: string | null;
  waitingOn: Array<{ actorId: string; name: string; kind: 'approval' | 'question'; id: string }>;
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
  tokens: number;
  costUsd: number | null;
  children: number;
  workspace: string;
}

/** `GET /v1/runs`: a page of runs, the cursor of the next, how many match. */
export interface RunsPage {
  runs: RunRow[];
  next: string | null;
  total: number;
}

/** One item of `GET /v1/pending`, as the gateway sends it (times as ISO strings). */
export type GatewayPendingItem =
  | { kind: 'approval'; actorId: string; actorName: string; rootId: string; approval: Omit<ApprovalItem, 'expiresAt'> & { expiresAt: string } }
  | { kind: 'question'; actorId: string; actorName: string; rootId: string; question: Omit<QuestionItem, 'expiresAt'> & { expiresAt: string } };

/** What needs a person anywhere the gateway sees (`GET /v1/pending`), as the page shows it. */
export async function pendingEverywhere(): Promise<PendingItem[]> {
  const r = await getJson<{ items: GatewayPendingItem[] }>('/v1/pending');
  return r.items.map((i): PendingItem => i.kind === 'approval'
    ? { ...i, approval: { ...i.approval, expiresAt: Date.parse(i.approval.expiresAt) } }
    : { ...i, question: { ...i.question, expiresAt: Date.parse(i.question.expiresAt) } });
}

/** What `GET /v1/actors/:id` adds to the log's fold for the summary. */
export async function actorFacts(actorId: string): Promise<ActorFacts> {
  const r = await getJson<{ workspace?: string; holder?: ActorFacts['holder']; startedAt?: string }>(`/v1/actors/${encodeURIComponent(actorId)}`);
  return {
    ...(r.workspace !== undefined ? { workspace: r.workspace } : {}),
    ...(r.holder !== undefined ? { holder: r.holder } : {}),
    ...(r.startedAt !== undefined ? { startedAt: r.startedAt } : {}),
  };
}

export type { StreamEvent } from './stream-event.js';

/**
 * Follows a tree's events from the start: `onEvent` for each, in stream order. The browser's
 * EventSource reconnects by itself and sends Last-Event-ID, so a dropped connection resumes with
 * no gap; an event already seen is skipped, so none arrives twice.
 */
export function followEvents(rootId: string, onEvent: (e: StreamEvent) => void, onState: (open: boolean) => void): () => void {
  // one commit may hold several events: an event is known by its actor and seq, not its stream sequence
  const seen = new Set<string>();
  const source = new EventSource(`/v1/actors/${encodeURIComponent(rootId)}/events?after=0&tree=1`);
  const take = (m: MessageEvent<string>): void => {
    const streamSeq = Number(m.lastEventId) || 0;
    let event: ActorEvent;
    try {
      event = JSON.parse(m.data) as ActorEvent;
    } catch {
      return;
    }
    if (typeof event !== 'object' || event === null || typeof event.type !== 'string') return;
    const key = `${event.actor}:${event.seq}`;
    if (seen.has(key)) return;
    seen.add(key);
    onEvent({ streamSeq, event });
  };
  source.onmessage = take;
  // a named SSE message (`event: tool/call`) reaches only a listener of its name
  for (const type of EVENT_TYPES) source.addEventListener(type, take);
  source.onopen = () => onState(true);
  source.onerror = () => onState(false);
  return () => source.close();
}

/** A method of the gateway: the protocol's, or one of its job methods. */
export type Method = RpcMethod | keyof JobMethods;
/** A method's params. */
export type ParamsOf<M extends Method> = M extends RpcMethod ? RpcParams<M> : M extends keyof JobMethods ? JobMethods[M]['params'] : never;
/** A method's result. */
export type ResultOf<M extends Method> = M extends RpcMethod ? RpcResult<M> : M extends keyof JobMethods ? JobMethods[M]['result'] : never;

/** A JSON-RPC 2.0 client over the gateway's WebSocket: one request at a time or many, answers by ID. */
export class Rpc {
  private ws: WebSocket | null = null;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private opening: Promise<WebSocket> | null = null;
  private readonly notified = new Set<(method: string, params: Record<string, unknown>) => void>();
  private readonly closed = new Set<() => void>();

  private open(): Promise<WebSocket> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) return Promise.resolve(this.ws);
    if (this.opening) return this.opening;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/rpc`;
    this.opening = new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.onopen = () => {
        this.ws = ws;
        this.opening = null;
        resolve(ws);
      };
      ws.onerror = () => {
        this.opening = null;
        reject(new Error('the gateway refused the WebSocket'));
      };
      ws.onclose = () => {
        this.ws = null;
        for (const w of this.waiting.values()) w.reject(new Error('the connection closed'));
        this.waiting.clear();
        for (const fn of this.closed) fn();
      };
      ws.onmessage = (m) => {
        const msg = JSON.parse(String(m.data)) as { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown; error?: { message: string } };
        if (msg.id === undefined && typeof msg.method === 'string') {
          for (const fn of this.notified) fn(msg.method, msg.params ?? {});
          return;
        }
        const w = msg.id === undefined ? undefined : this.waiting.get(msg.id);
        if (!w) return;
        this.waiting.delete(msg.id!);
        if (msg.error) w.reject(new Error(msg.error.message));
        else w.resolve(msg.result);
      };
    });
    return this.opening;
  }

  /** Calls `fn` with every notification (a subscription's); returns the unlistening. */
  onNotification(fn: (method: string, params: Record<string, unknown>) => void): () => void {
    this.notified.add(fn);
    return () => void this.notified.delete(fn);
  }

  /** Calls `fn` when the WebSocket closes (the subscriptions opened on it end with it); returns the unlistening. */
  onClose(fn: () => void): () => void {
    this.closed.add(fn);
    return () => void this.closed.delete(fn);
  }

  /**
   * Calls `method` with `params`, both typed by the gateway protocol the server validates them
   * with; resolves with its result, rejects with its error's message.
   */
  async call<M extends Method>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>> {
    const ws = await this.open();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve: (v) => resolve(v as ResultOf<M>), reject });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }
}

/** What `machines.subscribe` tells of an actor: the log's state once (`state`), then each live report of a host (`transition`). */
export interface MachinesReport {
  kind: 'state' | 'transition';
  /** The event taken; null: a state, not a move (the log's, or a host's when the watch began). */
  eventType: string | null;
  /** Machine key (`agent`, `turn`, `step`, `attempt`, `tool-call:<callId>`) → its active state path. */
  active: Record<string, string>;
}

/**
 * Follows one actor's machines through `machines.subscribe` until the returned function is called:
 * `onReport` for each notification. A closed connection ends the subscription on the gateway's
 * side: it is opened again a second later.
 */
export function followMachines(rpc: Rpc, agentId: string, onReport: (r: MachinesReport) => void): () => void {
  let stopped = false;
  let subscription: string | null = null;
  // a notification may overtake the answer that names its subscription: held until then
  let early: Array<[string, Record<string, unknown>]> = [];
  let retry: ReturnType<typeof setTimeout> | null = null;
  const take = (method: string, p: Record<string, unknown>): void => {
    if (method !== 'machines.state' && method !== 'machines.transition') return;
    if (p.actor !== agentId || typeof p.active !== 'object' || p.active === null) return;
    onReport({ kind: method === 'machines.state' ? 'state' : 'transition', eventType: typeof p.eventType === 'string' ? p.eventType : null, active: p.active as Record<string, string> });
  };
  const offNotified = rpc.onNotification((method, p) => {
    if (subscription === null) early.push([method, p]);
    else if (p.subscription === subscription) take(method, p);
  });
  const open = (): void => {
    retry = null;
    early = [];
    rpc.call('machines.subscribe', { agentIds: [agentId] }).then((r) => {
      const id = (r as { subscription: string }).subscription;
      if (stopped) return void rpc.call('machines.unsubscribe', { subscription: id }).catch(() => {});
      subscription = id;
      for (const [m, p] of early) if (p.subscription === id) take(m, p);
      early = [];
    }, () => {
      if (!stopped) retry ??= setTimeout(open, 1_000);
    });
  };
  const offClosed = rpc.onClose(() => {
    subscription = null;
    if (!stopped) retry ??= setTimeout(open, 1_000);
  });
  open();
  return () => {
    stopped = true;
    offNotified();
    offClosed();
    if (retry) clearTimeout(retry);
    if (subscription !== null) rpc.call('machines.unsubscribe', { subscription }).catch(() => {});
    subscription = null;
  };
}
