import { JetStreamApiError, type JetStreamManager, type StreamInfo } from '@nats-io/jetstream';
import type { ServerInfo } from '@nats-io/nats-core';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { BusError } from '../protocol/errors.js';

// Replicas of the streams and buckets actorloop creates (design §6): 1 on a single server, 3 on a
// cluster. The server places the copies; this module checks the number against the cluster, scales
// an existing stream only when the setting was given, and names the server versions that are not
// safe with more than one copy.

/** The most copies a stream may have (nats-server's own limit). */
export const MAX_REPLICAS = 5;

/** How many copies of each stream and bucket to keep, and whether the setting was given. */
export interface ReplicaPlan {
  /** Copies of a stream or bucket created now (1–5). */
  replicas: number;
  /**
   * The setting was given (config file, ACTORLOOP_REPLICAS, `-c`): an existing stream with fewer
   * copies is scaled up to it. Unset, existing streams keep what they have: a command run with the
   * default must not shrink or grow what an operator set up.
   */
  scale: boolean;
}

/** The default plan: one copy, nothing existing changed. */
export const DEFAULT_REPLICAS: ReplicaPlan = { replicas: 1, scale: false };

/** Stable bus error codes raised here. */
export const REPLICA_CODES = {
  exceedCluster: 'bus.replicas_exceed_cluster',
} as const;

/** How many servers the connection knows of: 1 unless the server is in a cluster (then every server's client URL it gossips). */
export function clusterSizeOf(info: ServerInfo | undefined): { clustered: boolean; servers: number; name: string | null } {
  if (!info?.cluster) return { clustered: false, servers: 1, name: null };
  return { clustered: true, servers: Math.max(1, info.connect_urls?.length ?? 1), name: info.cluster };
}

/** The error for `replicas` above what the cluster can place, naming both numbers and what to do. */
export function replicasExceedCluster(replicas: number, servers: number, clustered: boolean, cause?: unknown): BusError {
  const where = clustered ? `the cluster has ${servers} server${servers === 1 ? '' : 's'} up` : 'the NATS server is not in a cluster (1 server)';
  return new BusError(REPLICA_CODES.exceedCluster, `replicas = ${replicas} needs ${replicas} servers, but ${where}`, {
    cause,
    hint: clustered
      ? `set replicas to at most ${servers} (actorloop.toml or ACTORLOOP_REPLICAS), or start the missing servers`
      : 'set replicas = 1, or point NATS_URL at a JetStream cluster of at least that many servers',
  });
}

/** Before any stream is touched: more than one copy on a server that is in no cluster can never be placed. */
export function checkReplicas(plan: ReplicaPlan, info: ServerInfo | undefined): void {
  const size = clusterSizeOf(info);
  if (plan.replicas > 1 && !size.clustered) throw replicasExceedCluster(plan.replicas, 1, false);
}

// 10005: no suitable peers for placement; 10023: insufficient resources; 10074: replicas > 1 in non-clustered mode
const PLACEMENT_CODES = new Set([10005, 10023, 10074]);

/** The server's refusal to place copies, as `bus.replicas_exceed_cluster`; null for any other error. */
export function placementError(err: unknown, replicas: number, info: ServerInfo | undefined): BusError | null {
  if (!(err instanceof JetStreamApiError) || !PLACEMENT_CODES.has(err.code)) return null;
  const size = clusterSizeOf(info);
  return replicasExceedCluster(replicas, size.servers, size.clustered, err);
}

/**
 * Scales an existing stream up to the plan's copies when the plan says so (never down: fewer copies
 * than an operator set is not a default's call). Returns the info after the change.
 */
export async function scaleStream(
  jsm: JetStreamManager, info: StreamInfo, plan: ReplicaPlan, serverInfo: ServerInfo | undefined, logger: Logger,
): Promise<StreamInfo> {
  const have = info.config.num_replicas || 1;
  if (!plan.scale || have >= plan.replicas) return info;
  logger.info({ stream: info.config.name, from: have, to: plan.replicas }, 'stream has fewer replicas than the setting; scaling it');
  try {
    return await jsm.streams.update(info.config.name, { ...info.config, num_replicas: plan.replicas });
  } catch (err) {
    throw placementError(err, plan.replicas, serverInfo) ?? new BusError('bus.stream_failed',
      `cannot scale stream ${info.config.name} to ${plan.replicas} replicas: ${(err as Error).message}`, { cause: err, retryable: true });
  }
}

/** The first nats-server release whose replicated streams apply per-subject compare-and-set in order. */
export const SAFE_REPLICATED_VERSION = '2.9.21';

/** `a < b` for dotted versions (`2.9.10` < `2.9.21`; a suffix such as `-beta` is ignored). */
export function versionBefore(a: string, b: string): boolean {
  const parse = (v: string) => v.replace(/^v/, '').split(/[.-]/).slice(0, 3).map((x) => Number.parseInt(x, 10) || 0);
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] ?? 0) < (y[i] ?? 0);
  return false;
}

/** The risk of this server with this many copies, in one line, or null when there is none. */
export function replicatedVersionRisk(version: string | undefined, replicas: number): string | null {
  if (replicas <= 1 || !version || !versionBefore(version, SAFE_REPLICATED_VERSION)) return null;
  return `nats-server ${version} with replicas = ${replicas}: before ${SAFE_REPLICATED_VERSION} a replicated stream can accept two ` +
    'compare-and-set writes of one subject at once, so during a takeover a zombie host\'s lease renewal or log commit may be ' +
    `accepted next to its successor's; upgrade every server to ${SAFE_REPLICATED_VERSION} or later (2.10+ for production)`;
}

/**
 * Warns of `risk` once per data dir and cluster: a marker file records that this data dir was told
 * (the first command says it; doctor says it every time). A marker that cannot be written costs
 * only a repeated warning.
 */
export async function warnOnce(dataDir: string, key: string, risk: string, logger: Logger): Promise<void> {
  const dir = join(dataDir, 'nats');
  const marker = join(dir, `warned-${key.replace(/[^A-Za-z0-9_.-]/g, '_')}`);
  try {
    await mkdir(dir, { recursive: true });
    const fh = await open(marker, 'wx');
    await fh.close();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
  }
  logger.warn(risk);
}
