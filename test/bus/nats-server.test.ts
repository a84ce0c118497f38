import { afterAll, describe, expect, it } from 'vitest';
import { chmod, rm, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { hasCode } from '../../src/protocol/errors.js';
import {
  NATS_SERVER_HINT, natsAccepts, natsServerVersion, resolveNatsServerBinary, startNatsServer,
} from '../../src/bus/nats-server.js';
import { pidAlive } from '../../src/bus/embedded.js';
import { tempDir } from '../helpers/nats.js';

describe('startNatsServer', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('starts a JetStream server on a free loopback port and stops it', async () => {
    const storeDir = await tempDir('ns');
    dirs.push(storeDir);
    const server = await startNatsServer({ storeDir });
    try {
      expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
      expect(await natsAccepts(server.url)).toBe(true);
      expect(pidAlive(server.pid)).toBe(true);
    } finally {
      await server.stop();
    }
    expect(pidAlive(server.pid)).toBe(false);
    expect(await natsAccepts(server.url, 300)).toBe(false);
    await server.stop(); // twice is harmless
  });

  it('says how to install nats-server when the binary is missing', async () => {
    const storeDir = await tempDir('ns-missing');
    dirs.push(storeDir);
    for (const binary of ['nats-server-that-does-not-exist', '/nonexistent/bin/nats-server']) {
      const err = await startNatsServer({ storeDir, binary }).catch((e: unknown) => e);
      expect(hasCode(err, 'bus.nats_server_missing')).toBe(true);
      if (!hasCode(err, 'bus.nats_server_missing')) continue;
      expect(err.message).toMatch(/nats-server was not found/);
      expect(err.hint).toBe(NATS_SERVER_HINT);
      expect(err.hint).toBe(
        'install it (Debian/Ubuntu: apt-get install -y nats-server) or set NATS_URL to a NATS server with JetStream enabled',
      );
    }
    await expect(natsServerVersion('nats-server-that-does-not-exist')).rejects.toMatchObject({
      code: 'bus.nats_server_missing',
    });
  });

  it('includes the server output when it cannot start', async () => {
    const storeDir = await tempDir('ns-busy');
    dirs.push(storeDir);
    const first = await startNatsServer({ storeDir });
    try {
      const otherDir = await tempDir('ns-busy2');
      dirs.push(otherDir);
      const err = await startNatsServer({ storeDir: otherDir, port: first.port }).catch((e: unknown) => e);
      expect(hasCode(err, 'bus.nats_server_failed')).toBe(true);
      expect((err as Error).message).toMatch(/address already in use|exited/i);
    } finally {
      await first.stop();
    }
  });

  it('looks a name up on the PATH it is given, then in the fallback dirs', async () => {
    const bin = await tempDir('ns-path');
    dirs.push(bin);
    const fake = join(bin, 'nats-server');
    await writeFile(fake, '#!/bin/sh\n');
    await chmod(fake, 0o755);
    expect(resolveNatsServerBinary(undefined, ['/nonexistent', bin].join(delimiter))).toBe(fake);
    // the process's own PATH is not read here: without one, only the fallback dirs are searched
    expect(resolveNatsServerBinary(undefined, '')).toMatch(/^\/usr\/(local\/)?s?bin\/nats-server$/);
    expect(() => resolveNatsServerBinary('nats-server-that-does-not-exist', bin)).toThrow(/nats-server was not found/);
  });

  it('reports its version', async () => {
    expect(await natsServerVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
