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
