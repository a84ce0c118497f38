import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { openBus, type Bus } from '../../src/bus/connection.js';
import type { JobSlotStore } from '../../src/jobs/job-slot-port.js';
import { createKvJobSlots } from '../../src/jobs/kv-job-slots.js';
import { createMemoryJobSlots } from '../../src/jobs/memory-job-slots.js';
import { useTestBus } from '../helpers/test-bus.js';
import { jobSlotContract } from './job-slots.contract.js';

const memory = createMemoryJobSlots();
jobSlotContract('memory', () => [memory]);

// two connections stand for two hosts: the record's compare-and-set is what keeps them exact
const nats = useTestBus();
let second: Bus | undefined;
let kv: JobSlotStore[] = [];
beforeAll(async () => {
  second = await openBus({ natsUrl: nats.nats.url, dataDir: nats.nats.storeDir, logger: pino({ level: 'silent' }) });
  kv = [createKvJobSlots({ js: nats.bus.js }), createKvJobSlots({ js: second.js })];
});
afterAll(async () => {
  await second?.close();
});
jobSlotContract('JetStream KV, two hosts', () => kv);
