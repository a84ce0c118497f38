import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import {
  createKvLeaseStore, DEFAULT_LEASE_TTL_MS, ensureLeaseBucket, type Lease, type LeaseStore,
} from '../../src/bus/leases.js';
import { startNatsServer } from '../../src/bus/nats-server.js';
import { ensureStreams } from '../../src/bus/streams.js';
import { BUCKETS } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

const T0 = 1_700_000_000_000;
const SHORT_TTL_MS = 1_500;

/** Polls until `check` holds; real-time max_age removal is swept by the server, not instant. */
async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Exactly one of two racing takes wins; returns the winner. */
function oneWinner(results: (Lease | null)[]): Lease {
  const winners = results.filter((l): l is Lease => l !== null);
  expect(winners).toHaveLength(1);
  return winners[0]!;
}

describe('KV lease store', () => {
  let nats: TestNats;
  let ncA: NatsConnection;
  let ncB: NatsConnection;
  let jsm: JetStreamManager;
  // host A and host B use their own connections, as two processes would
  let a: LeaseStore;
  let b: LeaseStore;
  let shortA: LeaseStore;
  let shortB: LeaseStore;
  let shortKv: KV;

  beforeAll(async () => {
    nats = await startTestNats();
    ncA = await connect({ servers: nats.url });
    ncB = await connect({ servers: nats.url });
    jsm = await jetstreamManager(ncA);
    const { leases } = await ensureStreams(jsm);
    a = createKvLeaseStore(leases, { ttlMs: DEFAULT_LEASE_TTL_MS });
    b = createKvLeaseStore(await new Kvm(ncB).open(BUCKETS.leases), { ttlMs: DEFAULT_LEASE_TTL_MS });
    // a bucket of its own so max age can pass in real time without touching the others
    shortKv = await new Kvm(ncA).create('leases_short', { history: 1, storage: StorageType.File, ttl: SHORT_TTL_MS });
    shortA = createKvLeaseStore(shortKv, { ttlMs: SHORT_TTL_MS });
    shortB = createKvLeaseStore(await new Kvm(ncB).open('leases_short'), { ttlMs: SHORT_TTL_MS });
  });
  afterAll(async () => {
    await ncA?.close();
    await ncB?.close();
    await nats?.stop();
  });

  it('ensureStreams creates the leases bucket: history 1, file storage, max age = TTL', async () => {
    const config = (await jsm.streams.info(`KV_${BUCKETS.leases}`)).config;
    expect(config.max_msgs_per_subject).toBe(1);
    expect(config.storage).toBe(StorageType.File);
    expect(config.max_age).toBe(nanos(DEFAULT_LEASE_TTL_MS));
    expect(a.ttlMs).toBe(DEFAULT_LEASE_TTL_MS);
  });

  it('takes, gets, renews and releases', async () => {
    const id = newId('agent');
    expect(await a.get(id, T0)).toBeNull();
    const lease = await a.take(id, 'host-a', T0);
    expect(lease).toMatchObject({ actorId: id, host: 'host-a', expiresAt: T0 + DEFAULT_LEASE_TTL_MS });
    expect(lease!.epoch).toBeGreaterThan(0);
    expect(await b.get(id, T0 + 1)).toEqual(lease);

    const renewed = await a.renew(lease!, T0 + 3_000);
    expect(renewed.epoch).toBeGreaterThan(lease!.epoch);
    expect(renewed.expiresAt).toBe(T0 + 3_000 + DEFAULT_LEASE_TTL_MS);
    expect(await b.get(id, T0 + 3_001)).toEqual(renewed);
    // a renewal made from the stale lease fails: the renewal moved the epoch
    await expect(a.renew(lease!, T0 + 3_002)).rejects.toMatchObject({ code: 'bus.lease_lost' });

    await a.release(renewed);
    expect(await b.get(id, T0 + 3_003)).toBeNull();
  });

  it('refuses a second host while the lease is live', async () => {
    const id = newId('agent');
    const lease = await a.take(id, 'host-a', T0);
    expect(await b.take(id, 'host-b', T0 + DEFAULT_LEASE_TTL_MS - 1)).toBeNull();
    expect(await b.get(id, T0 + 1)).toEqual(lease);
  });

  it('lets the same host take its own live lease again with a new epoch, fencing the old one', async () => {
    const id = newId('agent');
    const first = await a.take(id, 'host-a', T0);
    const again = await b.take(id, 'host-a', T0 + 10);
    expect(again!.epoch).toBeGreaterThan(first!.epoch);
    await expect(a.renew(first!, T0 + 20)).rejects.toMatchObject({ code: 'bus.lease_lost' });
  });

  it('lets another host take a lease past its expiry (value check); the old holder is fenced', async () => {
    const id = newId('agent');
    const old = (await a.take(id, 'host-a', T0))!;
    const after = T0 + DEFAULT_LEASE_TTL_MS;
    expect(await b.get(id, after)).toBeNull();
    const taken = await b.take(id, 'host-b', after);
    expect(taken!.epoch).toBeGreaterThan(old.epoch);
    await expect(a.renew(old, after + 1)).rejects.toMatchObject({ code: 'bus.lease_lost' });
    // a late release by the old holder is not an error and leaves the new holder alone
    await a.release(old);
    expect(await a.get(id, after + 2)).toEqual(taken);
  });

  it('loses a lease nobody renews once the bucket max age removes it (real time)', async () => {
    const id = newId('agent');
    const now = Date.now();
    const old = (await shortA.take(id, 'host-a', now))!;
    await until(async () => (await shortKv.get(id)) === null);
    expect(await shortB.get(id, now)).toBeNull();
    await expect(shortA.renew(old, Date.now())).rejects.toMatchObject({ code: 'bus.lease_lost' });
    const taken = await shortB.take(id, 'host-b', Date.now());
    expect(taken!.epoch).toBeGreaterThan(old.epoch);
  });

  it('a racing take for a free lease has exactly one winner (20 runs)', async () => {
    for (let i = 0; i < 20; i++) {
      const id = newId('agent');
      const winner = oneWinner(await Promise.all([a.take(id, 'host-a', T0), b.take(id, 'host-b', T0)]));
      expect(await a.get(id, T0)).toEqual(winner);
    }
  });

  it('a racing take for an expired lease has exactly one winner (20 runs)', async () => {
    for (let i = 0; i < 20; i++) {
      const id = newId('agent');
      const old = (await a.take(id, 'host-c', T0))!;
      const later = T0 + DEFAULT_LEASE_TTL_MS + 1;
      const winner = oneWinner(await Promise.all([a.take(id, 'host-a', later), b.take(id, 'host-b', later)]));
      expect(winner.epoch).toBeGreaterThan(old.epoch);
      expect(await b.get(id, later)).toEqual(winner);
    }
  });

  it('a racing take for a released lease has exactly one winner (20 runs)', async () => {
    for (let i = 0; i < 20; i++) {
      const id = newId('agent');
      await a.release((await a.take(id, 'host-c', T0))!);
      const winner = oneWinner(await Promise.all([a.take(id, 'host-a', T0), b.take(id, 'host-b', T0)]));
      expect(await b.get(id, T0)).toEqual(winner);
    }
  });

  it('epochs strictly increase for one actor across owners, renewals, releases and expiry', async () => {
    const id = newId('agent');
    const epochs: number[] = [];
    let now = T0;
    const l1 = (await a.take(id, 'host-a', now))!;
    epochs.push(l1.epoch);
    const l2 = await a.renew(l1, (now += 1_000));
    epochs.push(l2.epoch);
    await a.release(l2);
    const l3 = (await b.take(id, 'host-b', (now += 1)))!;
    epochs.push(l3.epoch);
    // other actors' writes in between: revisions are per bucket, so still increasing for this one
    await a.take(newId('agent'), 'host-a', now);
    const l4 = await b.renew(l3, (now += 1_000));
    epochs.push(l4.epoch);
    const l5 = (await a.take(id, 'host-a', (now += DEFAULT_LEASE_TTL_MS + 1)))!;
    epochs.push(l5.epoch);
    for (let i = 1; i < epochs.length; i++) expect(epochs[i]).toBeGreaterThan(epochs[i - 1]!);
  });

  it('release lets another host take at once', async () => {
    const id = newId('agent');
    const held = (await a.take(id, 'host-a', T0))!;
    await a.release(held);
    expect(await b.get(id, T0 + 1)).toBeNull();
    const taken = await b.take(id, 'host-b', T0 + 1);
    expect(taken).toMatchObject({ host: 'host-b' });
    expect(taken!.epoch).toBeGreaterThan(held.epoch);
  });

  it('lists only live leases', async () => {
    // a bucket of its own so other tests' leases do not show up
    const kv = await new Kvm(ncA).create('leases_list', { history: 1, ttl: DEFAULT_LEASE_TTL_MS });
    const store = createKvLeaseStore(kv, { ttlMs: DEFAULT_LEASE_TTL_MS });
    expect(await store.list(T0)).toEqual([]);
    const [x, y, z] = ['actor_x', 'actor_y', 'actor_z'];
    const lx = (await store.take(x, 'host-a', T0))!;
    const ly = (await store.take(y, 'host-b', T0 + 5_000))!;
    await store.release((await store.take(z, 'host-a', T0 + 5_000))!);
    expect(await store.list(T0 + 1)).toEqual([lx, ly]);
    expect(await store.list(T0 + DEFAULT_LEASE_TTL_MS)).toEqual([ly]);
  });

  it('treats a value it cannot read as held, and refuses keys KV cannot store', async () => {
    const id = newId('agent');
    await shortKv.put(id, JSON.stringify({ v: 2, owner: 'a newer host' }));
    expect(await shortA.take(id, 'host-a', T0)).toBeNull();
    expect(await shortA.get(id, T0)).toBeNull();
    await expect(a.take('bad.key', 'host-a', T0)).rejects.toMatchObject({ code: 'bus.invalid_lease_key' });
  });
});

describe('lease bucket across server restarts and TTL changes', () => {
  it('keeps epochs increasing after every key aged out and the server restarted', async () => {
    const storeDir = await tempDir('leases');
    let server = await startNatsServer({ storeDir });
    let nc: NatsConnection | undefined;
    try {
      nc = await connect({ servers: server.url });
      let store = createKvLeaseStore(await ensureLeaseBucket(new Kvm(nc), SHORT_TTL_MS), { ttlMs: SHORT_TTL_MS });
      const id = newId('agent');
      const first = (await store.take(id, 'host-a', Date.now()))!;
      const kv = await new Kvm(nc).open(BUCKETS.leases);
      await until(async () => (await kv.get(id)) === null);
      await nc.close();
      await server.stop();

      // the bucket is empty now; the server must still remember its last sequence
      server = await startNatsServer({ storeDir, port: server.port });
      nc = await connect({ servers: server.url });
      store = createKvLeaseStore(await ensureLeaseBucket(new Kvm(nc), SHORT_TTL_MS), { ttlMs: SHORT_TTL_MS });
      const second = (await store.take(id, 'host-b', Date.now()))!;
      expect(second.epoch).toBeGreaterThan(first.epoch);
    } finally {
      await nc?.close();
      await server.stop();
      await rm(storeDir, { recursive: true, force: true });
    }
  });

  it('updates the bucket max age when the deployment TTL changes', async () => {
    const nats = await startTestNats();
    const nc = await connect({ servers: nats.url });
    try {
      const kvm = new Kvm(nc);
      const jsm = await jetstreamManager(nc);
      const info = async () => (await jsm.streams.info(`KV_${BUCKETS.leases}`)).config;
      await ensureLeaseBucket(kvm, 30_000);
      expect((await info()).max_age).toBe(nanos(30_000));
      // shorter than the duplicate window the server picked for 30 s: that must shrink too
      await ensureLeaseBucket(kvm, SHORT_TTL_MS);
      expect((await info()).max_age).toBe(nanos(SHORT_TTL_MS));
      expect((await info()).duplicate_window).toBeLessThanOrEqual(nanos(SHORT_TTL_MS));
      await ensureLeaseBucket(kvm, 20_000);
      expect((await info()).max_age).toBe(nanos(20_000));
      // a command that opens the bus without a TTL keeps the deployment's
      await ensureStreams(jsm);
      expect((await info()).max_age).toBe(nanos(20_000));
      await ensureStreams(jsm, undefined, { leaseTtlMs: 15_000 });
      expect((await info()).max_age).toBe(nanos(15_000));
    } finally {
      await nc.close();
      await nats.stop();
    }
  });
});
