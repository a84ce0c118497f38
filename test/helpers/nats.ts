import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer, type NatsServerHandle } from '../../src/bus/nats-server.js';

/** A fresh temp directory; remove it with `rm(dir, {recursive: true})`. */
export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `actorloop-${prefix}-`));
}

/** A real nats-server with JetStream on a free port and a temp store. */
export interface TestNats {
  url: string;
  storeDir: string;
  server: NatsServerHandle;
  /** Stops the server and removes its store. */
  stop(): Promise<void>;
}

/** Starts a throwaway nats-server for a test file (stop it in afterAll). */
export async function startTestNats(): Promise<TestNats> {
  const storeDir = await tempDir('nats');
  const server = await startNatsServer({ storeDir });
  return {
    url: server.url,
    storeDir,
    server,
    async stop() {
      await server.stop();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}

/** A test nats-server that can be killed like a crash and started again with the same URL and store. */
export interface RestartableNats {
  url: string;
  storeDir: string;
  /** The server now running, or null between `kill` and `restart`. */
  server: NatsServerHandle | null;
  /**
   * SIGKILLs the server: no shutdown, no flush, as `kill -9` or a crash. The signal is sent before
   * this returns its promise, so a synchronous caller (a commit callback) kills at that instant;
   * the promise resolves once the process is gone.
   */
  kill(): Promise<void>;
  /** Starts the server again on the same port and store dir; resolves once it accepts connections. */
  restart(): Promise<void>;
  /** Stops the server if it runs and removes its store. */
  stop(): Promise<void>;
}

/** Starts a nats-server on a fixed free port, so a restart keeps the URL clients reconnect to. */
export async function startRestartableNats(): Promise<RestartableNats> {
  const storeDir = await tempDir('nats');
  const first = await startNatsServer({ storeDir });
  const port = first.port;
  let server: NatsServerHandle | null = first;
  return {
    url: first.url,
    storeDir,
    get server() {
      return server;
    },
    kill() {
      const s = server;
      server = null;
      if (!s) return Promise.resolve();
      process.kill(s.pid, 'SIGKILL');
      // stop() after the kill only waits for the exit: the SIGTERM it sends reaches nothing
      return s.stop();
    },
    async restart() {
      if (server) throw new Error('nats-server is still running; kill it first');
      server = await startNatsServer({ storeDir, port });
    },
    async stop() {
      const s = server;
      server = null;
      await s?.stop();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}
