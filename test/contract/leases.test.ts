import { Kvm } from '@nats-io/kv';
import { beforeAll } from 'vitest';
import type { LeaseStore } from '../../src/bus/lease-port.js';
import { createKvLeaseStore, DEFAULT_LEASE_TTL_MS, ensureLeaseBucket } from '../../src/bus/leases.js';
import { createMemoryLeaseStore } from '../../src/bus/memory-leases.js';
import { useTestBus } from '../helpers/test-bus.js';
import { leaseContract } from './leases.contract.js';

const memory = createMemoryLeaseStore();
leaseContract('memory', () => memory);

const nats = useTestBus();
let kv: LeaseStore | undefined;
beforeAll(async () => {
  kv = createKvLeaseStore(await ensureLeaseBucket(new Kvm(nats.bus.js)), { ttlMs: DEFAULT_LEASE_TTL_MS });
});
leaseContract('JetStream KV', () => kv!);
