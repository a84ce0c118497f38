// `actorloop`: the embedding API. Explicit named exports, each a name an embedder reads; the kit
// for building hosts (supervisor, ports, machines) is `actorloop/host`.

/** Starts a runtime hosting agents in this process (embedded NATS + LMDB, a NATS of yours, or memory). */
export { createRuntime } from './actors/runtime.js';
/** A runtime: `agent()` creates or reopens agents, `close()` stops them. */
export type { Runtime } from './actors/runtime.js';
/** What `createRuntime` takes: data dir or memory, NATS, model, tools, tooling, inspection. */
export type { RuntimeOptions } from './actors/runtime.js';
/** An agent the runtime hosts: send it tasks, read its state, answer it. */
export type { AgentHandle } from './actors/runtime.js';
/** What an agent is created with: workspace, model, run mode, instructions, tools, budgets. */
export type { AgentOptions } from './actors/runtime.js';
/** One turn: its committed events and how it ended. */
export type { TurnHandle } from './actors/runtime.js';
/** How a turn ended: outcome, reason, answer, usage. */
export type { TurnEnded } from './actors/actor/hosted-agent.js';
/** Options of one turn, as `actorloop run`'s flags: goal, plan mode, completion policy, budgets, output schema. */
export type { TurnOptions } from './actors/agent/turn-options.js';
/** A goal a turn starts, with its budgets. */
export type { GoalOptions } from './actors/agent/turn-options.js';

/** Follows one agent's log from a cursor: each event with the state after it and its status. */
export { followAgent } from './client/follower.js';
/** What `followAgent` takes: the reader (`runtime.supervisor.reader`), the agent, a cursor, a signal. */
export type { FollowOptions } from './client/follower.js';
/** One committed event as a client sees it. */
export type { ClientEvent } from './client/follower.js';
/** Follows every agent of a tree (a root and its subagents) in commit order. */
export { followTree } from './client/follower.js';
/** What `followTree` takes. */
export type { FollowTreeOptions } from './client/follower.js';
/** One committed event of a tree, with the agent it is of. */
export type { TreeClientEvent } from './client/follower.js';
/** The status of an agent's state: idle, running, waiting, or how its last turn ended. */
export { statusOf } from './client/status.js';
/** What `statusOf` says. */
export type { ClientStatus } from './client/status.js';
/** A tree's agents and their status, read once. */
export { readTreeView } from './client/tree.js';
/** A tree's agents and their status, as each event commits. */
export { watchTree } from './client/tree.js';
/** What `readTreeView` and `watchTree` take. */
export type { TreeWatchOptions } from './client/tree.js';
/** A tree of agents as a client draws it. */
export type { TreeView } from './client/tree.js';
/** One agent of a tree view. */
export type { TreeAgent } from './client/tree.js';
/** An agent's status in a tree (also starting, recovering). */
export type { TreeStatus } from './client/tree.js';

/** An event of an agent's log (every type, zod-validated at the edges). */
export type { ActorEvent } from './protocol/events.js';
/** The `type` of an event. */
export type { EventType } from './protocol/events.js';
/** The `data` of an event of the given type. */
export type { EventData } from './protocol/events.js';
/** How a turn ends: completed, stopped, failed or cancelled. */
export type { TurnOutcome } from './protocol/events.js';
/** What may run without asking: ask, auto-edit, full-auto, deny-all. */
export type { ApprovalMode } from './protocol/events.js';
/** What a turn runs with, recorded in its `turn/start` (what `modelFor` receives). */
export type { TurnSettings } from './protocol/events.js';
/** A message of an agent's inbox. */
export type { InboxMessage } from './protocol/inbox.js';
/** When a final answer completes a turn: answer, code-change, cited. */
export type { CompleteWhen } from './protocol/completion.js';
/** An agent's state as its log folds it (`agent.state`). */
export type { Projection } from './store/projection.js';
/** An agent as an XState actor (`agent.ref`). */
export type { AgentActorRef } from './actors/actor/agent-logic.js';
/** What `agent.ref.getSnapshot()` holds. */
export type { AgentSnapshot } from './actors/actor/agent-logic.js';
/** The agent's status in its snapshot. */
export type { AgentStatus } from './actors/actor/agent-logic.js';
/** Receives XState's inspection events (`createRuntime({ inspect })`). */
export type { InspectObserver } from './actors/actor/agent-logic.js';

/** A tool of your own (`createRuntime({ tools })`): schema, semantics, execute, reconcile. */
export type { ToolDefinition } from './tools/tool.js';
/** What a tool returns. */
export type { ToolResult } from './tools/tool.js';
/** What a tool's `execute` receives. */
export type { ToolContext } from './tools/tool.js';
/** Whether a tool's effects may happen and how a crash mid-call is recovered. */
export type { ExecutionSemantics } from './tools/tool.js';
/** A model of your own (`createRuntime({ modelFor })`). */
export type { ModelAdapter } from './model/model-port.js';
/** A model that plays a script of responses: tests and demos without a provider. */
export { createScriptedModel } from './model/scripted-model.js';
/** What `createScriptedModel` returns: the adapter, its recorded calls, `assertComplete()`. */
export type { ScriptedModel } from './model/scripted-model.js';

/** The root of every actorloop error: a stable `code`, `retryable`, a hint. */
export { ActorloopError } from './protocol/errors.js';
/** Bad options or input: what was wrong and what to pass instead. */
export { ConfigError } from './protocol/errors.js';
/** An ID that is not of the form its kind has (`runtime.agent(id)` with a malformed ID). */
export { BadIdError } from './protocol/ids.js';
/** An agent (or anything named by ID) that is not there. */
export { NotFoundError } from './protocol/errors.js';
/** NATS could not be reached or refused. */
export { BusError } from './protocol/errors.js';
/** The log or LMDB refused (a gap, a fence, a decode). */
export { StoreError } from './protocol/errors.js';
/** The model provider failed. */
export { ModelError } from './protocol/errors.js';
/** A tool failed. */
export { ToolError } from './protocol/errors.js';
/** The policy denied a call. */
export { PolicyError } from './protocol/errors.js';
