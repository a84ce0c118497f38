import { pino, type Logger } from 'pino';
import type { Bus, OpenBusOptions } from '../bus/connection.js';
import type { NatsCredentials, NatsRole } from '../bus/nats-auth.js';
import { createFaultInjector, parseFaultSpecs, type ArmableFaultInjector } from '../actors/faults/faults.js';
import { createFileFaultRecords } from '../actors/faults/fault-records.js';
import { Supervisor, type SupervisorOptions } from '../actors/hosting/supervisor.js';
import { compose, modelsFromSpecs } from '../actors/composition.js';
import { configFilePaths, environmentOf, redactedValues, secretOf, type EffectiveConfig } from '../config/config.js';
import { writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRipgrepRetriever } from '../knowledge/ripgrep-retriever.js';
import type { ToolingPorts } from '../actors/agent/tooling.js';
import { createRedactor } from '../tools/redact.js';
import { createPolicySource } from '../config/turn-policy.js';
import { findBubblewrap } from '../tools/sandbox.js';
import type { Lease, LeaseStore } from '../bus/leases.js';
import type { HostPresence } from '../bus/hosts.js';
import { LeaseKeeper, localHolder } from '../actors/hosting/lease-keeper.js';
import { DirectoryStatuses } from '../actors/hosting/directory-status.js';
import { InspectionFeed } from '../actors/hosting/inspection-feed.js';
import { listenForWatches, type Closable } from '../bus/inspection.js';
import { ConfigError, agentNotFound } from '../protocol/errors.js';
import { priceFor } from '../model/pricing.js';
import type { BlobStore } from '../store/blob-port.js';
import { createLogReader } from '../store/jetstream-log.js';
import type { LogReader } from '../store/log-port.js';
import type { LmdbStore } from '../store/lmdb-store.js';
import type { SnapshotStore } from '../store/snapshots.js';
import { builtinTools } from '../tools/builtins/index.js';
import { cliLine } from './hints.js';
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
  /** `--fault` and `ACTORLOOP_FAULTS`; a host with `--allow-faults` arms fault orders in it too. */
  faults: ArmableFaultInjector;
  /** Leases of the `leases` bucket: which process hosts which agent. */
  leases: LeaseStore;
  /** The `hosts` bucket: which `actorloop host` processes run and take work. */
  hosts: HostPresence;
  /**
   * Takes the lease of an agent this command hosts in-process and keeps it until `close`; a
   * ConfigError naming the holder when a host process (or another command) runs the agent.
   */
  pin(actorId: string): Promise<Lease>;
  /** `pin` for an agent this command is about to create (not in the directory yet). */
  pinNew(actorId: string): Promise<Lease>;
  /** Releases a lease `pin` took, so a host may take the agent at once. */
  unpin(actorId: string): Promise<void>;
  /** A supervisor hosting agents in this process. */
  supervisor(extra?: Partial<SupervisorOptions>): Supervisor;
  /**
   * The directory's status of the agents a command hosts here beside its own, kept from their
   * commits (a host process keeps its own): a command's follower records its agent's turn end,
   * and nothing else would record its children's. `close` waits for the writes.
   */
  statuses: DirectoryStatuses;
  close(): Promise<void>;
}

/** The logger of a command: pino to stderr, since stdout belongs to `--json` output. */
export function createLogger(config: EffectiveConfig): Logger {
  return pino(
    { level: config.logLevel, base: undefined, redact: { paths: ['*.apiKey', '*.authorization', 'apiKey'], censor: '[redacted]' } },
    pino.destination(2),
  );
}

/** How a command logs in to a server given by URL: a .creds file, NATS_USER / NATS_PASSWORD or NATS_TOKEN. */
export function natsCredentialsOf(config: EffectiveConfig): NatsCredentials {
  switch (config.natsLogin) {
    case 'none':
      return { kind: 'none' };
    case 'creds':
      return { kind: 'creds', file: config.natsCreds! };
    case 'user':
      return { kind: 'user', user: secretOf(config, 'NATS_USER'), pass: secretOf(config, 'NATS_PASSWORD') };
    case 'token':
      return { kind: 'token', token: secretOf(config, 'NATS_TOKEN') };
  }
}

/**
 * The bus options of a command: who it is on the bus (`host` hosts agents and may speak for the
 * person at the keyboard on a second, client login; `client` only reads and speaks for a person).
 */
export function busOptions(config: EffectiveConfig, logger: Logger, name: string, role: NatsRole, person = true): OpenBusOptions {
  return {
    natsUrl: config.natsUrl,
    dataDir: config.dataDir,
    logger,
    name,
    role,
    person,
    credentials: natsCredentialsOf(config),
    // scaled only when named: a command run with the default leaves an operator's streams as they are
    replicas: { replicas: config.replicas, scale: config.sources.replicas !== undefined && config.sources.replicas !== 'default' },
    ...(config.natsServerBinary ? { binary: config.natsServerBinary } : {}),
    ...pathOf(config),
  };
}

/** The PATH the nats-server binary is looked up on: the one of the config's environment. */
function pathOf(config: EffectiveConfig): { pathEnv?: string } {
  const path = environmentOf(config).PATH;
  return path === undefined ? {} : { pathEnv: path };
}

/** Options of `openRuntime`. */
export interface OpenRuntimeOptions {
  /** The TTL a host sets on the leases and hosts buckets. */
  leaseTtlMs?: number;
  /** `client`: a command that hosts nothing (events, runs, verify). Default `host`. */
  role?: NatsRole;
  /** False for a host process: it never speaks for a person. */
  person?: boolean;
  /** The name its live inspection reports give this process (a host's `--name`; default its lease holder name). */
  hostName?: string;
}

/** Opens the bus (embedded nats-server unless a URL is set), LMDB, and the tools. */
export async function openRuntime(config: EffectiveConfig, logger: Logger, opts: OpenRuntimeOptions = {}): Promise<Runtime> {
  // a kill leaves the point it fired at in the data dir; whoever recovers the agent here reads it
  const faultRecords = createFileFaultRecords(join(config.dataDir, 'faults'));
  const faults = createFaultInjector(parseFaultSpecs(config.faults), logger, faultRecords, ({ point, actorId }) => {
    // written at once (writeSync): the SIGKILL comes right after, before any stream could flush
    writeSync(2, `fault ${point}: killing this process; ${cliLine(config, 'resume', actorId)} carries the turn on\n`);
  }, ({ point, actorId, action }) => {
    // a kill says its own line just before it fires
    if (action !== 'kill') writeSync(2, `fault ${point}: ${action} injected into ${actorId}\n`);
  });
  const tooling = await toolingFor(config);
  const tools = createToolRegistry(builtinTools({ redactor: tooling.redactor }));
  const composition = await compose({
    bus: busOptions(config, logger, 'actorloop', opts.role ?? 'host', opts.person ?? true),
    dataDir: config.dataDir,
    logger,
    tools,
    tooling,
    faults,
    faultRecords,
    snapshotEvery: config.snapshotEvery,
    pricing: (model) => priceFor(model, config.pricing),
    modelFor: modelsFromSpecs(secretOf(config, 'OPENAI_API_KEY'), config.capabilities),
    subagentLimits: config.subagents,
    jobLimits: config.jobs,
    leases: opts.leaseTtlMs ? { ttlMs: opts.leaseTtlMs } : {},
  });
  const { bus, lmdb, blobs, snapshots, leases, hosts } = composition;
  const reader = createLogReader({ js: bus.js, jsm: bus.jsm });
  const supervisors: Supervisor[] = [];
  const statuses = new DirectoryStatuses(bus.directory, logger);
  const holder = localHolder();
  // The live inspection feed of the agents hosted here: one subscription to watch requests, made
  // with the first supervisor (a command that hosts nothing never listens). Only a host login may
  // report what a machine did (the server refuses a client's report).
  let feed: { feed: InspectionFeed; watches: Closable } | null = null;
  const listenForWatchers = (): void => {
    if (feed || bus.role !== 'host') return;
    const f = new InspectionFeed({
      host: opts.hostName ?? holder,
      live: bus.live,
      agents: {
        rootOf: (id) => supervisors.find((s) => s.hosts(id))?.rootOf(id),
        refOf: (id) => supervisors.find((s) => s.hosts(id))?.refOf(id),
      },
    });
    feed = { feed: f, watches: listenForWatches(bus.nc, (id, hello) => f.watch(id, hello), logger) };
  };
  const keeper = new LeaseKeeper(leases, holder, logger, (actorId, err) => {
    for (const s of supervisors) s.evict(actorId, err);
  });
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
    leases,
    hosts,
    async pin(actorId) {
      if (!(await bus.directory.get(actorId))) {
        throw agentNotFound(actorId);
      }
      const lease = await keeper.take(actorId);
      if (lease) return lease;
      const other = await keeper.holderOf(actorId);
      throw new ConfigError('cli.hosted_elsewhere', `${actorId} is being run by ${other?.host ?? 'another process'}`, {
        hint: `follow it with: ${cliLine(config, 'events', actorId, '--follow')}, or \`${cliLine(config, 'resume', actorId)}\` without --in-process when a host runs it (its lease lapses ${Math.round(leases.ttlMs / 1000)} s after its holder stops)`,
      });
    },
    async pinNew(actorId) {
      const lease = await keeper.take(actorId);
      if (!lease) throw new ConfigError('cli.hosted_elsewhere', `${actorId} is already leased`, { hint: 'this is a bug: a new agent ID was taken' });
      return lease;
    },
    unpin(actorId) {
      return keeper.release(actorId);
    },
    statuses,
    supervisor(extra = {}) {
      const s = new Supervisor(composition.supervisorOptions({ hostId: opts.hostName ?? holder, ...extra }));
      listenForWatchers();
      // the children its agents spawn run here too, under leases this command keeps until it closes
      s.setAdopter(async (actorId) => (await keeper.take(actorId))?.epoch ?? null);
      s.setReleaser((actorId) => keeper.release(actorId));
      supervisors.push(s);
      return s;
    },
    async close() {
      feed?.watches.close();
      feed?.feed.close();
      for (const s of supervisors) await s.stop();
      await statuses.settled();
      await keeper.releaseAll();
      await composition.close();
    },
  };
}

/** The tool pipeline's ports from the config: rules, bubblewrap if it works here, the environment, redaction. */
export async function toolingFor(config: EffectiveConfig): Promise<ToolingPorts> {
  const env = environmentOf(config);
  const home = env.HOME || homedir();
  const userConfigDir = dirname(configFilePaths(config.workspace.dir, env).user);
  return {
    // the turn's own workspace and the user's file as they are now, never this process's directory
    policy: createPolicySource(config),
    bwrapPath: await findBubblewrap(env.PATH),
    env,
    redactor: createRedactor(redactedValues(config)),
    observationBudgetBytes: config.observationBudgetBytes,
    approvalTtlMs: config.approvalTtlMs,
    askTtlMs: config.askTtlMs,
    maxParallelCalls: config.maxParallelCalls,
    interruptFollowUps: config.interruptFollowUps,
    // what a sandboxed command must not read: the runtime's own store, the user's keys and memory
    hiddenPaths: [config.dataDir, userConfigDir, ...['.ssh', '.aws', '.gnupg', '.config/actorloop', '.docker', '.kube'].map((d) => join(home, d))],
    userConfigDir,
    // ripgrep as found on the tool environment's PATH (never one inside a workspace)
    retriever: createRipgrepRetriever({ ...(env.PATH ? { searchPath: env.PATH } : {}) }),
  };
}
