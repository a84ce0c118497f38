import { z } from 'zod';
import { CompleteWhenSchema } from './completion.js';
import { idString } from './ids.js';
import { FAULT_NOW, FaultOrderPointSchema } from './fault-points.js';
import { ReasoningEffortSchema, TurnOutcomeSchema } from './turn-settings.js';

// The gateway's client protocol (design §11), versioned apart from the event format: `/v1` is
// this file. Every request and response the gateway serves is a schema here; `GET /v1/schema`
// publishes them as JSON Schema, so the page and other clients read the same definitions.

/** The version of the gateway protocol: the path prefix of every route. */
export const GATEWAY_PROTOCOL_VERSION = 'v1';

/**
 * A status as a client shows it (`agentStatus`, src/client/status.ts): `idle` before any turn,
 * `starting` a child not started yet, `running`, `waiting` for a person, `killed` once its log
 * says its incarnation died (or, before any incarnation says so, while its log has a turn open
 * and the holder of its lease is dead), `recovering` while a new incarnation takes over,
 * `released` when it was let go with work open and nothing runs it, or the last turn's outcome.
 */
export const ActorStatusSchema = z.union([z.enum(['idle', 'running', 'waiting', 'starting', 'killed', 'recovering', 'released']), TurnOutcomeSchema]);
/** A status as a client shows it. */
export type ActorStatusName = z.infer<typeof ActorStatusSchema>;

/** Every status of `ActorStatusSchema`, in its order (what `GET /v1/runs?status=` takes). */
export const ACTOR_STATUSES: readonly ActorStatusName[] = ActorStatusSchema.options.flatMap((o) => o.options);

/** One actor of the directory with what its log says now (`GET /v1/actors`, `actors.list`). */
export const ActorSummarySchema = z.object({
  id: z.string(),
  parentId: z.string().nullable(),
  rootId: z.string(),
  name: z.string(),
  kind: z.string(),
  /** From the log (the tree fold), not the directory's cache. */
  status: ActorStatusSchema,
  /** While waiting: what for, and the approval or question IDs. */
  waitingFor: z.object({ kind: z.enum(['approval', 'question']), ids: z.array(z.string()) }).nullable(),
  /** Index of the open step, null: none open. */
  step: z.number().int().nullable(),
  /** The tool running now in the open step, null: none. */
  tool: z.string().nullable(),
  tokens: z.number().int(),
  /** USD of every attempt; null once any had no known price. */
  costUsd: z.number().nullable(),
  depth: z.number().int(),
  /** The stream sequence of the tree's last commit this summary folded (a cursor for `events`). */
  streamSeq: z.number().int(),
});
/** One actor of `GET /v1/actors`. */
export type ActorSummary = z.infer<typeof ActorSummarySchema>;

/** `GET /v1/actors`; `faultsAllowed`: the gateway runs with `--allow-faults` (a client may offer `fault.kill`). */
export const ActorsResponseSchema = z.object({ actors: z.array(ActorSummarySchema), faultsAllowed: z.boolean().optional() });

/** A pending approval as a person must see it to decide: exactly what it binds to. */
export const PendingApprovalSchema = z.object({
  approvalId: z.string(),
  callId: z.string(),
  tool: z.string(),
  toolVersion: z.string(),
  /** The call's arguments (redacted). */
  arguments: z.string().nullable(),
  plan: z.record(z.string(), z.unknown()).nullable(),
  planDigest: z.string(),
  preview: z.unknown().nullable(),
  reason: z.string().nullable(),
  rule: z.string().nullable(),
  /** ISO time after which it is denied. */
  expiresAt: z.string(),
});

/** A pending approval. */
export type PendingApproval = z.infer<typeof PendingApprovalSchema>;

/** A pending `ask_user` question. */
export const PendingQuestionSchema = z.object({
  questionId: z.string(),
  question: z.string(),
  options: z.array(z.object({ id: z.string(), label: z.string() })),
  allowFreeText: z.boolean(),
  sensitive: z.boolean(),
  expiresAt: z.string(),
});
/** A pending question. */
export type PendingQuestion = z.infer<typeof PendingQuestionSchema>;

/** `GET /v1/actors/:id` and `actor.inspect`: an actor's projection summary, redacted. */
export const ActorDetailSchema = z.object({
  actor: ActorSummarySchema,
  /** Its log's last event seq. */
  seq: z.number().int(),
  epoch: z.number().int(),
  turns: z.number().int(),
  openTurn: z.object({ id: z.string(), startedAt: z.string(), steps: z.number().int(), toolCalls: z.number().int(), interrupted: z.boolean() }).nullable(),
  openStep: z.object({ id: z.string(), index: z.number().int() }).nullable(),
  openAttempt: z.object({ id: z.string(), index: z.number().int() }).nullable(),
  /** The open step's tool calls. */
  calls: z.array(z.object({ callId: z.string(), name: z.string(), arguments: z.string(), started: z.boolean(), ended: z.boolean(), approvalId: z.string().nullable() })),
  lastTurn: z.object({
    id: z.string(),
    outcome: z.string(),
    reason: z.string().nullable(),
    answer: z.string().nullable(),
    /** When it ended (its `turn/end`'s time). */
    endedAt: z.string().nullable(),
    /**
     * Why a `failed` or `stopped` turn ended so (null otherwise, or when nothing says): the
     * error of its last model attempt, else the stop's code (`step_budget`, `context_overflow`…)
     * with the words that explain it and the budget it ran into (src/client/run-summary.ts).
     */
    error: z.object({ code: z.string().optional(), message: z.string() }).nullable(),
  }).nullable(),
  /** The task of its current or last turn (the first message that turn took), whole; null before any turn took one. */
  task: z.string().nullable(),
  /** When its directory entry was made (ISO). */
  startedAt: z.string(),
  workspace: z.string(),
  /**
   * Who holds its lease now, and whether that holder is alive (its host record, or its process for
   * a command hosting it in-process), as the liveness check reads them; null: no lease is held, or
   * the gateway reads no leases.
   */
  holder: z.object({ host: z.string(), alive: z.boolean(), expiresAt: z.string() }).nullable(),
  plan: z.unknown().nullable(),
  goal: z.unknown().nullable(),
  pendingApprovals: z.array(PendingApprovalSchema),
  pendingQuestions: z.array(PendingQuestionSchema),
  usage: z.object({ inputTokens: z.number(), outputTokens: z.number(), estimated: z.boolean() }),
  costUsd: z.number().nullable(),
  children: z.array(z.string()),
});
/** An actor's detail. */
export type ActorDetail = z.infer<typeof ActorDetailSchema>;

/** Runs one page of `GET /v1/runs` holds unless `limit` says otherwise, and the most it may. */
export const RUNS_PAGE = { defaultLimit: 50, maxLimit: 200 } as const;

/** `status=`: a comma-separated list (or, over JSON-RPC, an array) of run statuses (`waiting` also keeps every run a person is asked something in). */
const RunStatusFilterSchema = z.union([z.string(), z.array(z.string())]).transform((v, ctx) => {
  const asked = (Array.isArray(v) ? v : v.split(',')).map((s) => s.trim()).filter((s) => s !== '');
  const unknown = asked.filter((s) => !(ACTOR_STATUSES as readonly string[]).includes(s));
  if (unknown.length > 0 || asked.length === 0) {
    ctx.addIssue({
      code: 'custom',
      message: `${unknown.length > 0 ? `${unknown.map((u) => JSON.stringify(u)).join(', ')} ${unknown.length === 1 ? 'is not a status' : 'are not statuses'}` : 'names no status'}: give a comma-separated list of ${ACTOR_STATUSES.join(', ')}`,
    });
    return z.NEVER;
  }
  return [...new Set(asked)] as ActorStatusName[];
});

/**
 * The query of `GET /v1/runs` and the params of `runs.list`: `status` keeps runs in any of those
 * statuses, `q` runs whose root's ID, name or task holds the text (case-insensitive), `before`
 * the page after the one whose `next` it is, `limit` runs a page (1 to 200, default 50).
 */
export const RunsQuerySchema = z.object({
  status: RunStatusFilterSchema.optional(),
  q: z.string().max(1000, 'takes at most 1000 characters of text').optional(),
  before: z.string().regex(/^[A-Za-z0-9_-]{1,400}$/, 'takes the `next` cursor of the previous page, as it was given').optional(),
  limit: z.coerce.number({ error: `takes a whole number from 1 to ${RUNS_PAGE.maxLimit}` })
    .int(`takes a whole number from 1 to ${RUNS_PAGE.maxLimit}`)
    .min(1, `takes a whole number from 1 to ${RUNS_PAGE.maxLimit}`)
    .max(RUNS_PAGE.maxLimit, `takes a whole number from 1 to ${RUNS_PAGE.maxLimit}`)
    .optional(),
});
/** A runs query, parsed. */
export type RunsQuery = z.infer<typeof RunsQuerySchema>;

/** One approval or question a person is asked, named by the actor it stops. */
export const WaitingOnSchema = z.object({ actorId: z.string(), name: z.string(), kind: z.enum(['approval', 'question']), id: z.string() });

/** One run of `GET /v1/runs`: a root and its tree, as their logs say now. */
export const RunSummarySchema = z.object({
  /** The root's ID. */
  id: z.string(),
  name: z.string(),
  /** The first line of the run's first task (at most 200 characters); the directory's title before its first turn took it. */
  task: z.string().nullable(),
  /**
   * The root's status, but `waiting` when the root only waits on its children and one of them
   * waits on a person (`runStatus`, src/client/status.ts, as `actorloop runs` reads it).
   */
  status: ActorStatusSchema,
  /** Why the run ended, when its status is its root's last turn's outcome other than `completed` (`step_budget`, a model error…); null otherwise. */
  reason: z.string().nullable(),
  /** Every approval and question pending anywhere in the tree, oldest asked first. */
  waitingOn: z.array(WaitingOnSchema),
  /** When the root's directory entry was made (ISO). */
  startedAt: z.string(),
  /** When the tree's last turn ended (ISO); null while any actor of it is busy (running, starting, recovering, waiting, killed) or before any turn ended. */
  endedAt: z.string().nullable(),
  /** `endedAt` − `startedAt`; null with `endedAt`. */
  durationMs: z.number().int().nullable(),
  /** Tokens of every attempt of the tree. */
  tokens: z.number().int(),
  /** USD of every attempt of the tree; null once any had no known price. */
  costUsd: z.number().nullable(),
  /** Actors of the tree besides the root. */
  children: z.number().int(),
  workspace: z.string(),
  /** The stream sequence of the tree's last commit folded (a cursor for `events`). */
  streamSeq: z.number().int(),
});
/** One run of the runs list. */
export type RunSummary = z.infer<typeof RunSummarySchema>;

/** `GET /v1/runs` and `runs.list`: a page of runs, newest first; `next` the `before` of the next page (null: this is the last); `total` the runs the filter keeps. */
export const RunsResponseSchema = z.object({ runs: z.array(RunSummarySchema), next: z.string().nullable(), total: z.number().int() });
/** A page of runs. */
export type RunsResponse = z.infer<typeof RunsResponseSchema>;

/** The query of `GET /v1/pending`: `root` keeps to the tree of that agent. */
export const PendingQuerySchema = z.object({ root: idString('agent').optional() });

const PendingWho = { actorId: z.string(), actorName: z.string(), rootId: z.string() };

/** One thing a person is asked: an approval or a question, with the actor and the run it stops. */
export const PendingItemSchema = z.discriminatedUnion('kind', [
  z.object({ ...PendingWho, kind: z.literal('approval'), approval: PendingApprovalSchema }),
  z.object({ ...PendingWho, kind: z.literal('question'), question: PendingQuestionSchema }),
]);
/** One pending item. */
export type PendingItem = z.infer<typeof PendingItemSchema>;

/** `GET /v1/pending` and `pending.list`: everything pending for a person, oldest asked first. */
export const PendingResponseSchema = z.object({ items: z.array(PendingItemSchema) });

/**
 * One state of a machine definition, for a layout (elkjs): its XState node type when not atomic,
 * its initial child, where each event may take it, its children. The shape of
 * `src/client/machine-definitions.ts`, which reads it from the machines' resolved definitions.
 */
export interface MachineStateDefinition {
  type?: string;
  initial?: string;
  /** Event → target state paths, dot-separated from the machine's root; eventless transitions under `always`; a targetless event lists none. */
  on: Record<string, string[]>;
  states?: Record<string, MachineStateDefinition>;
}

/** A state of a machine definition. */
export const MachineStateSchema: z.ZodType<MachineStateDefinition> = z.lazy(() =>
  z.object({
    type: z.string().optional(),
    initial: z.string().optional(),
    on: z.record(z.string(), z.array(z.string())),
    states: z.record(z.string(), MachineStateSchema).optional(),
  }),
);

/** One XState machine as data: `{id, initial, on, states}` (`on`: transitions of the root, taken in any state). */
export const MachineDefinitionSchema = z.object({
  id: z.string(),
  initial: z.string(),
  on: z.record(z.string(), z.array(z.string())),
  states: z.record(z.string(), MachineStateSchema),
});
/** A machine definition. */
export type MachineDefinition = z.infer<typeof MachineDefinitionSchema>;

/** `GET /v1/machines`. */
export const MachinesResponseSchema = z.object({ machines: z.array(MachineDefinitionSchema) });

/** The query of `GET /v1/actors`: `root` keeps to one tree's actors (a page showing one tree asks for it alone). */
export const ActorsQuerySchema = z.object({
  root: idString('agent').optional(),
});

/** The query of `GET /v1/actors/:id/events`: `after` a stream sequence, `tree=1` the whole tree. */
export const EventsQuerySchema = z.object({
  after: z.coerce.number().int().nonnegative().optional(),
  tree: z.enum(['0', '1', 'true', 'false']).optional(),
});

/**
 * One event as a subscription sends it (`events.event`, beside its `subscription`). An SSE event
 * carries the same in its fields: `id:` the stream sequence, `event:` the type, `data:` the event.
 */
export const StreamedEventSchema = z.object({
  /** The JetStream stream sequence of the commit holding it: the resume cursor. */
  streamSeq: z.number().int(),
  /** The actor whose log holds it. */
  actor: z.string(),
  /** The event as committed, redacted. */
  event: z.record(z.string(), z.unknown()),
});

// ---- JSON-RPC 2.0 over WebSocket (`/v1/rpc`) ----

/** A JSON-RPC request or notification from a client. */
export const RpcRequestSchema = z.object({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number().int(), z.null()]).optional(),
  method: z.string(),
  params: z.unknown().optional(),
});

/** JSON-RPC error codes: the spec's, and the gateway's own (≥ 1; the ActorloopError code is in `data`). */
export const RPC_ERRORS = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** An actorloop error (not found, refused, no host…): `data.code` names it. */
  application: 1,
  /** Fault orders are off: the gateway, or the host holding the actor, was started without `--allow-faults`. */
  faultsDisabled: 2,
  /** What the call names (an actor, an approval, a question) does not exist: `data.code` names which. */
  notFound: 3,
  /** The connection holds as many subscriptions as one may (`MAX_SUBSCRIPTIONS_PER_SOCKET`): end one first. */
  tooManySubscriptions: 4,
} as const;

/** A JSON-RPC error object. */
export const RpcErrorSchema = z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() });

/** What a person may send as text. */
export const TextKindSchema = z.enum(['steer', 'inject', 'follow_up']);

/**
 * The subscriptions (`events.subscribe`, `machines.subscribe`) one connection may hold open at
 * once, and the actors one `machines.subscribe` may name: each is a reader on the bus, and one
 * socket holding thousands made every other client's answers wait.
 */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 64;

/** The params of each method, by name. */
export const RpcParamsSchemas = {
  'turn.submit': z.object({
    task: z.string().min(1),
    /** An existing agent: the task is its next turn (a follow-up); absent: a new agent. */
    agentId: idString('agent').optional(),
    model: z.string().optional(),
    cwd: z.string().optional(),
    approve: z.enum(['ask', 'auto-edit', 'full-auto', 'deny-all']).optional(),
    maxSteps: z.number().int().positive().optional(),
    maxToolCalls: z.number().int().nonnegative().optional(),
    tools: z.string().optional(),
    planMode: z.boolean().optional(),
    /** The turn's wall-clock limit, seconds (`run --deadline`). */
    deadlineSeconds: z.number().positive().optional(),
    /** Tokens the turn's attempts may use (`--max-tokens`). */
    maxTokens: z.number().int().positive().optional(),
    /** USD the turn's attempts may cost (`--max-cost`); the model must be priced in the gateway's config. */
    maxCostUsd: z.number().positive().optional(),
    effort: ReasoningEffortSchema.optional(),
    maxOutputTokens: z.number().int().positive().optional(),
    /** The system prompt itself (the CLI reads `--instructions FILE` and sends its text). */
    instructions: z.string().min(1).optional(),
    /** A JSON Schema the final answer must fit (`--output-schema FILE`, its contents). */
    outputSchema: z.record(z.string(), z.unknown()).optional(),
    completeWhen: CompleteWhenSchema.optional(),
    /** A goal that outlives the turn (`--goal` with its budgets). */
    goal: z.object({
      objective: z.string().min(1),
      tokens: z.number().int().positive().optional(),
      costUsd: z.number().positive().optional(),
      seconds: z.number().positive().optional(),
    }).strict().optional(),
    /** The task is the next turn of the latest root agent of `cwd`'s workspace (`run --last`); not with `agentId`. */
    last: z.boolean().optional(),
  }).strict().refine((p) => !(p.last === true && p.agentId !== undefined), { message: 'give agentId or last, not both' }),
  'inbox.send': z.object({ agentId: idString('agent'), kind: TextKindSchema, content: z.string().min(1) }).strict(),
  'approval.respond': z.object({
    agentId: idString('agent'), approvalId: idString('approval'), decision: z.enum(['approve', 'deny']), reason: z.string().optional(), always: z.boolean().optional(),
    /** The plan digest the client showed the person: when given, the answer binds to it, and a stale one is refused. */
    planDigest: z.string().optional(),
  }).strict(),
  'ask.answer': z.object({ agentId: idString('agent'), questionId: idString('question'), optionId: z.string().optional(), text: z.string().optional() })
    .strict().refine((p) => p.optionId !== undefined || p.text !== undefined, { message: 'give optionId or text' }),
  'turn.interrupt': z.object({ agentId: idString('agent') }).strict(),
  /** A person's ask for a checkpoint at the agent's next step boundary (`actorloop compact`). */
  'turn.compact': z.object({ agentId: idString('agent') }).strict(),
  /**
   * A person's change of the agent's goal (`actorloop goal <agent> pause|resume|cancel`), against
   * `expectedRevision` (default: the goal's revision as the gateway reads it): the agent refuses a
   * change made against another revision, and says why in `inbox/cancelled`.
   */
  'goal.control': z.object({ agentId: idString('agent'), action: z.enum(['pause', 'resume', 'cancel']), expectedRevision: z.number().int().nonnegative().optional() }).strict(),
  'actors.list': z.object({ rootId: idString('agent').optional() }).strict().optional(),
  'actor.inspect': z.object({ agentId: idString('agent') }).strict(),
  'runs.list': RunsQuerySchema.strict().optional(),
  'pending.list': z.object({ rootId: idString('agent').optional() }).strict().optional(),
  'events.subscribe': z.object({ agentId: idString('agent'), afterStreamSeq: z.number().int().nonnegative().optional(), tree: z.boolean().optional() }).strict(),
  'events.unsubscribe': z.object({ subscription: z.string() }).strict(),
  'machines.subscribe': z.object({ agentIds: z.array(idString('agent')).min(1).max(MAX_SUBSCRIPTIONS_PER_SOCKET) }).strict(),
  'machines.unsubscribe': z.object({ subscription: z.string() }).strict(),
  'fault.kill': z.object({
    agentId: idString('agent'),
    /** Where the host holding the agent SIGKILLs itself: a named fault point the agent reaches next, or `now` (the default). */
    point: FaultOrderPointSchema.optional(),
    /** At the n-th time the agent reaches `point` from now (default 1). */
    nth: z.number().int().positive().optional(),
  }).strict().refine((p) => p.nth === undefined || (p.point !== undefined && p.point !== FAULT_NOW), { message: 'nth needs a named point (not now)', path: ['nth'] }),
} as const;

/** A method of `/v1/rpc`. */
export type RpcMethod = keyof typeof RpcParamsSchemas;
/** The params of a method. */
export type RpcParams<M extends RpcMethod> = z.infer<(typeof RpcParamsSchemas)[M]>;

/** The results of each method, by name. */
export const RpcResultSchemas = {
  'turn.submit': z.object({ agentId: z.string(), messageId: z.string(), turnId: z.string().nullable() }),
  'inbox.send': z.object({ messageId: z.string() }),
  'approval.respond': z.object({ messageId: z.string() }),
  'ask.answer': z.object({ messageId: z.string() }),
  'turn.interrupt': z.object({ messageId: z.string() }),
  'turn.compact': z.object({ messageId: z.string() }),
  'goal.control': z.object({ messageId: z.string() }),
  'actors.list': ActorsResponseSchema,
  'actor.inspect': ActorDetailSchema,
  'runs.list': RunsResponseSchema,
  'pending.list': PendingResponseSchema,
  'events.subscribe': z.object({ subscription: z.string() }),
  'events.unsubscribe': z.object({ ok: z.literal(true) }),
  'machines.subscribe': z.object({ subscription: z.string() }),
  'machines.unsubscribe': z.object({ ok: z.literal(true) }),
  /** `killed`: the host kills itself now (after answering); `armed`: it will at `point`. */
  'fault.kill': z.object({ status: z.enum(['armed', 'killed']), hostId: z.string(), pid: z.number().int(), point: FaultOrderPointSchema }),
} as const satisfies Record<RpcMethod, z.ZodType>;

/** A method's result. */
export type RpcResult<M extends RpcMethod> = z.infer<(typeof RpcResultSchemas)[M]>;

/** The params of the `events.event` notification: one committed event of a subscription. */
export const EventsNotificationSchema = StreamedEventSchema.extend({ subscription: z.string() });

/**
 * The params of the `machines.state` notification, sent once per actor as a `machines.subscribe`
 * opens: its machines' active states as its committed events say them (folded from the log).
 */
export const MachinesNotificationSchema = z.object({
  subscription: z.string(),
  actor: z.string(),
  /** The stream sequence of the last commit folded (0: the log is empty). */
  streamSeq: z.number().int(),
  /** The last event folded; null: none yet. */
  eventType: z.string().nullable(),
  /** Machine id → its active state path; absent: that machine is not running. */
  active: z.record(z.string(), z.string()),
});

/**
 * The params of the `machines.transition` notification: a host's live report of what an actor's
 * machines did (XState's inspection, relayed as the host sends it; not in the log), while a
 * `machines.subscribe` watches the actor.
 */
export const MachinesTransitionNotificationSchema = z.object({
  subscription: z.string(),
  actor: z.string(),
  /** The event the actor took (a log event's type, staged or committed, or a runtime signal); null: the states the host had when the watch began. */
  eventType: z.string().nullable(),
  /** Machine id → its active state path after it; absent: that machine is not open. */
  active: z.record(z.string(), z.string()),
  /** The host's clock, ms since the epoch. */
  at: z.number(),
  /** The host that reported it. */
  host: z.string(),
});

/** Every schema, for `GET /v1/schema`. */
export function gatewaySchemas(): Record<string, z.ZodType> {
  const rpc: Record<string, z.ZodType> = {};
  for (const [m, s] of Object.entries(RpcParamsSchemas)) rpc[`rpc.${m}.params`] = s;
  for (const [m, s] of Object.entries(RpcResultSchemas)) rpc[`rpc.${m}.result`] = s;
  return {
    ActorsResponse: ActorsResponseSchema,
    ActorDetail: ActorDetailSchema,
    RunsQuery: RunsQuerySchema,
    RunSummary: RunSummarySchema,
    RunsResponse: RunsResponseSchema,
    PendingQuery: PendingQuerySchema,
    PendingItem: PendingItemSchema,
    PendingResponse: PendingResponseSchema,
    MachinesResponse: MachinesResponseSchema,
    ActorsQuery: ActorsQuerySchema,
    EventsQuery: EventsQuerySchema,
    StreamedEvent: StreamedEventSchema,
    RpcRequest: RpcRequestSchema,
    RpcError: RpcErrorSchema,
    'notification.events.event': EventsNotificationSchema,
    'notification.machines.state': MachinesNotificationSchema,
    'notification.machines.transition': MachinesTransitionNotificationSchema,
    ...rpc,
  };
}
