// `actorloop/host`: the kit for building hosts — the supervisor, the ports and their JetStream,
// LMDB and memory factories, the machines, the fold, faults and the log checker. The embedding
// API is `actorloop`; the agent actor itself is neither's: a host reads it as a HostedAgent.

import { Supervisor as SupervisorClass, type SupervisorOptions } from './actors/hosting/supervisor.js';
import type { HostSupervisor } from './actors/hosting/host-supervisor.js';

/** Hosts agents: creates and rehydrates them, serves their inboxes, stops them; what it hosts reads as a HostedAgent. */
export const Supervisor: new (opts: SupervisorOptions) => HostSupervisor = SupervisorClass;
/** A supervisor, as a host builder drives it. */
export type Supervisor = HostSupervisor;
/** What a supervisor is built with: its ports, tools, tooling, faults, logger, model factory. */
export type { SupervisorOptions };
/** What a host reads of an agent the supervisor hosts. */
export type { HostedAgent } from './actors/actor/hosted-agent.js';
/** The supervisor's ports (logs, inboxes, directory, leases) over JetStream, or in memory. */
export { createJetStreamPorts, createMemoryPorts, type SupervisorPorts, type MemoryPorts } from './actors/hosting/supervisor-ports.js';
/** Injected faults (kill, drop, delay at named points) and their records across incarnations. */
export { createFaultInjector, parseFaultSpecs, FAULT_POINTS, TREE_FAULT_POINTS, type FaultSpec, type FaultInjector } from './actors/faults/faults.js';
export { createFileFaultRecords, createMemoryFaultRecords, type FaultRecord, type FaultRecords } from './actors/faults/fault-records.js';
/** The log checker behind `actorloop verify`. */
export { verifyLog, formatViolations, type Violation } from './verify/verify.js';
/** Git worktrees of `worktree` subagents. */
export { createGitWorktrees, type GitWorktrees } from './actors/tree/git-worktrees.js';

/** NATS: the connection, the embedded nats-server, inboxes, the directory, leases. */
export { openBus, type Bus } from './bus/connection.js';
export { startNatsServer, type NatsServerHandle } from './bus/nats-server.js';
export { publishInbox } from './bus/inbox.js';
export { createMemoryInboxes, type MemoryInboxes } from './bus/memory-inbox.js';
export { createMemoryDirectory } from './bus/memory-directory.js';
export { createMemoryLeaseStore } from './bus/memory-leases.js';
export { createMemoryResourceLeases } from './bus/memory-resource-leases.js';
export { createKvResourceLeases, ensureResourceLeaseBucket, type ResourceLease, type ResourceLeaseStore } from './bus/resource-leases.js';

/** The store: logs with fencing, LMDB snapshots and blobs, the projection fold. */
export { createJetStreamLog, createLogReader } from './store/jetstream-log.js';
export { createMemoryLogs, type MemoryLogs } from './store/memory-log.js';
export { openLmdbStore } from './store/lmdb-store.js';
export { createLmdbSnapshots } from './store/snapshots.js';
export { createLmdbBlobStore, type BlobStore } from './store/blob-port.js';
export { createMemoryBlobStore } from './store/memory-blobs.js';
/** Blobs on the bus: the Object Store every host shares, LMDB as this host's cache of it. */
export { createObjectBlobStore } from './store/object-blobs.js';
export { createCachedBlobStore } from './store/cached-blobs.js';
export { ensureBlobBucket } from './bus/blob-bucket.js';
export { emptyProjection, foldEvent, type Projection } from './store/projection.js';
/** A tree's fold as clients draw it. */
export { TreeFold, ROOT_NAME } from './client/tree.js';

/** The layered config the CLI runs with. */
export { loadConfig, type EffectiveConfig } from './config/config.js';

/** The machines: pure XState definitions of an agent, a turn, a step, an attempt, a tool call. */
export { agentMachine, type AgentContext, type AgentEvent, type AgentInput } from './machines/agent.machine.js';
export { turnMachine, type TurnContext, type TurnEvent, type TurnInput } from './machines/turn.machine.js';
export { stepMachine, type StepContext, type StepEvent, type StepInput } from './machines/step.machine.js';
export { attemptMachine, type AttemptContext, type AttemptEvent, type AttemptInput } from './machines/attempt.machine.js';
export { toolCallMachine, type ToolCallContext, type ToolCallEvent, type ToolCallInput } from './machines/tool-call.machine.js';

/** Models: the adapters, their port, scripts, pricing, token counting. */
export type { ModelRequest, PreparedRequest, ModelStreamEvent, ModelOutput } from './model/model-port.js';
export { loadScript, ScriptSchema, type Script, type ScriptResponse } from './model/script.js';
export { createModelAdapter } from './model/factory.js';
export { createOpenAIChatModel, type OpenAIChatModel, type OpenAIChatModelOptions } from './model/openai-chat.js';
export { createOpenAIResponsesModel, type OpenAIResponsesModel } from './model/openai-responses.js';
export { priceFor, costOf, BUILTIN_PRICES, type Price } from './model/pricing.js';
export { countTokens } from './model/tokens.js';

/** The wire: event and inbox schemas, IDs. */
export { EventSchema, parseEvent } from './protocol/events.js';
export { InboxMessageSchema } from './protocol/inbox.js';
export { newId, derivedId, isId, parseId, type Id } from './protocol/ids.js';

/** Tools: the registry, the built-ins, reconciliation after a crash. */
export { createToolRegistry, type ToolRegistry } from './tools/registry.js';
export { builtinTools } from './tools/builtins/index.js';
export type { ToolSpec } from './protocol/tool-spec.js';
export type { ReconcileContext, ReconcileVerdict } from './tools/tool.js';
