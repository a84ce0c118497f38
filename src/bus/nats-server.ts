import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, fstatSync, mkdirSync, accessSync, constants as fsConstants } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { createServer, connect as tcpConnect } from 'node:net';
import { delimiter, join } from 'node:path';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';

/** Stable bus error codes raised by this module. */
export const NATS_SERVER_CODES = {
  missing: 'bus.nats_server_missing',
  startFailed: 'bus.nats_server_failed',
} as const;

/** What to do when nats-server cannot be found. */
export const NATS_SERVER_HINT =
  'install it (Debian/Ubuntu: apt-get install -y nats-server) or set NATS_URL to a NATS server with JetStream enabled';

/** Options of `startNatsServer`. */
export interface StartNatsServerOptions {
  /** JetStream store directory (`-sd`). */
  storeDir: string;
  /** Binary name or path; defaults to `nats-server` on `pathEnv` (then /usr/sbin, /usr/local/bin). */
  binary?: string;
  /**
   * The PATH a binary name is looked up on, before the fallback dirs: the caller's environment
   * (the CLI passes `environmentOf(config).PATH`: only src/config reads the process environment).
   * Unset: the fallback dirs alone.
   */
  pathEnv?: string;
  /** Port to listen on; defaults to a free loopback port. */
  port?: number;
  /** Where the server writes its log (stdout + stderr); defaults to `<storeDir>/nats-server.log`. */
  logFile?: string;
  /** How long to wait for the server to accept connections. */
  readyTimeoutMs?: number;
  /** A config file (`-c`), for what has no flag: the authorization block of the embedded server, a cluster block. */
  configFile?: string;
  /**
   * The server's name (`-n`); default a unique one. A cluster node keeps its name across restarts:
   * JetStream knows its peers by name, and a node back under another one is a stranger to them.
   */
  serverName?: string;
  logger?: Logger;
}

/** A running nats-server child. */
export interface NatsServerHandle {
  url: string;
  pid: number;
  port: number;
  storeDir: string;
  logFile: string;
  /** SIGTERM, wait for exit; SIGKILL after 5 s. */
  stop(): Promise<void>;
}

// Debian installs nats-server in /usr/sbin, which is not on a normal user's PATH.
const FALLBACK_DIRS = ['/usr/sbin', '/usr/local/bin', '/usr/local/sbin'];

/**
 * Resolves the nats-server binary to run, looking a name up on `pathEnv` (a PATH string) and then
 * the fallback dirs, or throws `bus.nats_server_missing`.
 */
export function resolveNatsServerBinary(binary?: string, pathEnv?: string): string {
  const name = binary ?? 'nats-server';
  if (name.includes('/')) {
    if (isExecutable(name)) return name;
    throw missingError(name);
  }
  const dirs = [...(pathEnv ?? '').split(delimiter).filter(Boolean), ...FALLBACK_DIRS];
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  throw missingError(name);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function missingError(name: string, cause?: unknown): BusError {
  return new BusError(NATS_SERVER_CODES.missing, `nats-server was not found (looked for ${name})`, {
    hint: NATS_SERVER_HINT,
    cause,
  });
}

/** The version of a nats-server binary, e.g. `2.9.10` (`pathEnv` as in `resolveNatsServerBinary`). */
export async function natsServerVersion(binary?: string, pathEnv?: string): Promise<string> {
  const path = resolveNatsServerBinary(binary, pathEnv);
  const out = await new Promise<string>((resolve, reject) => {
    execFile(path, ['--version'], { timeout: 5_000 }, (err, stdout) => {
      if (err) reject((err as NodeJS.ErrnoException).code === 'ENOENT' ? missingError(path, err) : err);
      else resolve(stdout);
    });
  });
  const m = /v?(\d+\.\d+\.\d+\S*)/.exec(out);
  if (!m?.[1]) throw new BusError(NATS_SERVER_CODES.startFailed, `cannot parse nats-server version from "${out.trim()}"`);
  return m[1];
}

/** Picks a free loopback port by binding port 0 and releasing it. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * True when a NATS server answers on `url` (it sends its INFO line) within `timeoutMs`; with
 * `serverName`, only when that server is the one named so (not another on the same port).
 */
export async function natsAccepts(url: string, timeoutMs = 1_000, serverName?: string): Promise<boolean> {
  const u = new URL(url.includes('://') ? url : `nats://${url}`);
  return new Promise((resolve) => {
    const sock = tcpConnect({ host: u.hostname, port: Number(u.port || 4222) });
    let buf = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.on('data', (chunk) => {
      buf += chunk.toString('utf8');
      const eol = buf.indexOf('\r\n');
      if (eol < 0) return;
      const line = buf.slice(0, eol);
      if (!line.startsWith('INFO ')) return done(false);
      if (serverName === undefined) return done(true);
      try {
        done((JSON.parse(line.slice(5)) as { server_name?: string }).server_name === serverName);
      } catch {
        done(false);
      }
    });
    sock.once('error', () => done(false));
    sock.once('close', () => done(false));
  });
}

/** Starts `nats-server -js` on loopback and waits until it accepts connections. */
export async function startNatsServer(opts: StartNatsServerOptions): Promise<NatsServerHandle> {
  const logger = opts.logger ?? pino({ level: 'silent' });
  const binary = resolveNatsServerBinary(opts.binary, opts.pathEnv);
  mkdirSync(opts.storeDir, { recursive: true });
  const logFile = opts.logFile ?? join(opts.storeDir, 'nats-server.log');
  // a port picked by binding 0 can be taken before nats-server binds it: retry with another
  const attempts = opts.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const port = opts.port ?? (await freePort());
    try {
      return await startOnce(binary, port, logFile, opts, logger);
    } catch (err) {
      lastError = err;
      if (!(err instanceof BusError) || !/address already in use/i.test(err.message)) throw err;
      logger.warn({ port }, 'nats-server port taken, retrying on another');
    }
  }
  throw lastError;
}

async function startOnce(
  binary: string, port: number, logFile: string, opts: StartNatsServerOptions, logger: Logger,
): Promise<NatsServerHandle> {
  // The server logs to a file, not a pipe: a pipe would kill an orphaned server (SIGPIPE)
  // once this process dies, and the embedded server must outlive a crashed owner (design §6).
  // a unique name tells our server from anything else already answering on the port
  const serverName = opts.serverName ?? `actorloop_${process.pid}_${randomBytes(4).toString('hex')}`;
  const fd = openSync(logFile, 'a');
  // error messages quote only what this run wrote, not an earlier run's lines
  const logStart = fstatSync(fd).size;
  let child: ChildProcess;
  try {
    const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', opts.storeDir, '-n', serverName];
    if (opts.configFile) args.unshift('-c', opts.configFile);
    child = spawn(binary, args, {
      stdio: ['ignore', fd, fd],
      // own process group: a Ctrl-C in the terminal must not kill it under a running shutdown
      detached: true,
    });
  } finally {
    closeSync(fd);
  }
  child.unref();
  const url = `nats://127.0.0.1:${port}`;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  let spawnError: NodeJS.ErrnoException | undefined;
  child.once('error', (err) => { spawnError = err; });

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 10_000);
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => { exit = e; });
  while (true) {
    if (spawnError) {
      if (spawnError.code === 'ENOENT') throw missingError(binary, spawnError);
      throw new BusError(NATS_SERVER_CODES.startFailed, `cannot run ${binary}: ${spawnError.message}`, { cause: spawnError });
    }
    if (exit) {
      const tail = await logTail(logFile, logStart);
      throw new BusError(NATS_SERVER_CODES.startFailed,
        `nats-server exited during start (code ${exit.code ?? exit.signal}): ${tail}`,
        { hint: `see ${logFile}` });
    }
    if (await natsAccepts(url, 500, serverName)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      const tail = await logTail(logFile, logStart);
      throw new BusError(NATS_SERVER_CODES.startFailed,
        `nats-server did not accept connections on ${url} within ${opts.readyTimeoutMs ?? 10_000} ms: ${tail}`,
        { hint: `see ${logFile}`, retryable: true });
    }
    await sleep(50);
  }
  const pid = child.pid!;
  logger.info({ pid, url, storeDir: opts.storeDir }, 'nats-server started');

  let stopping: Promise<void> | undefined;
  return {
    url, pid, port, storeDir: opts.storeDir, logFile,
    stop() {
      stopping ??= (async () => {
        if (exit) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
        logger.info({ pid, url }, 'nats-server stopped');
      })();
      return stopping;
    },
  };
}

/** The last ~2 KB of a log file, on one line, for an error message. */
export async function logTail(path: string, fromOffset = 0, bytes = 2048): Promise<string> {
  try {
    const fh = await openFile(path, 'r');
    try {
      const { size } = await fh.stat();
      const start = Math.max(fromOffset, size - bytes);
      const buf = Buffer.alloc(Math.max(0, size - start));
      await fh.read(buf, 0, buf.length, start);
      return buf.toString('utf8').trim().split('\n').slice(-8).join(' | ') || '(no output)';
    } finally {
      await fh.close();
    }
  } catch {
    return '(no log)';
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
