import type { ActorEvent } from '../../src/protocol/events.js';
import { EVENT_TYPES } from './event-types.js';
import type { StreamEvent } from './stream-event.js';

// The page's one door to the gateway (design §11): the `/v1` HTTP reads, the tree's event stream
// (SSE, resumed from the last stream sequence by the browser's EventSource with Last-Event-ID)
// and the JSON-RPC WebSocket every command goes through. A bearer token given as `?token=` in
// the page's URL goes with each: a header on fetches, a query parameter where a browser can set
// no header (EventSource, WebSocket).

/** The token the page was opened with (`?token=`), or null. */
export function pageToken(): string | null {
  return new URLSearchParams(location.search).get('token');
}

function withToken(path: string): string {
  const token = pageToken();
  if (token === null) return path;
  return `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;
}

/** GET a `/v1` JSON resource. */
export async function getJson<T>(path: string): Promise<T> {
  const token = pageToken();
  const res = await fetch(path, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
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

export type { StreamEvent } from './stream-event.js';

/**
 * Follows a tree's events from the start: `onEvent` for each, in stream order. The browser's
 * EventSource reconnects by itself and sends Last-Event-ID, so a dropped connection resumes with
 * no gap; an event already seen is skipped, so none arrives twice.
 */
export function followEvents(rootId: string, onEvent: (e: StreamEvent) => void, onState: (open: boolean) => void): () => void {
  // one commit may hold several events: an event is known by its actor and seq, not its stream sequence
  const seen = new Set<string>();
  const source = new EventSource(withToken(`/v1/actors/${encodeURIComponent(rootId)}/events?after=0&tree=1`));
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

/** A JSON-RPC 2.0 client over the gateway's WebSocket: one request at a time or many, answers by ID. */
export class Rpc {
  private ws: WebSocket | null = null;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private opening: Promise<WebSocket> | null = null;

  private open(): Promise<WebSocket> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) return Promise.resolve(this.ws);
    if (this.opening) return this.opening;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${withToken('/v1/rpc')}`;
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
      };
      ws.onmessage = (m) => {
        const msg = JSON.parse(String(m.data)) as { id?: number; result?: unknown; error?: { message: string } };
        const w = msg.id === undefined ? undefined : this.waiting.get(msg.id);
        if (!w) return;
        this.waiting.delete(msg.id!);
        if (msg.error) w.reject(new Error(msg.error.message));
        else w.resolve(msg.result);
      };
    });
    return this.opening;
  }

  /** Calls `method` with `params`; resolves with its result, rejects with its error's message. */
  async call(method: string, params: Record<string, unknown>): Promise<unknown> {
    const ws = await this.open();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }
}
