import { Kvm } from '@nats-io/kv';
import { beforeAll, describe, expect, it } from 'vitest';
import { hasCode } from '../../src/protocol/errors.js';
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

describe('memory leases, besides the contract', () => {
  it('drop a key nobody rewrote for a TTL on their own clock (the bucket\'s max age): its holder\'s renewal is lost', async () => {
    let now = 0;
    const leases = createMemoryLeaseStore({ ttlMs: 1_000, now: () => now });
    const held = (await leases.take('agt_x', 'host-a', 0))!;
    now = 999;
    const renewed = await leases.renew(held, 0);
    now = 999 + 1_000;
    await expect(leases.renew(renewed, 0)).rejects.toSatisfy((e) => hasCode(e, 'bus.lease_lost'));
    expect(await leases.take('agt_x', 'host-b', 0)).toMatchObject({ host: 'host-b' });
  });
});
