import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { createFaultInjector } from '../src/actors/faults/faults.js';
import { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createJetStreamPorts } from '../src/actors/hosting/supervisor-ports.js';
import { openBus, type Bus } from '../src/bus/connection.js';
import { startNatsServer, type NatsServerHandle } from '../src/bus/nats-server.js';
import type { ModelAdapter } from '../src/model/model-port.js';
import type { ActorEvent, TurnRequest, TurnSettings } from '../src/protocol/events.js';
import { ensureBlobBucket } from '../src/bus/blob-bucket.js';
import { createLmdbBlobStore, type BlobStore } from '../src/store/blob-port.js';
import { createCachedBlobStore } from '../src/store/cached-blobs.js';
import { createObjectBlobStore } from '../src/store/object-blobs.js';
import { openLmdbStore, type LmdbStore } from '../src/store/lmdb-store.js';
import { createLmdbSnapshots, type SnapshotStore } from '../src/store/snapshots.js';
import { createToolRegistry, type ToolRegistry } from '../src/tools/registry.js';
import { echoTool } from './echo-tool.js';

/** Undo steps run last-in first-out, once, whether the bench ends well, throws or is interrupted. */
export class Cleanup {
  private readonly steps: Array<{ what: string; run: () => Promise<unknown> }> = [];
  private running: Promise<void> | undefined;

  /** True once `run` has started (Ctrl-C): a section should start nothing more. */
  get closing(): boolean {
    return this.running !== undefined;
  }

  /** Registers an undo step. */
  add(what: string, run: () => Promise<unknown>): void {
    this.steps.push({ what, run });
  }

  /**
   * Runs every step (later ones first); a failing step is reported and the rest still run. A step
   * added while this runs (a piece that was still starting when Ctrl-C came) is run too.
   */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (let step = this.steps.pop(); step; step = this.steps.pop()) {
        try {
          await step.run();
        } catch (err) {
          process.stderr.write(`cleanup: ${step.what} failed: ${(err as Error).message}\n`);
        }
      }
    })();
    return this.running;
  }
}

/** The in-process actorloop the bench drives: a private nats-server, a bus, LMDB, the echo tool. */
export interface BenchRuntime {
  /** The server the runtime's bus is on: the bench's own, or `NATS_URL`'s (its pid then unknown: no server CPU is read). */
  nats: Pick<NatsServerHandle, 'url'> & { pid: number | undefined };
  bus: Bus;
  lmdb: LmdbStore;
  blobs: BlobStore;
  snapshots: SnapshotStore;
  tools: ToolRegistry;
  /** An empty temp dir every turn names as its workspace (echo never touches it). */
  workspace: string;
  logger: Logger;
  /** A supervisor with the bench's model and commit hook; stopped by the cleanup if still running. */
  supervisor(opts: SupervisorHooks): Supervisor;
}

/** What differs between the supervisors of the bench's runs. */
export interface SupervisorHooks {
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  onCommit(actorId: string, events: ActorEvent[]): void;
  snapshotEvery?: number;
  /** The tools the supervisor's agents may call (default: the runtime's, echo alone). */
  tools?: ToolRegistry;
}

/** A fresh temp dir, removed by `cleanup`. */
export async function tempDir(prefix: string, cleanup: Cleanup): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `actorloop-bench-${prefix}-`));
  cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Starts nats-server (loopback, free port, temp store), or connects to `NATS_URL` when it is set
 * (a cluster, e.g., whose streams' replicas are its own business), then opens the bus and LMDB in
 * temp dirs. Every piece registers its undo on `cleanup` as soon as it exists.
 */
export async function openBenchRuntime(cleanup: Cleanup): Promise<BenchRuntime> {
  // warnings and errors go to stderr: a failing actor must not pass silently as a slow one
  const logger = pino({ level: process.env.BENCH_LOG ?? 'warn' }, pino.destination(2));
  const storeDir = await tempDir('nats', cleanup);
  const dataDir = await tempDir('data', cleanup);
  const workspace = await tempDir('ws', cleanup);
  const given = process.env.NATS_URL;
  let nats: BenchRuntime['nats'];
  if (given) {
    nats = { url: given, pid: undefined };
  } else {
    const own = await startNatsServer({ storeDir, logger });
    cleanup.add('stop nats-server', () => own.stop());
    nats = own;
  }
  // ACTORLOOP_REPLICAS (on a cluster): the copies the streams and buckets the bench makes get
  const replicas = Number(process.env.ACTORLOOP_REPLICAS ?? 1);
  const bus = await openBus({ natsUrl: nats.url, dataDir, logger, name: 'actorloop-bench', replicas: { replicas, scale: false } });
  cleanup.add('close bus', () => bus.close());
  const lmdb = openLmdbStore(dataDir);
  cleanup.add('close lmdb', () => lmdb.close());
  // as a host keeps them: the Object Store with LMDB as its cache; BENCH_BLOBS=lmdb keeps them
  // in LMDB alone (a host before blobs moved to the bus), to price the move on the same code
  const cache = createLmdbBlobStore(lmdb);
  const blobs = process.env.BENCH_BLOBS === 'lmdb'
    ? cache
    : createCachedBlobStore({ durable: await objectBlobs(bus, logger), cache, logger });
  cleanup.add('flush blobs', () => blobs.flush());
  const snapshots = createLmdbSnapshots(lmdb, logger);
  const tools = createToolRegistry([echoTool]);
  return {
    nats, bus, lmdb, blobs, snapshots, tools, workspace, logger,
    supervisor(hooks) {
      const s = new Supervisor({
        ports: createJetStreamPorts(bus), blobs, snapshots, tools: hooks.tools ?? tools, logger,
        faults: createFaultInjector([]),
        snapshotEvery: hooks.snapshotEvery ?? 64,
        modelFor: hooks.modelFor,
        onCommit: hooks.onCommit,
      });
      // stop() is idempotent: a run that ended normally already stopped it
      cleanup.add('stop supervisor', () => s.stop());
      return s;
    },
  };
}

/** The turn request every bench agent gets: only `echo` visible, room for every step. */
export function benchTurnRequest(workspace: string, maxSteps: number): TurnRequest {
  return {
    model: 'scripted:inline',
    baseUrl: null,
    workspace,
    tools: ['echo'],
    instructions: null,
    maxSteps,
    maxToolCalls: null,
    deadlineSeconds: null,
    maxAttempts: null,
  };
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The blob bucket's store, as a host opens it. */
async function objectBlobs(bus: Bus, logger: Logger): Promise<ReturnType<typeof createObjectBlobStore>> {
  await ensureBlobBucket(bus.js, { replicas: bus.replicas });
  return createObjectBlobStore({ publish: bus.logJs.publish, jsm: bus.jsm, logger });
}
