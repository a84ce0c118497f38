import {
  DiscardPolicy, JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType,
  type JetStreamManager, type StreamConfig, type StreamInfo,
} from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { nanos, type ServerInfo } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { ensureHostsBucket } from './hosts.js';
import { DEFAULT_LEASE_TTL_MS, ensureLeaseBucket } from './leases.js';
import { checkReplicas, DEFAULT_REPLICAS, placementError, scaleStream, type ReplicaPlan } from './replicas.js';
import { DEFAULT_RESOURCE_LEASE_TTL_MS } from './resource-lease-port.js';
import { BUCKETS, maxDeliveriesAdvisorySubject, STREAMS } from './subjects.js';

/**
 * The largest inbox message (its JSON) the INBOX stream takes. A message's content is committed
 * inline to the recipient's log (`inbox/received`, then `user/message` in the `turn/start`
 * commit), alongside whatever else that commit batches (up to two 64 KiB model outputs): a
 * quarter of NATS' default max_payload (1 MiB) keeps every such commit far below it, so a message
 * the inbox accepts never becomes a commit the log refuses.
 */
export const INBOX_MAX_MSG_BYTES = 256 * 1024;

/** The settings of each stream actorloop relies on (design §4, §6). */
export const STREAM_CONFIGS: Record<keyof typeof STREAMS, Partial<StreamConfig> & { name: string }> = {
  // The truth: never aged out, never deleted or purged; dedupe covers a retried commit.
  logs: {
    name: STREAMS.logs,
    subjects: ['log.>'],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: 0,
    deny_delete: true,
    deny_purge: true,
    duplicate_window: nanos(2 * 60_000),
  },
  // Limits (not work-queue) retention so dedupe state survives a server restart; when full,
  // refuse the sender rather than silently drop an unread message.
  inbox: {
    name: STREAMS.inbox,
    subjects: ['inbox.>'],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.New,
    duplicate_window: nanos(10 * 60_000),
    max_msg_size: INBOX_MAX_MSG_BYTES,
  },
  // Dead letters (`dlq.<actorId>`): inbox messages given up on after max_deliver, kept until an
  // operator removes them. It also captures the server's max-deliveries advisories for INBOX
  // consumers: a message exhausted with no host left to record it (one that died on its last
  // delivery) is still listed, never dropped silently. Full: refuse, never age a record out.
  dlq: {
    name: STREAMS.dlq,
    subjects: ['dlq.>', maxDeliveriesAdvisorySubject(STREAMS.inbox)],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.New,
    duplicate_window: nanos(2 * 60_000),
  },
};

// Settings a stream update cannot change: a mismatch needs an operator, not an update.
const IMMUTABLE: (keyof StreamConfig)[] = ['storage', 'retention'];

/** What `ensureStreams` leaves ready besides the streams. */
export interface EnsuredBus {
  /** The `actors` directory bucket. */
  actors: KV;
  /** The `leases` bucket (actor → host, epoch). */
  leases: KV;
  /** The `hosts` bucket (running hosts, announced by themselves). */
  hosts: KV;
}

/** Options of `ensureStreams`. */
export interface EnsureStreamsOptions {
  /** Lease TTL = the `leases` and `hosts` buckets' max age; a different value updates them. Unset: keep it. */
  leaseTtlMs?: number;
  /** Copies of every stream and bucket (default one, existing ones left as they are). */
  replicas?: ReplicaPlan;
  /** The server's INFO (`nc.info`): how many servers there are, for a clear error when replicas exceed them. */
  serverInfo?: ServerInfo;
}

/**
 * Creates the streams and every KV bucket the runtime uses (`actors`, `leases`, `hosts`,
 * `resource_leases`, `tree_slots`, `job_slots`), or updates them when their settings differ. Buckets are all
 * made here, with the plan's copies, so that whoever opens one later (a host's first tree) finds
 * it with the deployment's replicas rather than making it with one.
 */
export async function ensureStreams(
  jsm: JetStreamManager, logger: Logger = pino({ level: 'silent' }), opts: EnsureStreamsOptions = {},
): Promise<EnsuredBus> {
  const plan = opts.replicas ?? DEFAULT_REPLICAS;
  checkReplicas(plan, opts.serverInfo);
  const place = { plan, serverInfo: opts.serverInfo };
  for (const config of Object.values(STREAM_CONFIGS)) await ensureStream(jsm, config, logger, place);
  const kvm = new Kvm(jsm.jetstream());
  const replicas = plan.replicas;
  // Kvm.create opens the bucket when it exists already (its replicas unchanged: see `bucket`)
  const bucket = async (name: string, make: () => Promise<KV>): Promise<KV> => {
    let kv: KV;
    try {
      kv = await make();
    } catch (err) {
      throw placementError(err, replicas, opts.serverInfo) ?? err;
    }
    if (plan.scale) await scaleStream(jsm, await jsm.streams.info(`KV_${name}`), plan, opts.serverInfo, logger);
    return kv;
  };
  const actors = await bucket(BUCKETS.actors, () => kvm.create(BUCKETS.actors, { history: 1, storage: StorageType.File, replicas }));
  // Only a caller that owns the TTL (a host with its config) may change it; any other command
  // opening the bus must not reset a deployment's TTL to the default.
  const leases = await bucket(BUCKETS.leases, () => opts.leaseTtlMs === undefined
    ? kvm.create(BUCKETS.leases, { history: 1, storage: StorageType.File, ttl: DEFAULT_LEASE_TTL_MS, replicas })
    : ensureLeaseBucket(kvm, opts.leaseTtlMs, logger, replicas));
  const hosts = await bucket(BUCKETS.hosts, () => opts.leaseTtlMs === undefined
    ? kvm.create(BUCKETS.hosts, { history: 1, storage: StorageType.File, ttl: DEFAULT_LEASE_TTL_MS, replicas })
    : ensureHostsBucket(kvm, opts.leaseTtlMs, logger, replicas));
  await bucket(BUCKETS.resourceLeases, () =>
    kvm.create(BUCKETS.resourceLeases, { history: 1, storage: StorageType.File, ttl: DEFAULT_RESOURCE_LEASE_TTL_MS, replicas }));
  await bucket(BUCKETS.treeSlots, () => kvm.create(BUCKETS.treeSlots, { history: 1, storage: StorageType.File, replicas }));
  await bucket(BUCKETS.jobSlots, () => kvm.create(BUCKETS.jobSlots, { history: 1, storage: StorageType.File, replicas }));
  return { actors, leases, hosts };
}

/** Where a stream's copies go: the plan, and the server's INFO for the error when they cannot be placed. */
export interface StreamPlacement {
  plan: ReplicaPlan;
  serverInfo?: ServerInfo;
}

/** Creates one stream (with the plan's copies), or updates it when a wanted setting differs. */
export async function ensureStream(
  jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }, logger: Logger,
  place: StreamPlacement = { plan: DEFAULT_REPLICAS },
): Promise<StreamInfo> {
  let info: StreamInfo | undefined;
  try {
    info = await jsm.streams.info(config.name);
  } catch (err) {
    if (!isStreamNotFound(err)) throw wrap(err, config.name);
  }
  if (!info) {
    try {
      const created = await jsm.streams.add({ ...config, num_replicas: place.plan.replicas });
      logger.info({ stream: config.name, replicas: place.plan.replicas }, 'stream created');
      return created;
    } catch (err) {
      const placement = placementError(err, place.plan.replicas, place.serverInfo);
      if (placement) throw placement;
      // another process created it between our info and add: fall through to compare
      info = await jsm.streams.info(config.name).catch(() => { throw wrap(err, config.name); });
    }
  }
  info = await scaleStream(jsm, info, place.plan, place.serverInfo, logger);
  const diff = differingKeys(info.config, config);
  if (diff.length === 0) return info;
  const immutable = diff.filter((k) => IMMUTABLE.includes(k));
  if (immutable.length > 0) {
    throw new BusError('bus.stream_mismatch',
      `stream ${config.name} has ${immutable.join(', ')} that cannot be changed to what actorloop needs`,
      { hint: `recreate the stream ${config.name} (its data will be lost) or point NATS_URL at another server` });
  }
  logger.info({ stream: config.name, changed: diff }, 'stream settings differ; updating');
  try {
    return await jsm.streams.update(config.name, { ...info.config, ...config });
  } catch (err) {
    throw wrap(err, config.name);
  }
}

/** Keys of `wanted` whose value differs from `actual`. */
export function differingKeys(actual: StreamConfig, wanted: Partial<StreamConfig>): (keyof StreamConfig)[] {
  const out: (keyof StreamConfig)[] = [];
  for (const key of Object.keys(wanted) as (keyof StreamConfig)[]) {
    if (key === 'name') continue;
    // the server omits false booleans from the config it returns
    const a = actual[key] ?? (typeof wanted[key] === 'boolean' ? false : undefined);
    if (JSON.stringify(a) !== JSON.stringify(wanted[key])) out.push(key);
  }
  return out;
}

function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

function wrap(err: unknown, stream: string): BusError {
  if (err instanceof BusError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new BusError('bus.stream_failed', `cannot set up stream ${stream}: ${message}`, { cause: err, retryable: true });
}
