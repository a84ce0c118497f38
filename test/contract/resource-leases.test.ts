import { Kvm } from '@nats-io/kv';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ResourceLeaseStore } from '../../src/bus/resource-lease-port.js';
import { createKvResourceLeases, ensureResourceLeaseBucket } from '../../src/bus/resource-leases.js';
import { createMemoryResourceLeases } from '../../src/bus/memory-resource-leases.js';
import { useTestBus } from '../helpers/test-bus.js';
import { resourceLeaseContract } from './resource-leases.contract.js';

const memory = createMemoryResourceLeases();
resourceLeaseContract('memory', () => memory);

const nats = useTestBus();
let kv: ResourceLeaseStore | undefined;
beforeAll(async () => {
  // opened on first use, as a host's supervisor opens it
  kv = createKvResourceLeases({ kv: () => ensureResourceLeaseBucket(new Kvm(nats.bus.js)) });
});
resourceLeaseContract('JetStream KV', () => kv!);

describe('memory resource leases, besides the contract', () => {
  it('drop a lease nobody renewed for a TTL on their own clock (the bucket\'s max age)', async () => {
    let now = 0;
    const leases = createMemoryResourceLeases({ ttlMs: 1_000, now: () => now });
    const held = (await leases.take('process:/ws', 'agt_a/call_1', 'exclusive', 0))!;
    now = 1_000;
    expect(await leases.renew(held, 0)).toBeNull();
    expect(await leases.take('process:/ws', 'agt_b/call_2', 'exclusive', 0)).toMatchObject({ holder: 'agt_b/call_2' });
  });
});
