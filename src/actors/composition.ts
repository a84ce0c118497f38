import { Kvm } from '@nats-io/kv';
import type { Logger } from 'pino';
import { ensureBlobBucket } from '../bus/blob-bucket.js';
import { scaleStream } from '../bus/replicas.js';
import { openBus, type Bus, type OpenBusOptions } from '../bus/connection.js';
import { createKvHostPresence, ensureHostsBucket, type HostPresence } from '../bus/hosts.js';
import { createKvLeaseStore, DEFAULT_LEASE_TTL_MS, ensureLeaseBucket, type LeaseStore } from '../bus/leases.js';
import { createMemoryResourceLeases } from '../bus/memory-resource-leases.js';
import { createKvResourceLeases, ensureResourceLeaseBucket, type ResourceLeaseStore } from '../bus/resource-leases.js';
import { BLOB_STREAM, BUCKETS } from '../bus/subjects.js';
import { createModelAdapter } from '../model/factory.js';
import type { ModelAdapter, ModelCapabilities } from '../model/model-port.js';
import { modelName } from '../model/model-spec.js';
import type { TurnSettings } from '../protocol/events.js';
import { createLmdbBlobStore, type BlobStore } from '../store/blob-port.js';
import { uploadLmdbBlobs, type BlobUploadResult } from '../store/blob-upload.js';
import { createCachedBlobStore } from '../store/cached-blobs.js';
import { openLmdbStore, type LmdbStore } from '../store/lmdb-store.js';
import { createMemoryBlobStore } from '../store/memory-blobs.js';
import { createObjectBlobStore } from '../store/object-blobs.js';
import { createLmdbSnapshots, type SnapshotStore } from '../store/snapshots.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { InspectObserver } from './actor/agent-logic.js';
import type { ToolingPorts } from './agent/tooling.js';
import type { FaultInjector } from './faults/faults.js';
import type { FaultRecords } from './faults/fault-records.js';
import type { SupervisorOptions } from './hosting/supervisor.js';
import { createJetStreamPorts, createMemoryPorts, type SupervisorPorts } from './hosting/supervisor-ports.js';
import { createGitWorktrees, worktreeSandbox, type GitWorktrees } from './tree/git-worktrees.js';

// The one place a process puts together what hosts agents: the bus and the stores, the ports a
// supervisor runs on, the leases and host presence, and the options every supervisor gets. The
// embedding runtime (`createRuntime`) and every CLI command (`openRuntime`) are built on it, so
// they differ only in what they are given (a config, or an embedder's options), never in how it
// is wired.

/** What a process hosts agents with; `compose` opens it. */
export interface CompositionOptions {
  /**
   * The bus to open (logs, inboxes, buckets and blobs in JetStream, snapshots and a cache of the
   * blobs in LMDB under `dataDir`); null: all in memory.
   */
  bus: OpenBusOptions | null;
  /** Where LMDB (with a bus) and git worktrees live; without one, a throwaway process has no worktrees. */
  dataDir?: string;
  logger: Logger;
  tools: ToolRegistry;
  tooling: ToolingPorts;
  faults: FaultInjector;
  /** Where a fault that kills leaves the point it fired at (default: this process's memory). */
  faultRecords?: FaultRecords;
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  pricing: NonNullable<SupervisorOptions['pricing']>;
  snapshotEvery?: number;
  subagentLimits?: SupervisorOptions['subagentLimits'];
  jobLimits?: SupervisorOptions['jobLimits'];
  inspect?: InspectObserver;
  /**
   * Opens the `leases` and `hosts` buckets (needs a bus): `ttlMs` sets their TTL (a host's),
   * absent it is read from the bucket the bus made.
   */
  leases?: { ttlMs?: number };
}

/** The parts `compose` opened, and how to build a supervisor on them. */
export interface Composition {
  /** Null in memory. */
  bus: Bus | null;
  lmdb: LmdbStore | null;
  /**
   * A host's on a bus: the Object Store with this data dir's LMDB as its cache. A client's (which
   * may not read the bucket): this data dir's LMDB alone, what hosts here cached.
   */
  blobs: BlobStore;
  /** A host's one-time upload of this data dir's older LMDB blobs to the Object Store; null when none runs. */
  blobUpload: Promise<BlobUploadResult | null> | null;
  snapshots: SnapshotStore | null;
  /** With `leases` in the options: which process hosts which agent, and which hosts run. */
  leases: LeaseStore | null;
  hosts: HostPresence | null;
  /** Options of a supervisor hosting agents here, `extra` over them; on a bus each gets ports of its own. */
  supervisorOptions(extra?: Partial<SupervisorOptions>): SupervisorOptions;
  /** Closes the bus and the stores: after the supervisors built on them stopped. */
  close(): Promise<void>;
}

/** A composition on a bus that opened the `leases` and `hosts` buckets: every part is there. */
export interface HostComposition extends Composition {
  bus: Bus;
  lmdb: LmdbStore;
  snapshots: SnapshotStore;
  leases: LeaseStore;
  hosts: HostPresence;
}

/** Opens the bus and the stores (or the memory ones) and wires them; what it opened is closed again when a later step fails. */
export async function compose(opts: CompositionOptions & { bus: OpenBusOptions; leases: { ttlMs?: number } }): Promise<HostComposition>;
export async function compose(opts: CompositionOptions): Promise<Composition>;
export async function compose(opts: CompositionOptions): Promise<Composition> {
  const { logger } = opts;
  if (opts.bus === null) {
    const ports = createMemoryPorts();
    const blobs = createMemoryBlobStore();
    return wired(opts, { bus: null, lmdb: null, blobs, blobUpload: null, snapshots: null, leases: null, hosts: null }, () => ports, createMemoryResourceLeases(), async () => {
      await blobs.flush();
    });
  }
  const bus = await openBus(opts.bus);
  let lmdb: LmdbStore;
  try {
    lmdb = openLmdbStore(opts.bus.dataDir);
  } catch (err) {
    await bus.close();
    throw err;
  }
  const cache = createLmdbBlobStore(lmdb);
  const snapshots = createLmdbSnapshots(lmdb, logger);
  let buckets: { leases: LeaseStore; hosts: HostPresence } | null = null;
  let blobs: BlobStore = cache;
  let blobUpload: Promise<BlobUploadResult | null> | null = null;
  const stopUpload = new AbortController();
  try {
    if (bus.role === 'host') {
      const bucket = await ensureBlobBucket(bus.js, { replicas: bus.replicas });
      // a bucket made with fewer copies than the setting names is scaled as the streams are
      await scaleStream(bus.jsm, await bus.jsm.streams.info(BLOB_STREAM), bus.replicaPlan, bus.nc.info, logger);
      const durable = createObjectBlobStore({ publish: bus.logJs.publish, jsm: bus.jsm, logger });
      blobs = createCachedBlobStore({ durable, cache, logger });
      // off the start's path: until it is done this host's cache still holds what it uploads
      blobUpload = uploadLmdbBlobs({ lmdb, durable, bucket: bucket.created, logger, signal: stopUpload.signal }).catch((err: unknown) => {
        logger.warn({ err }, 'older blobs of this data dir not uploaded to the Object Store; the next start tries again');
        return null;
      });
    }
    if (opts.leases) buckets = await openHostBuckets(bus, opts.leases.ttlMs, logger);
  } catch (err) {
    stopUpload.abort();
    await blobUpload;
    await bus.close();
    await lmdb.close();
    throw err;
  }
  // the bucket is made on the first call of a tree that writes: a process that hosts no tree never touches it
  const resourceLeases = createKvResourceLeases({ kv: () => ensureResourceLeaseBucket(new Kvm(bus.js), undefined, logger), logger });
  return wired(opts, { bus, lmdb, blobs, blobUpload, snapshots, leases: buckets?.leases ?? null, hosts: buckets?.hosts ?? null }, () => createJetStreamPorts(bus), resourceLeases, async () => {
    stopUpload.abort();
    await blobUpload;
    // the connection first: a blob write still in flight (its commit will not be made now) ends
    // with it, instead of waiting for a server that may be gone
    await bus.close();
    await blobs.flush();
    await lmdb.close();
  });
}

/** The composition of opened parts: the supervisor options every supervisor of the process shares. */
function wired(
  opts: CompositionOptions, parts: Omit<Composition, 'supervisorOptions' | 'close'>, portsFor: () => SupervisorPorts,
  resourceLeases: ResourceLeaseStore, close: () => Promise<void>,
): Composition {
  const worktrees: GitWorktrees | undefined = opts.dataDir === undefined
    ? undefined
    : createGitWorktrees({ dataDir: opts.dataDir, env: opts.tooling.env, sandbox: worktreeSandbox(opts.tooling) });
  return {
    ...parts,
    supervisorOptions: (extra = {}) => ({
      ports: portsFor(),
      blobs: parts.blobs,
      snapshots: parts.snapshots,
      tools: opts.tools,
      tooling: opts.tooling,
      faults: opts.faults,
      ...(opts.faultRecords ? { faultRecords: opts.faultRecords } : {}),
      logger: opts.logger,
      ...(opts.snapshotEvery !== undefined ? { snapshotEvery: opts.snapshotEvery } : {}),
      pricing: opts.pricing,
      modelFor: opts.modelFor,
      ...(opts.subagentLimits ? { subagentLimits: opts.subagentLimits } : {}),
      ...(opts.jobLimits ? { jobLimits: opts.jobLimits } : {}),
      ...(opts.inspect ? { inspect: opts.inspect } : {}),
      ...(worktrees ? { worktrees } : {}),
      resourceLeases,
      ...extra,
    }),
    close,
  };
}

/** The `leases` and `hosts` buckets: only a host sets their TTL; every other process reads it (the bus created them). */
async function openHostBuckets(bus: Bus, ttlMs: number | undefined, logger: Logger): Promise<{ leases: LeaseStore; hosts: HostPresence }> {
  const kvm = new Kvm(bus.js);
  const kv = ttlMs ? await ensureLeaseBucket(kvm, ttlMs, logger) : await kvm.open(BUCKETS.leases);
  const ttl = ttlMs ?? ((await kv.status()).ttl || DEFAULT_LEASE_TTL_MS);
  const leases = createKvLeaseStore(kv, { ttlMs: ttl, logger });
  const hosts = createKvHostPresence(ttlMs ? await ensureHostsBucket(kvm, ttlMs, logger) : await kvm.open(BUCKETS.hosts), logger);
  return { leases, hosts };
}

/** A turn's model from its spec: the key of `openai:` models and what each model can do (by model name). */
export function modelsFromSpecs(apiKey: string, capabilities: Record<string, Partial<ModelCapabilities>>): CompositionOptions['modelFor'] {
  return (settings, cursor) =>
    createModelAdapter(settings.model, {
      cursor,
      ...(settings.agentName ? { agentName: settings.agentName } : {}),
      baseUrl: settings.baseUrl,
      apiKey,
      capabilities: capabilities[modelName(settings.model)] ?? {},
    });
}
