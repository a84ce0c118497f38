import { afterAll, beforeAll } from 'vitest';
import { pino } from 'pino';
import { openBus, type Bus } from '../../src/bus/connection.js';
import { startTestNats, type TestNats } from './nats.js';

/** A real nats-server and a bus on it for the enclosing `describe`: opened before its tests, closed after. */
export function useTestBus(): { readonly bus: Bus; readonly nats: TestNats } {
  let nats: TestNats | undefined;
  let bus: Bus | undefined;
  beforeAll(async () => {
    nats = await startTestNats();
    bus = await openBus({ natsUrl: nats.url, dataDir: nats.storeDir, logger: pino({ level: 'silent' }) });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
  });
  return {
    get bus() {
      return bus!;
    },
    get nats() {
      return nats!;
    },
  };
}
