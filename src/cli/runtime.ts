import { pino, type Logger } from 'pino';
import { openBus, type Bus } from '../bus/connection.js';
import { createFaultInjector, parseFaultSpecs, type FaultInjector } from '../actors/faults.js';
import { Supervisor, type SupervisorOptions } from '../actors/supervisor.js';
import { environmentOf, redactedValues, secretOf, type EffectiveConfig } from '../config/config.js';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ToolingPorts } from '../actors/tooling.js';
import { createRedactor } from '../tools/redact.js';
import { findBubblewrap } from '../tools/sandbox.js';
import { createModelAdapter } from '../model/factory.js';
import { modelName } from '../actors/agent-effects.js';
import { priceFor } from '../model/pricing.js';
import { createLmdbBlobStore, type BlobStore } from '../store/blob-port.js';
import { createLogReader } from '../store/jetstream-log.js';
import type { LogReader } from '../store/log-port.js';
import { openLmdbStore, type LmdbStore } from '../store/lmdb-store.js';
import { createLmdbSnapshots, type SnapshotStore } from '../store/snapshots.js';
import { builtinTools } from '../tools/builtins/index.js';
import { createToolRegistry, type ToolRegistry } from '../tools/registry.js';

/** Everything a command needs, opened once and closed once. */
export interface Runtime {
  config: EffectiveConfig;
  logger: Logger;
  bus: Bus;
  lmdb: LmdbStore;
  blobs: BlobStore;
  snapshots: SnapshotStore;
  reader: LogReader;
  tools: ToolRegistry;
  /** The tool pipeline's policy, sandbox and redaction, from the config. */
  tooling: ToolingPorts;
  faults: FaultInjector;
  /** A supervisor hosting agents in this process. */
  supervisor(extra?: Partial<SupervisorOptions>): Supervisor;
  close(): Promise<void>;
}

/** The logger of a command: pino to stderr, since stdout belongs to `--json` output. */
export function createLogger(config: EffectiveConfig): Logger {
  return pino(
    { level: config.logLevel, base: undefined, redact: { paths: ['*.apiKey', '*.authorization', 'apiKey'], censor: '[redacted]' } },
    pino.destination(2),
  );
}

/** Opens the bus (embedded nats-server unless a URL is set), LMDB, and the tools. */
export async function openRuntime(config: EffectiveConfig, logger: Logger): Promise<Runtime> {
  const faults = createFaultInjector(parseFaultSpecs(config.faults), logger);
  const bus = await openBus({
    natsUrl: config.natsUrl,
    dataDir: config.dataDir,
    logger,
    name: 'actorloop',
    ...(config.natsServerBinary ? { binary: config.natsServerBinary } : {}),
  });
  let lmdb: LmdbStore;
  try {
    lmdb = openLmdbStore(config.dataDir);
  } catch (err) {
    await bus.close();
    throw err;
  }
  const blobs = createLmdbBlobStore(lmdb);
  const snapshots = createLmdbSnapshots(lmdb, logger);
  const tooling = await toolingFor(config);
  const tools = createToolRegistry(builtinTools({ redactor: tooling.redactor }));
  const reader = createLogReader({ js: bus.js, jsm: bus.jsm });
  const supervisors: Supervisor[] = [];
  return {
    config,
    logger,
    bus,
    lmdb,
    blobs,
    snapshots,
    reader,
    tools,
    tooling,
    faults,
    supervisor(extra = {}) {
      const s = new Supervisor({
        bus,
        blobs,
        snapshots,
        tools,
        tooling,
        faults,
        logger,
        snapshotEvery: config.snapshotEvery,
        pricing: (model) => priceFor(model, config.pricing),
        modelFor: (settings, cursor) =>
          createModelAdapter(settings.model, {
            cursor,
            baseUrl: settings.baseUrl,
            apiKey: secretOf(config, 'OPENAI_API_KEY'),
            capabilities: config.capabilities[modelName(settings.model)] ?? {},
          }),
        ...extra,
      });
      supervisors.push(s);
      return s;
    },
    async close() {
      for (const s of supervisors) await s.stop();
      await bus.close();
      await blobs.flush();
      await lmdb.close();
    },
  };
}

/** The tool pipeline's ports from the config: rules, bubblewrap if it works here, the environment, redaction. */
export async function toolingFor(config: EffectiveConfig): Promise<ToolingPorts> {
  const env = environmentOf(config);
  const home = env.HOME || homedir();
  return {
    rules: () => config.policyRules,
    bwrapPath: await findBubblewrap(env.PATH),
    env,
    redactor: createRedactor(redactedValues(config)),
    observationBudgetBytes: config.observationBudgetBytes,
    approvalTtlMs: config.approvalTtlMs,
    maxParallelCalls: config.maxParallelCalls,
    // what a sandboxed command must not read: the runtime's own store and the user's keys
    hiddenPaths: [config.dataDir, ...['.ssh', '.aws', '.gnupg', '.config/actorloop', '.docker', '.kube'].map((d) => join(home, d))],
  };
}
