import { resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { NatsCredentials } from '../bus/nats-auth.js';
import type { ModelAdapter } from '../model/model-port.js';
import { priceFor } from '../model/pricing.js';
import type { ActorEvent, ApprovalMode, TurnSettings } from '../protocol/events.js';
import { ConfigError } from '../protocol/errors.js';
import { newId, parseId } from '../protocol/ids.js';
import { approvalById } from '../store/projection.js';
import { builtinTools } from '../tools/builtins/index.js';
import { createToolRegistry } from '../tools/registry.js';
import type { ToolDefinition } from '../tools/tool.js';
import type { TurnEnded } from './actor/hosted-agent.js';
import type { HostedAgent } from './actor/hosted-agent.js';
import type { HostSupervisor } from './hosting/host-supervisor.js';
import { turnRequestWith, type TurnOptions } from './agent/turn-options.js';
import type { Projection } from '../store/projection.js';
import type { AgentActorRef, InspectObserver } from './actor/agent-logic.js';
import { createFaultInjector } from './faults/faults.js';
import { Supervisor } from './hosting/supervisor.js';
import { compose, modelsFromSpecs } from './composition.js';
import { defaultTooling, staticPolicy, type ToolingPorts } from './agent/tooling.js';

/** Options of `createRuntime`: where the agents' logs live and what they may use. */
export interface RuntimeOptions {
  /**
   * Where the embedded nats-server keeps the logs and LMDB the snapshots and blobs: agents there
   * survive a restart of this process. Required unless `memory` is set.
   */
  dataDir?: string;
  /** Logs, inboxes and blobs in this process's memory: no NATS, no LMDB, nothing survives the process. */
  memory?: boolean;
  /** A NATS server with JetStream instead of the embedded one, and how to log in to it. */
  natsUrl?: string;
  natsCredentials?: NatsCredentials;
  /** The PATH to look for nats-server on (besides /usr/sbin and /usr/local/bin). */
  pathEnv?: string;
  /** The model of agents that name none: `scripted:<file.json>`, `openai:<model>`, `openai-responses:<model>`. */
  model?: string;
  /** The key and endpoint of `openai:` models (this library reads no environment). */
  apiKey?: string;
  baseUrl?: string | null;
  /** Builds a turn's model instead of the spec (an adapter of your own, a fake). */
  modelFor?(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  /** Tools besides the built-ins (read_file, write_file, apply_patch, list_dir, search, shell, artifact_read). */
  tools?: ToolDefinition<any>[];
  /** Policy rules, sandbox and budgets of the tool pipeline (default: no rules, no sandbox: shell asks). */
  tooling?: Partial<ToolingPorts>;
  /** XState's inspection events of every agent. */
  inspect?: InspectObserver;
  logger?: Logger;
}

/** What an agent is created with; each turn's request is built from it. */
export interface AgentOptions {
  /** The directory its tools work in. */
  workspace: string;
  /** Default: the runtime's `model`. */
  model?: string;
  /** What may run without asking (default `ask`: reads only). */
  approvalMode?: ApprovalMode;
  instructions?: string;
  /** The tools the model sees (default: all). */
  tools?: string[];
  maxSteps?: number;
  maxToolCalls?: number;
  deadlineSeconds?: number;
  title?: string;
}

/** One turn an agent was given: its events as they are committed, and how it ended. */
export interface TurnHandle {
  /** The events of the agent's log from this turn on, as committed, until the turn ends. */
  events(): AsyncIterable<ActorEvent>;
  /** Resolves when the turn ends: outcome (`completed | stopped | failed | cancelled`), reason, answer. */
  outcome: Promise<TurnEnded>;
}

/** An agent hosted by the runtime. */
export interface AgentHandle {
  readonly id: string;
  /** The agent as an XState actor: `getSnapshot()`, `subscribe()`. */
  readonly ref: AgentActorRef;
  /** The agent's state as its log folds it: turns, usage, goal, approvals waiting (read, do not change). */
  readonly state: Projection;
  /**
   * Sends a task (through the agent's durable inbox) and returns the turn it starts; `options`
   * are `actorloop run`'s flags for this turn (goal, plan mode, completion policy, budgets, output
   * schema), checked before anything is sent.
   */
  send(task: string, options?: TurnOptions): Promise<TurnHandle>;
  /** Approvals the agent waits on, once it can do nothing but wait for a person. */
  whenAwaitingApproval(): Promise<string[]>;
  /** Answers an approval the way `actorloop approve` / `deny` does. */
  answer(approvalId: string, decision: 'approve' | 'deny', reason?: string): Promise<void>;
  /**
   * Says something to the agent at its next step boundary (design §6): a `steer` for the running
   * turn's next step (it wakes an idle agent), an `inject` of context for the next step (it wakes
   * nobody), or a `follow_up` turn once this one ends. Resolves with the message ID once the
   * agent's inbox has it; the log says when it is included.
   */
  say(kind: 'steer' | 'inject' | 'follow_up', text: string): Promise<string>;
  /** Interrupts the running turn as Ctrl-C does: it ends `cancelled`. */
  interrupt(): Promise<void>;
  /** Questions (`ask_user`) the agent waits on, once it can do nothing but wait for a person. */
  whenAwaitingQuestion(): Promise<string[]>;
  /** Answers a question the way `actorloop answer` does: free text, an option's ID, or both. */
  answerQuestion(questionId: string, answer: { text?: string; optionId?: string }): Promise<void>;
}

/** Agents in this process, on the embedded (or a given) NATS server and LMDB, or in memory. */
export interface Runtime {
  /** Creates an agent with its own log and inbox. */
  agent(opts: AgentOptions): Promise<AgentHandle>;
  /**
   * Reopens the agent of this ID (a runtime before this one, on the same data dir or NATS,
   * created it): its state from its snapshot and log, a turn a crash left open recovered, its
   * next turns on its last turn's model, workspace and run mode unless `opts` says otherwise. A
   * malformed ID is a BadIdError, an ID the directory does not hold a NotFoundError.
   */
  agent(id: string, opts?: Partial<AgentOptions>): Promise<AgentHandle>;
  /** The supervisor hosting the agents (rehydrate, inbox, `reader` for `followAgent`). */
  readonly supervisor: HostSupervisor;
  /** Stops the agents (turns left open resume later) and closes what the runtime opened. */
  close(): Promise<void>;
}

/**
 * The embedding entry: a runtime hosting agents in this process. With `dataDir` it starts (or
 * reuses) the embedded nats-server of that dir and opens its LMDB, as the CLI does; with
 * `memory: true` it needs neither.
 */
export async function createRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const logger = opts.logger ?? pino({ level: 'silent' });
  if (!opts.memory && !opts.dataDir) {
    throw new ConfigError('runtime.no_data_dir', 'createRuntime needs a dataDir (where the logs live), or memory: true',
      { hint: 'pass { dataDir: "/path" } for agents that survive a restart, { memory: true } for a throwaway runtime' });
  }
  const tooling = defaultTooling({ policy: staticPolicy(), ...opts.tooling });
  const composition = await compose({
    bus: opts.memory ? null : {
      natsUrl: opts.natsUrl ?? null, dataDir: opts.dataDir!, logger, name: 'actorloop-embedded', role: 'host',
      ...(opts.natsCredentials ? { credentials: opts.natsCredentials } : {}), ...(opts.pathEnv ? { pathEnv: opts.pathEnv } : {}),
    },
    // worktrees live in the data dir: a throwaway runtime has none to put them in
    ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
    logger,
    tools: createToolRegistry([...builtinTools(), ...(opts.tools ?? [])]),
    tooling,
    faults: createFaultInjector([]),
    pricing: (model) => priceFor(model, {}),
    modelFor: opts.modelFor ?? modelsFromSpecs(opts.apiKey ?? '', {}),
    ...(opts.inspect ? { inspect: opts.inspect } : {}),
  });
  const supervisor = new Supervisor(composition.supervisorOptions());

  const handle = (actor: HostedAgent, agent: AgentOptions): AgentHandle => ({
    id: actor.actorId,
    ref: actor.ref,
    get state() {
      return actor.projection;
    },
    async send(task, options) {
      const model = absoluteScript(agent.model ?? opts.model);
      if (!model) throw new ConfigError('runtime.no_model', 'the agent has no model', { hint: 'pass model to createRuntime or to agent()' });
      const request = turnRequestWith({
        model, baseUrl: opts.baseUrl ?? null, workspace: agent.workspace, tools: agent.tools ?? null,
        instructions: agent.instructions ?? null, approvalMode: agent.approvalMode ?? 'ask',
        maxSteps: agent.maxSteps ?? null, maxToolCalls: agent.maxToolCalls ?? null, deadlineSeconds: agent.deadlineSeconds ?? null,
        maxAttempts: null,
      }, options);
      const from = actor.projection.seq;
      const outcome = actor.whenTurnEnds();
      await supervisor.send({
        id: newId('message'), from: 'client:embedded', to: actor.actorId, kind: 'user_message', target: 'next_turn',
        wakeup: true, content: task, request, sentAt: new Date().toISOString(),
      });
      return {
        outcome,
        async *events() {
          // the log as committed, from the turn's first event; src/client's follower adds a status
          const stop = new AbortController();
          try {
            for await (const { event } of supervisor.reader.follow(actor.rootId, actor.actorId, { afterSeq: from, signal: stop.signal })) {
              yield event;
              if (event.type === 'turn/end') return;
            }
          } finally {
            stop.abort();
          }
        },
      };
    },
    whenAwaitingApproval: () => actor.whenAwaitingApproval(),
    whenAwaitingQuestion: () => actor.whenAwaitingQuestion(),
    async say(kind, text) {
      const id = newId('message');
      await supervisor.send({
        id, from: 'client:embedded', to: actor.actorId, kind, target: kind === 'follow_up' ? 'next_turn' : 'next_step',
        wakeup: kind !== 'inject', content: text, request: null, sentAt: new Date().toISOString(),
      });
      return id;
    },
    async interrupt() {
      await supervisor.send({
        id: newId('message'), from: 'client:embedded', to: actor.actorId, kind: 'interrupt', target: 'now', wakeup: true,
        content: '', request: null, sentAt: new Date().toISOString(),
      });
    },
    async answerQuestion(questionId, answer) {
      await supervisor.send({
        id: newId('message'), from: 'client:embedded', to: actor.actorId, kind: 'ask_answer', target: 'now', wakeup: true,
        content: JSON.stringify({ questionId, ...(answer.optionId ? { optionId: answer.optionId } : {}), ...(answer.text !== undefined ? { text: answer.text } : {}) }),
        request: null, sentAt: new Date().toISOString(),
      });
    },
    async answer(approvalId, decision, reason) {
      const planDigest = approvalById(actor.projection, approvalId)?.planDigest;
      await supervisor.send({
        id: newId('message'), from: 'client:embedded', to: actor.actorId, kind: 'approval_response', target: 'now', wakeup: true,
        content: JSON.stringify({ approvalId, decision, ...(planDigest ? { planDigest } : {}), ...(reason ? { reason } : {}) }),
        request: null, sentAt: new Date().toISOString(),
      });
    },
  });

  // the agents this runtime hosts: a second agent(id) of one of them is the same agent, not a second incarnation
  const hosted = new Map<string, HostedAgent>();
  return {
    supervisor,
    async agent(agentOrId: AgentOptions | string, given: Partial<AgentOptions> = {}) {
      if (typeof agentOrId === 'string') {
        const actorId = parseId('agent', agentOrId);
        const actor = hosted.get(actorId) ?? (await supervisor.hydrate(actorId)).actor;
        hosted.set(actorId, actor);
        const last = actor.projection.lastSettings;
        const workspace = given.workspace ?? last?.workspace;
        if (!workspace) throw new ConfigError('runtime.no_workspace', `agent ${actorId} has run no turn, so it has no workspace yet`, { hint: 'pass { workspace } as the second argument of agent(id, …)' });
        return handle(actor, {
          ...(last ? { model: last.model } : {}), ...(last?.approvalMode ? { approvalMode: last.approvalMode } : {}), ...given, workspace,
        });
      }
      const agent = agentOrId;
      const actorId = newId('agent');
      const actor = await supervisor.create({
        actorId, kind: 'agent', parentId: null, rootId: actorId, title: agent.title ?? 'agent', workspace: agent.workspace, labels: {},
      });
      hosted.set(actorId, actor);
      return handle(actor, agent);
    },
    async close() {
      await supervisor.stop();
      await composition.close();
    },
  };
}

/** A scripted spec names its file absolutely in the log: a turn resumed from another directory finds it. */
function absoluteScript(spec: string | undefined): string | undefined {
  return spec?.startsWith('scripted:') ? `scripted:${resolve(spec.slice('scripted:'.length))}` : spec;
}
