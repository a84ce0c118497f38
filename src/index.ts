// The public API of actorloop: explicit named exports, the only barrel.

// The embedding entry: a runtime, its agents, their turns.
export {
  createRuntime, type Runtime, type RuntimeOptions, type AgentHandle, type AgentOptions, type TurnHandle,
} from './actors/runtime.js';
export { followAgent, type ClientEvent, type FollowOptions } from './client/follower.js';
export { followTree, type FollowTreeOptions, type TreeClientEvent } from './client/follower.js';
export { statusOf, type ClientStatus } from './client/status.js';
export { readTreeView, TreeFold, treeStatus, watchTree, ROOT_NAME, type TreeAgent, type TreeStatus, type TreeView, type TreeWatchOptions } from './client/tree.js';
export { createMemoryBlobStore } from './store/memory-blobs.js';

export { AgentActor, type AgentPorts, type TurnEnded } from './actors/agent-actor.js';
export type { AgentActorRef, AgentSnapshot, AgentStatus, InspectObserver } from './actors/agent-logic.js';
export { Supervisor, type SupervisorOptions } from './actors/supervisor.js';
export { createJetStreamPorts, createMemoryPorts, type SupervisorPorts, type MemoryPorts } from './actors/supervisor-ports.js';
export { createFaultInjector, parseFaultSpecs, FAULT_POINTS, TREE_FAULT_POINTS, type FaultSpec, type FaultInjector } from './actors/faults.js';
export { createFileFaultRecords, createMemoryFaultRecords, type FaultRecord, type FaultRecords } from './actors/fault-records.js';
export { verifyLog, formatViolations, type Violation } from './actors/verify.js';
export { openBus, type Bus } from './bus/connection.js';
export { startNatsServer, type NatsServerHandle } from './bus/nats-server.js';
export { publishInbox } from './bus/inbox.js';
export { createMemoryInboxes, type MemoryInboxes } from './bus/memory-inbox.js';
export { createMemoryDirectory } from './bus/memory-directory.js';
export { createMemoryLeaseStore } from './bus/memory-leases.js';
export { createMemoryResourceLeases } from './bus/memory-resource-leases.js';
export { createKvResourceLeases, ensureResourceLeaseBucket, type ResourceLease, type ResourceLeaseStore } from './bus/resource-leases.js';
export { createGitWorktrees, type GitWorktrees } from './actors/git-worktrees.js';
export { loadConfig, type EffectiveConfig } from './config/config.js';
export { agentMachine, type AgentContext, type AgentEvent, type AgentInput } from './machines/agent.machine.js';
export { turnMachine, type TurnContext, type TurnEvent, type TurnInput } from './machines/turn.machine.js';
export { stepMachine, type StepContext, type StepEvent, type StepInput } from './machines/step.machine.js';
export { attemptMachine, type AttemptContext, type AttemptEvent, type AttemptInput } from './machines/attempt.machine.js';
export { toolCallMachine, type ToolCallContext, type ToolCallEvent, type ToolCallInput } from './machines/tool-call.machine.js';
export type { ModelAdapter, ModelRequest, PreparedRequest, ModelStreamEvent, ModelOutput } from './model/model-port.js';
export type { ToolSpec } from './protocol/tool-spec.js';
export { createScriptedModel, type ScriptedModel } from './model/scripted-model.js';
export { loadScript, ScriptSchema, type Script, type ScriptResponse } from './model/script.js';
export { createModelAdapter } from './model/factory.js';
export { createOpenAIChatModel, type OpenAIChatModel, type OpenAIChatModelOptions } from './model/openai-chat.js';
export { createOpenAIResponsesModel, type OpenAIResponsesModel } from './model/openai-responses.js';
export { priceFor, costOf, BUILTIN_PRICES, type Price } from './model/pricing.js';
export { countTokens } from './model/tokens.js';
export { EventSchema, parseEvent, type ActorEvent, type EventType, type EventData, type TurnOutcome } from './protocol/events.js';
export { InboxMessageSchema, type InboxMessage } from './protocol/inbox.js';
export { newId, derivedId, isId, type Id } from './protocol/ids.js';
export {
  ActorloopError, BusError, StoreError, ModelError, ToolError, PolicyError, ConfigError, NotFoundError,
} from './protocol/errors.js';
export { createJetStreamLog, createLogReader } from './store/jetstream-log.js';
export { createMemoryLogs, type MemoryLogs } from './store/memory-log.js';
export { openLmdbStore } from './store/lmdb-store.js';
export { createLmdbSnapshots } from './store/snapshots.js';
export { createLmdbBlobStore, type BlobStore } from './store/blob-port.js';
export { emptyProjection, foldEvent, type Projection } from './store/projection.js';
export { createToolRegistry, type ToolRegistry } from './tools/registry.js';
export { builtinTools } from './tools/builtins/index.js';
export type { ToolDefinition, ToolResult, ToolContext, ExecutionSemantics, ReconcileContext, ReconcileVerdict } from './tools/tool.js';
