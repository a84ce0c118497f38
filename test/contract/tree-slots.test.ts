import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { openBus, type Bus } from '../../src/bus/connection.js';
import { createMemoryTreeSlots } from '../../src/bus/memory-tree-slots.js';
import type { TreeSlotStore } from '../../src/bus/tree-slot-port.js';
import { createKvTreeSlots } from '../../src/bus/tree-slots.js';
import { useTestBus } from '../helpers/test-bus.js';
import { treeSlotContract } from './tree-slots.contract.js';

const memory = createMemoryTreeSlots();
treeSlotContract('memory', () => [memory]);

// two connections stand for two hosts: the record's compare-and-set is what keeps them exact
const nats = useTestBus();
let second: Bus | undefined;
let kv: TreeSlotStore[] = [];
beforeAll(async () => {
  second = await openBus({ natsUrl: nats.nats.url, dataDir: nats.nats.storeDir, logger: pino({ level: 'silent' }) });
  kv = [createKvTreeSlots({ js: nats.bus.js }), createKvTreeSlots({ js: second.js })];
});
afterAll(async () => {
  await second?.close();
});
treeSlotContract('JetStream KV, two hosts', () => kv);
