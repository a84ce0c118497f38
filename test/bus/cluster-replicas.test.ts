import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import type { ServerInfo } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { openBus, natsServers } from '../../src/bus/connection.js';
import { checkReplicas, replicatedVersionRisk, versionBefore } from '../../src/bus/replicas.js';
import { ensureStreams, STREAM_CONFIGS } from '../../src/bus/streams.js';
import { BUCKETS, STREAMS } from '../../src/bus/subjects.js';
import { replicasCheck } from '../../src/cli/doctor-checks.js';
import { BusError } from '../../src/protocol/errors.js';
import { healthy, metaLeader, startTestCluster, type TestCluster } from '../helpers/nats-cluster.js';
import { tempDir } from '../helpers/nats.js';

// On nats-server 2.9.10 (the one installed here): replicated streams work, and the version risk
// of per-subject compare-and-set before 2.9.21 is what the bus warns of.

const ALL_STREAMS = [...Object.values(STREAM_CONFIGS).map((c) => c.name), ...Object.values(BUCKETS).map((b) => `KV_${b}`)];

describe('replicas on a 3-node cluster', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startTestCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('starts three healthy JetStream nodes with a meta leader', async () => {
    expect(cluster.nodes.map((n) => n.name)).toEqual(['n1', 'n2', 'n3']);
    for (const n of cluster.nodes) expect(await healthy(n)).toBe(true);
    expect(['n1', 'n2', 'n3']).toContain(await metaLeader(cluster.nodes[0]!));
    expect(natsServers(cluster.url)).toEqual(cluster.urls);
  });

  it('refuses more replicas than servers, naming both numbers, before making anything', async () => {
    const nc = await connect({ servers: cluster.urls });
    try {
      const jsm = await jetstreamManager(nc);
      const err = await ensureStreams(jsm, undefined, { replicas: { replicas: 5, scale: true }, serverInfo: nc.info! }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BusError);
      expect((err as BusError).code).toBe('bus.replicas_exceed_cluster');
      expect((err as BusError).userMessage()).toMatch(/replicas = 5 needs 5 servers, but the cluster has 3 servers up.*at most 3/);
      expect((await jsm.streams.list().next()).map((s) => s.config.name)).toEqual([]);
    } finally {
      await nc.close();
    }
  });

  it('makes every stream and bucket with three copies through a bus on the comma-separated URL list; the default leaves them', async () => {
    const dataDir = await tempDir('cluster-bus');
    const logger = pino({ level: 'silent' });
    try {
      const bus = await openBus({ natsUrl: cluster.url, dataDir, logger, replicas: { replicas: 3, scale: true } });
      try {
        expect(bus.replicas).toBe(3);
        for (const name of ALL_STREAMS) {
          const info = await bus.jsm.streams.info(name);
          expect(info.config.num_replicas, name).toBe(3);
          expect(info.cluster?.replicas?.length, name).toBe(2);
        }
        // 2.9.10 < 2.9.21: the bus names the risk
        expect(bus.versionRisk).toMatch(/nats-server 2\.9\.10 with replicas = 3: .*zombie host's lease renewal or log commit may be accepted/);
      } finally {
        await bus.close();
      }
      // a command with the default setting (one copy, nothing scaled) keeps what is there
      const plain = await openBus({ natsUrl: cluster.url, dataDir, logger });
      try {
        expect((await plain.jsm.streams.info(STREAMS.logs)).config.num_replicas).toBe(3);
        expect(plain.versionRisk).toBeNull();
      } finally {
        await plain.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('scales an existing stream with fewer copies only when the setting names it', async () => {
    const nc = await connect({ servers: cluster.urls });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(STREAMS.dlq);
      await jsm.streams.add({ ...STREAM_CONFIGS.dlq, num_replicas: 1 });
      await ensureStreams(jsm, undefined, { replicas: { replicas: 3, scale: false }, serverInfo: nc.info! });
      expect((await jsm.streams.info(STREAMS.dlq)).config.num_replicas).toBe(1);
      await ensureStreams(jsm, undefined, { replicas: { replicas: 3, scale: true }, serverInfo: nc.info! });
      expect((await jsm.streams.info(STREAMS.dlq)).config.num_replicas).toBe(3);
    } finally {
      await nc.close();
    }
  });

  it('doctor names the cluster, and the version risk of 2.9.10 with three copies', async () => {
    const nc = await connect({ servers: cluster.urls });
    try {
      expect(replicasCheck(nc.info, 3)).toMatchObject({ check: 'replicas', status: 'warning', detail: expect.stringMatching(/before 2\.9\.21/) });
      expect(replicasCheck(nc.info, 1)).toMatchObject({ status: 'warning', detail: expect.stringMatching(/replicas = 1 on cluster actorloop-test \(3 servers known\)/) });
      expect(replicasCheck(nc.info, 5)).toMatchObject({ status: 'warning', detail: expect.stringMatching(/replicas = 5 .*cannot be placed/) });
      expect(replicasCheck({ ...nc.info!, version: '2.10.4' }, 3)).toMatchObject({ status: 'ok', detail: 'replicas = 3 on cluster actorloop-test (3 servers known), nats-server 2.10.4' });
    } finally {
      await nc.close();
    }
  });
});

describe('replicas without a cluster', () => {
  it('more than one copy on a lone server is a clear error; one is fine', () => {
    const lone = { version: '2.9.10', server_name: 'x' } as ServerInfo;
    expect(() => checkReplicas({ replicas: 3, scale: false }, lone)).toThrow(/replicas = 3 needs 3 servers, but the NATS server is not in a cluster \(1 server\)/);
    expect(() => checkReplicas({ replicas: 1, scale: true }, lone)).not.toThrow();
    expect(replicasCheck(lone, 3)).toMatchObject({ status: 'failed' });
    expect(replicasCheck(lone, 1)).toMatchObject({ status: 'ok', detail: 'replicas = 1 on a single server, nats-server 2.9.10' });
  });

  it('compares versions', () => {
    expect(versionBefore('2.9.10', '2.9.21')).toBe(true);
    expect(versionBefore('2.9.21', '2.9.21')).toBe(false);
    expect(versionBefore('2.10.0', '2.9.21')).toBe(false);
    expect(versionBefore('v2.9.9-beta', '2.9.21')).toBe(true);
    expect(replicatedVersionRisk('2.9.10', 1)).toBeNull();
    expect(replicatedVersionRisk('2.11.0', 3)).toBeNull();
  });
});
