import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, Server } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { extname, join, normalize, sep } from 'node:path';
import { createAdaptorServer } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { cors } from 'hono/cors';
import { streamSSE } from 'hono/streaming';
import { WebSocketServer } from 'ws';
import { z } from 'zod';
import { ActorloopError, ConfigError, NotFoundError } from '../protocol/errors.js';
import { ActorsQuerySchema, EventsQuerySchema, gatewaySchemas, GATEWAY_PROTOCOL_VERSION, PendingQuerySchema, RunsQuerySchema } from '../protocol/gateway.js';
import { parseId } from '../protocol/ids.js';
import { hostAllowed, isLoopback, originAllowed, tokenCookie, tokenCookieHeader, tokenMatches, tokenOf } from './access.js';
import { entryOf, inspectActor, listActors, type ActorReadPorts } from './actor-reads.js';
import { eventCommits } from './event-stream.js';
import { jobSchemas, JobsQuerySchema } from '../protocol/gateway-jobs.js';
import { inspectJob, listJobs } from './job-reads.js';
import { listPending, listRuns } from './run-reads.js';
import type { GatewayOptions } from './gateway-ports.js';
import { serveRpc } from './rpc.js';
import { TreeFolds } from './tree-folds.js';

export type { GatewayCommands, GatewayOptions } from './gateway-ports.js';

/** A running gateway. */
export interface Gateway {
  /** `http://host:port` as a client reaches it. */
  url: string;
  port: number;
  /** Ends every stream and socket and stops listening. */
  close(): Promise<void>;
}

const DEFAULT_HEARTBEAT_MS = 15_000;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json', '.svg': 'image/svg+xml', '.png': 'image/png', '.map': 'application/json',
};

/** The HTTP status of an error a route threw. */
function statusOf(err: unknown): 400 | 404 | 500 {
  if (err instanceof NotFoundError) return 404;
  if (err instanceof ConfigError) return 400;
  return 500;
}

/** Whether a path is the protocol's (everything there needs the token). */
function isApiPath(path: string): boolean {
  return path === `/${GATEWAY_PROTOCOL_VERSION}` || path.startsWith(`/${GATEWAY_PROTOCOL_VERSION}/`);
}

/** The answer to a request without the gateway's token. */
function unauthorized(c: Context): Response {
  c.header('WWW-Authenticate', 'Bearer realm="actorloop"');
  return c.json({
    error: {
      code: 'gateway.unauthorized',
      message: "this gateway needs its token: open the page at the URL `actorloop serve` printed (…/?token=…), or send Authorization: Bearer <the token in gateway/token of serve's data dir>",
    },
  }, 401);
}

/**
 * The Hono app of the gateway: access checks, the `/v1` reads and event stream, the page. `port`
 * is the port it listens on, known once it does (the token cookie is named for it).
 */
function buildApp(o: GatewayOptions, reads: ActorReadPorts, port: () => number): Hono {
  const app = new Hono();
  const cookieName = (): string => tokenCookie(port());
  const heartbeatMs = o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;

  app.onError((err, c) => {
    if (!(err instanceof ActorloopError)) o.logger.error({ err, path: c.req.path }, 'gateway request failed');
    const body = err instanceof ActorloopError ? { code: err.code, message: o.redact(err.userMessage()) } : { code: 'gateway.internal', message: 'internal error' };
    return c.json({ error: body }, statusOf(err));
  });

  // before the token check: a browser's preflight carries no credentials, and is answered here
  if (o.corsOrigins.length > 0) app.use('/v1/*', cors({ origin: [...o.corsOrigins], allowHeaders: ['Authorization', 'Content-Type', 'Last-Event-ID'] }));
  app.use('*', async (c, next) => {
    if (!hostAllowed(c.req.header('host') ?? null, o.token !== null)) {
      return c.json({ error: { code: 'gateway.host_refused', message: 'this gateway answers only loopback names (localhost, 127.0.0.1, [::1])' } }, 403);
    }
    if (o.token === null) return next();
    const url = new URL(c.req.url);
    const cookie = cookieName();
    if (!isApiPath(url.pathname) && (c.req.method === 'GET' || c.req.method === 'HEAD')) {
      // the page's files are the package's build and hold no data: served to anyone, so a page
      // opened from a link elsewhere (whose first request carries no SameSite=Strict cookie) still
      // loads and then reads /v1 with the cookie
      if (!url.searchParams.has('token')) return next();
      if (!tokenMatches(url.searchParams.get('token'), o.token)) return unauthorized(c);
      // opened once with ?token=: the cookie keeps it, and the address bar, history and the page's
      // own URLs lose it
      url.searchParams.delete('token');
      c.header('Set-Cookie', tokenCookieHeader(port(), o.token));
      c.header('Cache-Control', 'no-store');
      // one leading slash: `//host/` would send the browser to another host
      return c.redirect(`/${url.pathname.replace(/^\/+/, '')}${url.search}`, 303);
    }
    if (!tokenMatches(tokenOf(c.req.raw.headers, url, cookie), o.token)) return unauthorized(c);
    return next();
  });

  const v1 = `/${GATEWAY_PROTOCOL_VERSION}`;
  app.get(`${v1}/actors`, async (c) => {
    const q = parseQuery(ActorsQuerySchema, c);
    return c.json({ actors: await listActors(reads, q.root), faultsAllowed: o.allowFaults });
  });
  app.get(`${v1}/runs`, async (c) => c.json(await listRuns(reads, parseQuery(RunsQuerySchema, c))));
  app.get(`${v1}/pending`, async (c) => c.json(await listPending(reads, parseQuery(PendingQuerySchema, c).root)));
  // the ID is checked before it reaches the bus, where it becomes a key or a subject (400 when malformed)
  app.get(`${v1}/actors/:id`, async (c) => c.json(await inspectActor(reads, parseId('agent', c.req.param('id')))));
  app.get(`${v1}/jobs`, async (c) => c.json(await listJobs(reads, parseQuery(JobsQuerySchema, c).root)));
  app.get(`${v1}/jobs/:id`, async (c) => c.json(await inspectJob(reads, parseId('job', c.req.param('id')))));
  // a running job's output as its host publishes it, live and never stored: SSE `job/output` events
  // (after one `ready`: from then on every chunk heard is sent), until the client goes away
  app.get(`${v1}/jobs/:id/output`, async (c) => {
    const { job } = await inspectJob(reads, parseId('job', c.req.param('id')));
    const source = o.jobOutput;
    if (!source) {
      throw new NotFoundError('gateway.no_live_output', 'this gateway relays no live job output', {
        hint: 'the job\'s output tail is in GET /v1/jobs/<id> once it ends',
      });
    }
    return sse(c, async (write, signal) => {
      let chain = Promise.resolve();
      const send = (event: string, data: unknown): void => void (chain = chain.then(() => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)).catch(() => {}));
      const watch = source.watch({ rootId: job.rootId, jobId: job.jobId }, (text) => send('job/output', { type: 'job/output', text: o.redact(text) }));
      try {
        await watch.ready;
        send('ready', { jobId: job.jobId });
        await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
      } finally {
        watch.close();
      }
    });
  });
  app.get(`${v1}/machines`, (c) => c.json({ machines: o.machines }));
  app.get(`${v1}/schema`, (c) => {
    const defs = Object.fromEntries(Object.entries({ ...gatewaySchemas(), ...jobSchemas() }).map(([k, s]) => [k, z.toJSONSchema(s, { unrepresentable: 'any', io: 'input' })]));
    return c.json({ version: GATEWAY_PROTOCOL_VERSION, schemas: defs });
  });
  app.get(`${v1}/actors/:id/events`, async (c) => {
    const q = parseQuery(EventsQuerySchema, c);
    const lastId = c.req.header('last-event-id');
    if (lastId !== undefined && !/^\d+$/.test(lastId.trim())) throw new ConfigError('gateway.bad_cursor', `Last-Event-ID must be a stream sequence (a whole number), got "${lastId}"`);
    // the browser's own resume wins over the query the stream was first opened with
    const after = lastId !== undefined ? Number(lastId.trim()) : (q.after ?? 0);
    const entry = await entryOf(o.directory, parseId('agent', c.req.param('id')));
    const tree = q.tree === '1' || q.tree === 'true';
    return sse(c, async (write, signal) => {
      const commits = eventCommits({ reader: o.reader, rootId: entry.rootId, actorId: entry.actorId, tree, afterStreamSeq: after, redact: o.redact, signal });
      for await (const commit of commits) {
        // a commit's events in one write: a client that has one of them has them all
        await write(commit.map((e) => `id: ${e.streamSeq}\nevent: ${e.event.type}\ndata: ${JSON.stringify(e.event)}\n\n`).join(''));
      }
    });
  });

  /** An SSE response: heartbeats while idle, and a signal that aborts when the client goes away. */
  const sse = (c: Context, run: (write: (text: string) => Promise<void>, signal: AbortSignal) => Promise<void>): Response =>
    streamSSE(c, async (stream) => {
      const ac = new AbortController();
      stream.onAbort(() => ac.abort());
      c.req.raw.signal.addEventListener('abort', () => ac.abort(), { once: true });
      const beat = setInterval(() => void stream.write(': heartbeat\n\n').catch(() => ac.abort()), heartbeatMs);
      try {
        await stream.write('retry: 1000\n\n');
        await run(async (text) => void (await stream.write(text)), ac.signal);
      } finally {
        clearInterval(beat);
        ac.abort();
      }
    }, async (err) => {
      o.logger.warn({ err }, 'gateway event stream failed');
    });

  app.get('*', async (c) => {
    if (c.req.path.startsWith(`${v1}/`)) return c.json({ error: { code: 'gateway.not_found', message: `no route ${c.req.path}` } }, 404);
    return page(c, o.pageDir);
  });
  return app;
}

/** A route's query parsed by its schema; a bad one is a 400 naming each parameter and what it takes. */
function parseQuery<S extends z.ZodType>(schema: S, c: Context): z.infer<S> {
  const q = schema.safeParse(c.req.query());
  if (!q.success) throw new ConfigError('gateway.bad_query', `bad query: ${q.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return q.data;
}

/** A file of the built page (index.html for `/` and for any path that is not a file). */
async function page(c: Context, dir: string | undefined): Promise<Response> {
  if (!dir) {
    return c.html(`<!doctype html><title>actorloop</title><p>actorloop gateway: the page is not built here. The protocol is at <a href="/v1/actors">/v1/actors</a>, <a href="/v1/schema">/v1/schema</a>.</p>`);
  }
  const rel = normalize(decodedPath(c.req.path)).replace(/^([/\\])+/, '');
  const file = join(dir, rel);
  const inside = file === dir || file.startsWith(dir.endsWith(sep) ? dir : dir + sep);
  const target = inside && rel !== '' && (await stat(file).then((s) => s.isFile(), () => false)) ? file : join(dir, 'index.html');
  const body = await readFile(target);
  return c.body(body, 200, { 'Content-Type': TYPES[extname(target)] ?? 'application/octet-stream' });
}

/** A request path decoded; a malformed percent-escape (`%E0%A4%A`) is the client's mistake (400), not a failure. */
function decodedPath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    throw new ConfigError('gateway.bad_path', 'the path holds a malformed percent-escape', { hint: 'escape each byte as %XX of a valid UTF-8 text' });
  }
}

/** Refuses an upgrade with an HTTP status. */
function refuseUpgrade(socket: Duplex, status: number, text: string): void {
  socket.write(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  socket.destroy();
}

/** Refuses (ConfigError) to bind a non-loopback address without a token (`--no-auth` is for loopback alone). */
export function checkBind(host: string, token: string | null): void {
  if (!isLoopback(host) && token === null) {
    throw new ConfigError('gateway.token_required', `binding ${host} (not a loopback address) needs the token: --no-auth is for loopback only`, {
      hint: 'leave --no-auth out (every request then needs the token), or bind 127.0.0.1',
    });
  }
}

// a DNS name (RFC 1123 labels, dot-separated) or an IP address, bare or in brackets
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Refuses (ConfigError) an address or port nothing can listen on, before anything is opened. */
export function checkListenAddress(host: string, port: number): void {
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigError('gateway.bad_port', `port ${port} is not a TCP port`, { hint: 'pass --port with a whole number from 0 (any free one) to 65535' });
  }
  if (isIP(host.replace(/^\[(.*)\]$/, '$1')) === 0 && !HOST_NAME.test(host)) {
    throw new ConfigError('gateway.bad_host', `${JSON.stringify(host)} is not an address to listen on`, { hint: 'pass --host an IP address (127.0.0.1, ::1, 0.0.0.0) or a host name of this machine' });
  }
}

/**
 * Starts the gateway; `token` null answers anyone on loopback (`--no-auth`). A non-loopback
 * address without a token is refused (ConfigError): the gateway speaks for a person, and anyone
 * who can reach it could.
 */
export async function startGateway(o: GatewayOptions): Promise<Gateway> {
  checkListenAddress(o.host, o.port);
  checkBind(o.host, o.token);
  // one set of tree folds for every request and connection: each tree is folded once, then moved on
  const reads: ActorReadPorts = { folds: new TreeFolds(o.reader), directory: o.directory, redact: o.redact, ...(o.liveness ? { liveness: { deaths: new Map<string, number>(), ...o.liveness } } : {}) };
  // the port is known once it listens (0: any free one): the token cookie is named for it
  let listening: AddressInfo | null = null;
  const listeningPort = (): number => listening?.port ?? o.port;
  const app = buildApp(o, reads, listeningPort);
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 * 1024 });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const host = req.headers.host ?? null;
    if (url.pathname !== `/${GATEWAY_PROTOCOL_VERSION}/rpc`) return refuseUpgrade(socket, 404, 'Not Found');
    if (!hostAllowed(host, o.token !== null)) return refuseUpgrade(socket, 403, 'Forbidden');
    if (o.token !== null && !tokenMatches(tokenOf(req.headers, url, tokenCookie(listeningPort())), o.token)) return refuseUpgrade(socket, 401, 'Unauthorized');
    if (!originAllowed(req.headers.origin ?? null, host, o.corsOrigins)) return refuseUpgrade(socket, 403, 'Forbidden');
    wss.handleUpgrade(req, socket, head, (ws) => serveRpc(ws, o, reads));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      // a name that resolves to no address of this machine is the person's to fix, as a taken port is
      reject(['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN'].includes(err.code ?? '')
        ? new ConfigError('gateway.listen_failed', `cannot listen on ${o.host}:${o.port}: ${err.code}`, { hint: 'pick another --port (or --host)', cause: err })
        : err);
    });
    server.listen(o.port, o.host, () => {
      server.removeAllListeners('error');
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  listening = addr;
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}`,
    port: addr.port,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // SSE streams never end on their own: their sockets are closed, which aborts their readers
      server.closeAllConnections();
      await closed;
    },
  };
}
