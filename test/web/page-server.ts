import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { z } from 'zod';
import { machineDefinitions } from '../../src/client/machine-definitions.js';
import { gatewaySchemas } from '../../src/protocol/gateway.js';
import { tokenCookie, tokenCookieHeader, tokenMatches, tokenOf } from '../../src/server/access.js';
import { readTreeView } from '../../src/client/tree.js';
import type { LogReader } from '../../src/store/log-port.js';
import { emptyProjection, foldEvent, pendingApprovals, pendingQuestions } from '../../src/store/projection.js';

// A stand-in for the gateway, for the page's browser tests while the gateway is built apart: it
// takes the token by the gateway's own rules (src/server/access.ts), serves dist/web and answers the `/v1` reads the page makes from a real run's logs (the tree
// view, the machines, the tree's events as SSE, live), and takes JSON-RPC over a real WebSocket,
// recording each request and handing it to the test.

/** One JSON-RPC request the page sent. */
export interface RpcRequest {
  id: number;
  method: string;
  params: Record<string, unknown>;
}

/** What the stand-in needs of a run. */
export interface PageServerOptions {
  reader: Pick<LogReader, 'read' | 'readTree' | 'followTree'>;
  rootId: string;
  /** The page's directory (dist/web). */
  webDir: string;
  /** Required as the gateway requires it when set (its own access rules: the bearer header, `?token=`, or the cookie opening `/?token=` sets). */
  token?: string;
  /** Answers a request (its result); the default answers `{accepted: true}`. */
  onRpc?: (r: RpcRequest) => Promise<unknown>;
}

/** A running stand-in. */
export interface PageServer {
  url: string;
  /** Every JSON-RPC request received, in order. */
  rpc: RpcRequest[];
  /** Requests refused for a missing or wrong token. */
  refused: string[];
  /** The Last-Event-ID of each event stream opened, null for a first connection. */
  resumedFrom: Array<string | null>;
  /** Ends every open event stream, as a dropped connection would. */
  dropStreams(): void;
  /** What `GET /v1/actors` says of `--allow-faults` (false until set). */
  faultsAllowed: boolean;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css' };

/** Starts the stand-in on a free loopback port. */
export async function startPageServer(o: PageServerOptions): Promise<PageServer> {
  const rpc: RpcRequest[] = [];
  const refused: string[] = [];
  const resumedFrom: Array<string | null> = [];
  const streams = new Set<AbortController>();
  const portNow = (): number => (server.address() as AddressInfo).port;
  const authorized = (req: IncomingMessage, url: URL): boolean => {
    if (o.token === undefined) return true;
    const ok = tokenMatches(tokenOf(req.headers, url, tokenCookie(portNow())), o.token);
    if (!ok) refused.push(url.pathname);
    return ok;
  };
  const json = (res: ServerResponse, body: unknown, status = 200): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((e: Error) => {
      if (!res.headersSent) json(res, { error: e.message }, 500);
      else res.end();
    });
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (!url.pathname.startsWith('/v1/')) {
      // the page opened once with ?token=: the cookie keeps it, and the browser goes on without it
      if (o.token !== undefined && url.searchParams.has('token')) {
        if (!authorized(req, url)) return json(res, { error: 'unauthorized' }, 401);
        url.searchParams.delete('token');
        res.writeHead(303, { location: `${url.pathname}${url.search}`, 'set-cookie': tokenCookieHeader(portNow(), o.token) });
        res.end();
        return;
      }
      const file = url.pathname === '/' ? 'index.html' : normalize(url.pathname).replace(/^[/\\]+/, '');
      const body = await readFile(join(o.webDir, file)).catch(() => null);
      if (body === null) return json(res, { error: 'not found' }, 404);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
      return;
    }
    if (!authorized(req, url)) return json(res, { error: 'unauthorized' }, 401);
    if (url.pathname === '/v1/machines') return json(res, machineDefinitions());
    // the gateway's own schemas, as it serves them (the page reads fault.kill's points there)
    if (url.pathname === '/v1/schema') {
      return json(res, { version: 'v1', schemas: Object.fromEntries(Object.entries(gatewaySchemas()).map(([k, s]) => [k, z.toJSONSchema(s, { unrepresentable: 'any', io: 'input' })])) });
    }
    if (url.pathname === '/v1/actors') {
      const view = await readTreeView({ reader: o.reader, rootId: o.rootId });
      return json(res, {
        actors: view.agents.map((a) => ({
          id: a.actorId, parentId: a.parentId, rootId: o.rootId, name: a.name, kind: 'agent', status: a.status,
          waitingFor: a.waitingFor, step: a.step, tool: a.tool, tokens: a.tokens, costUsd: a.costUsd, depth: a.depth,
        })),
        faultsAllowed: running.faultsAllowed,
      });
    }
    const events = /^\/v1\/actors\/([^/]+)\/events$/.exec(url.pathname);
    if (events) return sse(req, res, url);
    const one = /^\/v1\/actors\/([^/]+)$/.exec(url.pathname);
    if (one) {
      const p = emptyProjection(one[1]!);
      for await (const { event } of o.reader.read(o.rootId, one[1]!)) foldEvent(p, event);
      return json(res, { actorId: p.actorId, seq: p.seq, openTurn: p.openTurn, pendingApprovals: pendingApprovals(p), questions: pendingQuestions(p), usage: p.usage });
    }
    json(res, { error: 'not found' }, 404);
  }
  // the tree's events, numbered by their place in the tree's stream: `id:` is that number, and a
  // reconnect's Last-Event-ID skips what was sent
  async function sse(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const lastId = req.headers['last-event-id'];
    resumedFrom.push(typeof lastId === 'string' ? lastId : null);
    const after = Number(lastId ?? url.searchParams.get('after') ?? 0);
    const stop = new AbortController();
    streams.add(stop);
    req.on('close', () => stop.abort());
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    // reconnect soon after a drop: the test waits for it
    res.write('retry: 100\n: open\n\n');
    let n = 0;
    try {
      for await (const { event } of o.reader.followTree(o.rootId, { afterStreamSeq: 0, signal: stop.signal })) {
        n += 1;
        if (n <= after) continue;
        res.write(`id: ${n}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
      }
    } catch (e) {
      if (!stop.signal.aborted) throw e;
    } finally {
      streams.delete(stop);
      res.end();
    }
  }
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== '/v1/rpc' || !authorized(req, url)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data) => {
        const msg = JSON.parse(String(data)) as RpcRequest;
        rpc.push(msg);
        const answer = o.onRpc ? o.onRpc(msg) : Promise.resolve({ accepted: true });
        answer.then(
          (result) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result })),
          (e: Error) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: e.message } })),
        );
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const running: PageServer = {
    url: `http://127.0.0.1:${port}`,
    faultsAllowed: false,
    rpc,
    refused,
    resumedFrom,
    dropStreams() {
      for (const s of streams) s.abort();
    },
    async close() {
      for (const s of streams) s.abort();
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return running;
}
