// What the gateway's tests share: a real nats-server, real `actorloop host` processes (from
// dist/: `npm run build` first), the gateway started in-process on a free port over a client
// runtime of its own data dir, a JSON-RPC client over a real WebSocket and an SSE reader over a
// real HTTP connection.
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config/config.js';
import { gatewayCommands } from '../../src/cli/gateway-runtime.js';
import { openRuntime, type Runtime } from '../../src/cli/runtime.js';
import { machineDefinitions } from '../../src/client/machine-definitions.js';
import { startGateway, type Gateway, type GatewayOptions } from '../../src/server/gateway.js';
import { REPO_ROOT, cliEnv } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

/** A host process and its stderr. */
export interface HostProcess {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Everything a gateway test file runs on; `stop` ends it all. */
export interface GatewayFixture {
  nats: TestNats;
  rt: Runtime;
  dirs: string[];
  /** Starts a gateway on this runtime (a free port on 127.0.0.1 unless told otherwise). */
  gateway(extra?: Partial<GatewayOptions>): Promise<Gateway>;
  /** Starts `actorloop host` against the fixture's server (with `args` besides, e.g. `--allow-faults`) and waits until it hosts. */
  host(name: string, args?: string[]): Promise<HostProcess>;
  stop(): Promise<void>;
}

/** Polls `fn` until it gives a value (or true); fails after `timeoutMs` naming `what`. */
export async function until<T>(what: string, fn: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Opens the fixture. */
export async function openGatewayFixture(): Promise<GatewayFixture> {
  const nats = await startTestNats();
  const dataDir = await tempDir('gateway');
  const dirs = [dataDir];
  const config = loadConfig({ nats: nats.url, dataDir });
  const rt = await openRuntime(config, pino({ level: 'silent' }), { role: 'client' });
  const gateways: Gateway[] = [];
  const hosts: HostProcess[] = [];
  return {
    nats,
    rt,
    dirs,
    async gateway(extra = {}) {
      const g = await startGateway({
        host: '127.0.0.1', port: 0, token: null, corsOrigins: [], allowFaults: false,
        reader: rt.reader, directory: rt.bus.directory, redact: (t) => rt.tooling.redactor.redact(t).text,
        machines: machineDefinitions().machines, commands: gatewayCommands(rt), logger: pino({ level: 'silent' }),
        ...extra,
      });
      gateways.push(g);
      return g;
    },
    async host(name, args = []) {
      const hostDir = await tempDir('host');
      dirs.push(hostDir);
      const child = spawn(process.execPath, ['bin/actorloop.js', 'host', '--name', name, '--lease-ttl', '3000', '--nats', nats.url, '--data-dir', hostDir, ...args], {
        cwd: REPO_ROOT, env: cliEnv(hostDir), stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      const h = { child, stderr: () => err, exited };
      hosts.push(h);
      await until(`host ${name} to start (stderr: ${err})`, () => err.includes('hosting agents'));
      return h;
    },
    async stop() {
      for (const g of gateways) await g.close();
      for (const h of hosts) {
        if (h.child.exitCode === null && h.child.signalCode === null) {
          h.child.kill('SIGTERM');
          await h.exited;
        }
      }
      await rt.close();
      await nats.stop();
      await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}

/** A JSON-RPC 2.0 client over one WebSocket: calls by id, notifications kept in order. */
export class RpcClient {
  private nextId = 1;
  private readonly waiting = new Map<number, (msg: RpcMessage) => void>();
  /** Every notification received, in order. */
  readonly notifications: Array<{ method: string; params: any }> = [];
  /** Answers to raw frames (`sendRaw`), in order. */
  readonly raw: RpcMessage[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString()) as RpcMessage;
      if (msg.method !== undefined && msg.id === undefined) this.notifications.push({ method: msg.method, params: msg.params });
      else if (typeof msg.id === 'number' && this.waiting.has(msg.id)) {
        this.waiting.get(msg.id)!(msg);
        this.waiting.delete(msg.id);
      } else this.raw.push(msg);
    });
  }

  /** Opens a client on `url` (`ws://…/v1/rpc`). */
  static open(url: string, headers: Record<string, string> = {}): Promise<RpcClient> {
    const ws = new WebSocket(url, { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new RpcClient(ws)));
      ws.once('error', reject);
    });
  }

  /** A call's whole answer (result or error). */
  answer(method: string, params?: unknown): Promise<RpcMessage> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) }));
    });
  }

  /** A call's result; throws with the error's JSON when it has one. */
  async call<T = any>(method: string, params?: unknown): Promise<T> {
    const a = await this.answer(method, params);
    if (a.error) throw new Error(`${method}: ${JSON.stringify(a.error)}`);
    return a.result as T;
  }

  /** Sends a frame as is; its answer lands in `raw`. */
  async sendRaw(text: string): Promise<RpcMessage> {
    const before = this.raw.length;
    this.ws.send(text);
    return until('an answer to a raw frame', () => this.raw[before]);
  }

  close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }
}

/** A JSON-RPC message as received. */
export interface RpcMessage {
  jsonrpc: '2.0';
  id?: number | string | null;
  method?: string;
  params?: any;
  result?: any;
  error?: { code: number; message: string; data?: any };
}

/** One SSE event as received. */
export interface SseEvent {
  id: string | null;
  event: string | null;
  data: string;
}

/**
 * Reads an SSE stream over a real HTTP connection until `stopWhen` says enough (then drops the
 * connection, as a client going away does); every complete event received is returned, and the
 * comments (heartbeats) counted.
 */
export async function readSse(url: string, headers: Record<string, string>, stopWhen: (events: SseEvent[], body: string) => boolean): Promise<{ status: number; events: SseEvent[]; body: string }> {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  const events: SseEvent[] = [];
  let body = '';
  if (!res.ok || !res.body) return { status: res.status, events, body: await res.text() };
  const decoder = new TextDecoder();
  let buf = '';
  const reader = res.body.getReader();
  try {
    while (!stopWhen(events, body)) {
      const { value, done } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      body += text;
      buf += text;
      let at: number;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, at);
        buf = buf.slice(at + 2);
        const e: SseEvent = { id: null, event: null, data: '' };
        let isEvent = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const [field, ...rest] = line.split(':');
          const v = rest.join(':').replace(/^ /, '');
          if (field === 'id') e.id = v;
          else if (field === 'event') e.event = v;
          else if (field === 'data') {
            e.data += v;
            isEvent = true;
          }
        }
        if (isEvent) events.push(e);
      }
    }
  } finally {
    ac.abort();
    await reader.cancel().catch(() => {});
  }
  return { status: res.status, events, body };
}
