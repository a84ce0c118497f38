import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, type FaultInjector } from '../../src/actors/faults/faults.js';
import { createFileFaultRecords, type FaultRecords } from '../../src/actors/faults/fault-records.js';
import { Supervisor, type SupervisorOptions } from '../../src/actors/hosting/supervisor.js';
import { createJetStreamPorts, createMemoryPorts, type MemoryPorts, type SupervisorPorts } from '../../src/actors/hosting/supervisor-ports.js';
import { openBus, type Bus } from '../../src/bus/connection.js';
import type { ModelAdapter } from '../../src/model/model-port.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, TurnRequest, TurnSettings } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createLmdbBlobStore, type BlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import { createLmdbSnapshots, type SnapshotStore } from '../../src/store/snapshots.js';
import { builtinTools } from '../../src/tools/builtins/index.js';
import { createToolRegistry, type ToolRegistry } from '../../src/tools/registry.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { tempDir } from './nats.js';

/**
 * An in-process actorloop on a real LMDB in a temp dir, and either a real nats-server
 * (`NatsTestRuntime`) or in-memory ports shared by the runtimes opened on them.
 */
export interface TestRuntime {
  /** What its supervisors host agents on. */
  ports: SupervisorPorts;
  lmdb: LmdbStore;
  blobs: BlobStore;
  snapshots: SnapshotStore;
  tools: ToolRegistry;
  dataDir: string;
  /** Where this runtime's faults leave records and its supervisors read them (`<dataDir>/faults`). */
  faultRecords: FaultRecords;
  /** Every commit seen, per actor, in order. */
  commits: Map<string, ActorEvent[][]>;
  /** A supervisor whose models come from `models` (by actor ID) or `script`. */
  supervisor(opts?: { faults?: FaultInjector; snapshotEvery?: number; extra?: Partial<SupervisorOptions> }): Supervisor;
  close(): Promise<void>;
}

/** A test runtime on a real nats-server. */
export interface NatsTestRuntime extends TestRuntime {
  bus: Bus;
}

/** Options of `openTestRuntime`. */
export interface TestRuntimeOptions {
  /** A real nats-server to run on; without it the runtime runs on `memory` (or ports of its own). */
  natsUrl?: string;
  /** In-memory ports to share with other runtimes, as hosts share one server. */
  memory?: MemoryPorts;
  /** Responses every scripted model replays (a fresh adapter per turn, at the log's cursor). */
  script?: ScriptResponse[];
  /** Extra tools besides the built-ins. */
  tools?: ToolDefinition<any>[];
  /** Builds the model of a turn; default: a scripted model over `script`. */
  modelFor?(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
}

/** Opens a bus on `natsUrl` (or in-memory ports without one) and an LMDB in a fresh temp data dir. */
export async function openTestRuntime(opts: TestRuntimeOptions & { natsUrl: string }): Promise<NatsTestRuntime>;
export async function openTestRuntime(opts: TestRuntimeOptions): Promise<TestRuntime>;
export async function openTestRuntime(opts: TestRuntimeOptions): Promise<TestRuntime | NatsTestRuntime> {
  const dataDir = await tempDir('data');
  const logger = pino({ level: 'silent' });
  const bus = opts.natsUrl ? await openBus({ natsUrl: opts.natsUrl, dataDir, logger }) : undefined;
  const ports = bus ? createJetStreamPorts(bus) : (opts.memory ?? createMemoryPorts());
  const lmdb = openLmdbStore(dataDir);
  const blobs = createLmdbBlobStore(lmdb);
  const snapshots = createLmdbSnapshots(lmdb, logger);
  const tools = createToolRegistry([...builtinTools(), ...(opts.tools ?? [])]);
  const commits = new Map<string, ActorEvent[][]>();
  const supervisors: Supervisor[] = [];
  const modelFor =
    opts.modelFor ??
    (async (_s: TurnSettings, cursor: number) => createScriptedModel({ responses: opts.script ?? [], cursor }));
  const faultRecords = createFileFaultRecords(join(dataDir, 'faults'));
  let closing: Promise<void> | undefined;
  return {
    ...(bus ? { bus } : {}),
    ports,
    lmdb,
    blobs,
    snapshots,
    tools,
    dataDir,
    faultRecords,
    commits,
    supervisor(o = {}) {
      const s = new Supervisor({
        ports,
        blobs,
        snapshots,
        tools,
        logger,
        faults: o.faults ?? createFaultInjector([]),
        faultRecords,
        snapshotEvery: o.snapshotEvery ?? 64,
        modelFor,
        onCommit: (id, events) => {
          const list = commits.get(id) ?? [];
          list.push(events);
          commits.set(id, list);
        },
        ...o.extra,
      });
      supervisors.push(s);
      return s;
    },
    // once, however often it is called: a test may close a runtime its fixture closes too
    close() {
      closing ??= (async () => {
        for (const s of supervisors) await s.stop();
        await bus?.close();
        await blobs.flush();
        await lmdb.close();
        await rm(dataDir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}

/**
 * A turn request with test defaults. The run mode is `auto-edit`, so scripts that write files
 * run unattended as before policies existed; approval tests ask for `ask` themselves.
 */
export function turnRequest(workspace: string, over: Partial<TurnRequest> = {}): TurnRequest {
  return {
    approvalMode: 'auto-edit',
    model: 'scripted:inline',
    baseUrl: null,
    workspace,
    tools: null,
    instructions: null,
    maxSteps: null,
    maxToolCalls: null,
    deadlineSeconds: null,
    maxAttempts: null,
    ...over,
  };
}

/** Creates an agent, sends it `task` through its inbox, and waits for the turn to end. */
export async function runTurn(
  supervisor: Supervisor,
  task: string,
  request: TurnRequest,
): Promise<{ actor: AgentActor; ended: TurnEnded }> {
  const actorId = newId('agent');
  const actor = await supervisor.create({
    actorId, kind: 'agent', parentId: null, rootId: actorId, title: task, workspace: request.workspace, labels: {},
  });
  const ended = actor.whenTurnEnds();
  await supervisor.send({
    id: newId('message'), from: 'test', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: task, request, sentAt: new Date().toISOString(),
  });
  return { actor, ended: await ended };
}

/** Reads an actor's whole log. */
export async function readLog(supervisor: Supervisor, rootId: string, actorId: string): Promise<ActorEvent[]> {
  const out: ActorEvent[] = [];
  for await (const { event } of supervisor.reader.read(rootId, actorId, { afterSeq: 0 })) out.push(event);
  return out;
}
