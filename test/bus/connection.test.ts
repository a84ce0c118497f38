import { afterAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { openBus } from '../../src/bus/connection.js';
import { natsAccepts, freePort } from '../../src/bus/nats-server.js';
import { tempDir } from '../helpers/nats.js';

describe('openBus', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const logger = pino({ level: 'silent' });

  it('fails clearly when NATS_URL points at nothing', async () => {
    const dataDir = await tempDir('conn');
    dirs.push(dataDir);
    const url = `nats://127.0.0.1:${await freePort()}`;
    const err = await openBus({ natsUrl: url, dataDir, logger }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'bus.unreachable', retryable: true });
    expect((err as { hint: string }).hint).toMatch(/nats-server|NATS_URL/);
  });

  it('starts an embedded server without NATS_URL and stops it on close', async () => {
    const dataDir = await tempDir('conn-emb');
    dirs.push(dataDir);
    const bus = await openBus({ dataDir, logger, natsUrl: null });
    expect(bus.embedded).toBe(true);
    const ack = await bus.js.publish('log.r.a', '{}');
    expect(ack.stream).toBe('LOGS');
    const second = await openBus({ dataDir, logger });
    expect(second.url).toBe(bus.url);
    await second.close();
    expect(await natsAccepts(bus.url)).toBe(true);
    await bus.close();
    expect(await natsAccepts(bus.url, 300)).toBe(false);
  });
});
