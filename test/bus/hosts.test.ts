// Host presence on KV `hosts`: what `run` and `resume` read to decide whether a live host takes
// their work. Against a real nats-server; the clock of each call is passed in, as hosts do.
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { createKvHostPresence, ensureHostsBucket, hostKey, type HostIdentity, type HostPresence } from '../../src/bus/hosts.js';
import { DEFAULT_LEASE_TTL_MS } from '../../src/bus/leases.js';
import { ensureStreams } from '../../src/bus/streams.js';
import { BUCKETS } from '../../src/bus/subjects.js';
import { startTestNats, type TestNats } from '../helpers/nats.js';

const T0 = 1_700_000_000_000;

function identity(name: string, extra: Partial<HostIdentity> = {}): HostIdentity {
  return { name, hostname: 'elsewhere', pid: 42, startedAt: new Date(T0).toISOString(), leaseTtlMs: 2_000, ...extra };
}

describe('host presence', () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let hosts: HostPresence;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    hosts = createKvHostPresence((await ensureStreams(jsm)).hosts);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('ensureStreams creates the hosts bucket: history 1, file storage, max age = the lease TTL', async () => {
    const config = (await jsm.streams.info(`KV_${BUCKETS.hosts}`)).config;
    expect(config.max_msgs_per_subject).toBe(1);
    expect(config.storage).toBe(StorageType.File);
    expect(config.max_age).toBe(nanos(DEFAULT_LEASE_TTL_MS));
    // idempotent: a second call changes nothing
    await ensureStreams(jsm);
    expect((await jsm.streams.info(`KV_${BUCKETS.hosts}`)).config.max_age).toBe(nanos(DEFAULT_LEASE_TTL_MS));
  });

  it('a host is live from its announcement until its TTL passes or it withdraws', async () => {
    await hosts.announce(identity('host-a'), T0);
    await hosts.announce(identity('host-b:1234'), T0 + 500);
    expect((await hosts.live(T0 + 1)).map((h) => h.name)).toEqual(['host-a', 'host-b:1234']);
    expect(await hosts.live(T0 + 1)).toContainEqual({ ...identity('host-a'), expiresAt: T0 + 2_000 });
    // host-a did not announce again within its TTL; host-b did
    await hosts.announce(identity('host-b:1234'), T0 + 1_900);
    expect((await hosts.live(T0 + 2_100)).map((h) => h.name)).toEqual(['host-b:1234']);
    await hosts.withdraw('host-b:1234');
    expect(await hosts.live(T0 + 2_100)).toEqual([]);
    await hosts.withdraw('host-a');
  });

  it('a host of this machine whose process is gone is not live, whatever its record says', async () => {
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((r) => gone.once('exit', r));
    await hosts.announce(identity('dead', { hostname: hostname(), pid: gone.pid! }), Date.now());
    await hosts.announce(identity('alive', { hostname: hostname(), pid: process.pid }), Date.now());
    expect((await hosts.live(Date.now())).map((h) => h.name)).toEqual(['alive']);
    await hosts.withdraw('dead');
    await hosts.withdraw('alive');
  });

  it('lists hosts while they announce themselves, every listing ending (kv.keys() could wait forever here)', async () => {
    const announcing = setInterval(() => {
      void hosts.announce(identity('busy-a'), Date.now());
      void hosts.announce(identity('busy-b'), Date.now());
    }, 20);
    try {
      for (let i = 0; i < 150; i++) {
        const listed = await Promise.race([
          hosts.live(Date.now()),
          new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 3_000)),
        ]);
        expect(listed, `listing ${i}`).not.toBe('hung');
      }
    } finally {
      clearInterval(announcing);
      await hosts.withdraw('busy-a');
      await hosts.withdraw('busy-b');
    }
  });

  it('names that are no KV key are escaped, and different names stay different keys', () => {
    expect(hostKey('host-a_1')).toBe('host-a_1');
    expect(hostKey('box:123')).toBe('box=3a123');
    expect(hostKey('a.b')).not.toBe(hostKey('a_b'));
    expect(hostKey('héte')).toMatch(/^[A-Za-z0-9_=-]+$/);
  });

  it('a host with its own TTL updates the bucket max age; other commands keep it', async () => {
    await ensureHostsBucket(new Kvm(nc), 3_000);
    expect((await jsm.streams.info(`KV_${BUCKETS.hosts}`)).config.max_age).toBe(nanos(3_000));
    await ensureStreams(jsm);
    expect((await jsm.streams.info(`KV_${BUCKETS.hosts}`)).config.max_age).toBe(nanos(3_000));
  });
});
