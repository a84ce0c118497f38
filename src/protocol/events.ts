import { z } from 'zod';
import { BlobRefSchema, ToolCallRequestSchema, UsageSchema } from './history.js';
import { CompleteWhenSchema } from './completion.js';
import { TurnOutcomeSchema, ReasoningEffortSchema, GoalPhaseSchema, GoalBudgetSchema, GoalUsageSchema, TurnSettingsSchema, TurnRequestSchema } from './turn-settings.js';
import { SUBAGENT_EVENT_DATA } from './subagent-events.js';
import { COMPACTION_EVENT_DATA } from './compaction-events.js';
import { JOB_EVENT_DATA } from './job-events.js';
import { WORKFLOW_EVENT_DATA } from './workflow-events.js';
import { CONTEXT_EVENT_DATA, ContextBudgetSchema, ContributionRecordSchema } from './context-events.js';

/** Version of the event format written by this code. */
export const EVENT_VERSION = 1;

const ErrorInfoSchema = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean(),
});
/** A failure carried as data: `{code, message, retryable}`. */
export type ErrorInfo = z.infer<typeof ErrorInfoSchema>;

// The turn's settings and request live in their own file; they are re-exported here, where the
// events that record them are, so `events.js` stays the one place to import the event format from.
export {
  TurnOutcomeSchema,
  BudgetsSchema,
  ReasoningEffortSchema,
  ApprovalModeSchema,
  GoalPhaseSchema,
  GoalBudgetSchema,
  GoalUsageSchema,
  GoalRequestSchema,
  TurnSettingsSchema,
  TurnRequestSchema,
} from './turn-settings.js';
export type {
  TurnOutcome,
  Budgets,
  ReasoningEffort,
  ApprovalMode,
  GoalPhase,
  GoalBudget,
  GoalUsage,
  GoalRequest,
  TurnSettings,
  TurnRequest,
} from './turn-settings.js';

/** What a model can do, frozen into each Step (design §9). */
export const CapabilitiesSchema = z.object({
  contextWindow: z.number().int().positive().nullable(),
  maxOutputTokens: z.number().int().positive().nullable(),
  parallelToolCalls: z.boolean(),
  structuredOutput: z.boolean(),
  vision: z.boolean(),
});

const FinishReasonSchema = z.enum(['stop', 'tool_calls', 'length', 'refusal', 'content_filter', 'error']);
/** Normalized finish reasons (design §9). */
export type FinishReason = z.infer<typeof FinishReasonSchema>;

/** Normalized model error classes (design §9). */
export const ModelErrorClassSchema = z.enum([
  'rate_limit', 'overloaded', 'context_overflow', 'auth', 'invalid_request', 'network', 'server', 'cancelled',
  // the attempt's output passed `max_model_output_bytes` and was stopped mid-stream (never retried)
  'output_too_large',
  // the attempt's streamed output ran past what its budget reservation had room for, and was cut (never retried)
  'token_budget', 'cost_budget',
  // the same, where the goal's budget (`--goal-tokens`, `--goal-cost`) was the tighter one
  'goal_token_budget', 'goal_cost_budget',
]);
export type ModelErrorClass = z.infer<typeof ModelErrorClassSchema>;

const EffectsSchema = z.enum(['none', 'possible']);

/**
 * What a person is shown of what an approval binds, made where the approval is asked (the host
 * that runs the agent may be on another machine than the person) and recorded with it, so every
 * client (the CLI, the gateway) shows the same text. Redacted and bounded when it is made.
 */
export const ApprovalPreviewSchema = z.object({
  /** `diff` (write_file), `patch` (apply_patch), `command` (shell), `input` (the arguments as JSON: any other tool). */
  kind: z.enum(['diff', 'patch', 'command', 'input']),
  /** One line: what the call does (`edit src/slug.js (+1 -1)`, `new file …`, `1 command, sandboxed, no network`). */
  summary: z.string(),
  /** The body, lines separated by `\n`: a unified diff, the patch, the argv of each command, the arguments. */
  text: z.string(),
  /** True when `text` was cut to its bound; `omitted` says what was left out. */
  truncated: z.boolean(),
  omitted: z.string().optional(),
  /** Why the tool's own preview could not be made: `text` is then the plan's view of the call. */
  fallback: z.string().optional(),
});
/** What a person is shown of what an approval binds. */
export type ApprovalPreview = z.infer<typeof ApprovalPreviewSchema>;

/**
 * What a budget reservation counts against: the open turn's budgets, or the agent's active goal's
 * (tokens, cost), which span its turns. One attempt may hold a reservation in each.
 */
export const BudgetScopeSchema = z.enum(['turn', 'goal']);
export type BudgetScope = z.infer<typeof BudgetScopeSchema>;

/** What a reservation is for: one model attempt's worst case, or a step's parallel tool calls. */
export const ReservationKindSchema = z.enum(['attempt', 'tool_calls', 'subagent']);

/** The `data` schema of each event type. Extend, never rename. */
export const EventDataSchemas = {
  'turn/start': z.object({
    source: z.enum(['user_message', 'follow_up', 'job_notice', 'goal_continuation', 'recovery_continuation', 'subagent_task', 'subagent_notice']),
    messageIds: z.array(z.string()),
    settings: TurnSettingsSchema,
  }),
  'user/message': z.object({ messageId: z.string(), content: z.string() }),
  'turn/end': z.object({
    outcome: TurnOutcomeSchema,
    reason: z.string().nullable(),
    answer: z.string().nullable(),
    /** The blob holding the answer whole; `answer` is then its preview. */
    answerRef: BlobRefSchema.optional(),
    steps: z.number().int().nonnegative(),
    toolCalls: z.number().int().nonnegative(),
    usage: UsageSchema,
    /** USD of every attempt of the turn; null when any of them had no known price. */
    costUsd: z.number().nonnegative().nullable().optional(),
    /** The turn's goal goes on: the scheduler claims a `goal_continuation` turn next (design §6a). */
    goalContinues: z.boolean().optional(),
    /** A child's turn: its completion notice is owed to its parent until `subagent/notified`. */
    noticeOwed: z.boolean().optional(),
  }),
  'step/start': z.object({
    index: z.number().int().positive(),
    maxAttempts: z.number().int().positive(),
    toolBudgetLeft: z.number().int().nonnegative().nullable(),
    model: z.string(),
    maxOutputTokens: z.number().int().positive().nullable(),
    /** Frozen for the step: the adapter, the effort asked for, and what the model can do. */
    provider: z.string().optional(),
    effort: ReasoningEffortSchema.nullable().optional(),
    capabilities: CapabilitiesSchema.nullable().optional(),
    /** Inbox messages (steer, inject) this step claims: `reserved` until a prepared request includes them. */
    messageIds: z.array(z.string()).optional(),
  }),
  'request/prepared': z.object({
    digest: z.string(),
    bytes: z.number().int().nonnegative(),
    messages: z.number().int().nonnegative(),
    /** Inbox messages this request holds for the first time: `included` from this commit on. */
    messageIds: z.array(z.string()).optional(),
    /** What the request is made of, in the order sent (design §10); absent in logs written before it. */
    contributions: z.array(ContributionRecordSchema).optional(),
    /** Its size against the window it must fit. */
    budget: ContextBudgetSchema.optional(),
  }),
  /**
   * `kind: compaction`: the attempt writes a checkpoint's summary (design §10), on a bounded request
   * of its own; absent: the step's request.
   */
  'attempt/start': z.object({ index: z.number().int().positive(), requestDigest: z.string(), kind: z.literal('compaction').optional() }),
  'attempt/end': z.object({
    /** `overflow`: the request did not fit the model's context (its own outcome: compaction acts on it). */
    outcome: z.enum(['succeeded', 'failed', 'overflow', 'interrupted', 'aborted']),
    error: z.object({ class: ModelErrorClassSchema, message: z.string(), retryable: z.boolean() }).nullable(),
    usage: UsageSchema,
    backoffMs: z.number().int().nonnegative().nullable(),
    latencyMs: z.number().int().nonnegative().nullable(),
    /** USD; null when the model has no known price (unknown, never 0). */
    costUsd: z.number().nonnegative().nullable().optional(),
  }),
  'assistant/accepted': z.object({
    /** The answer, or its preview when `contentRef` names the blob that holds it whole. */
    content: z.string().nullable(),
    toolCalls: z.array(ToolCallRequestSchema),
    finishReason: FinishReasonSchema,
    contentRef: BlobRefSchema.optional(),
  }),
  'assistant/rejected': z.object({
    reason: z.string(),
    /** The answer that was refused; the model sees it and the reason in the next step. */
    content: z.string().nullable().optional(),
    contentRef: BlobRefSchema.optional(),
  }),
  'tool/call': z.object({
    index: z.number().int().nonnegative(),
    providerId: z.string(),
    name: z.string(),
    /** The model's arguments, or their preview when `argumentsRef` names the blob that holds them whole. */
    arguments: z.string(),
    argumentsRef: BlobRefSchema.optional(),
    status: z.enum(['valid', 'unknown_tool', 'invalid_arguments']),
    error: z.string().nullable(),
    effects: EffectsSchema.nullable(),
    recovery: z.enum(['rerun', 'idempotent', 'reconcile', 'manual']).nullable(),
    withinBudget: z.boolean(),
    /** A crash mid-call leaves its outcome unknown and a person must confirm before the turn goes on. */
    confirmUnknown: z.boolean().optional(),
  }),
  'policy/decided': z.object({
    decision: z.enum(['allow', 'ask', 'deny']),
    rule: z.string(),
    reason: z.string().nullable(),
    /** Digest of the normalized execution plan the decision was about. */
    planDigest: z.string().optional(),
    /** Whether an allowed call may reach the network (a rule granted it). */
    network: z.boolean().optional(),
    /** Secret-looking environment names a rule lets through to the process. */
    envAllow: z.array(z.string()).optional(),
    /** True when this is the check at execution time, after an approval. */
    recheck: z.boolean().optional(),
    /**
     * Every command of the call's plan matches one of the turn's `verifyCommands`: a passing result
     * of it is a verification (`code-change`), and the call is not counted as a change. Absent: no.
     */
    verification: z.boolean().optional(),
  }),
  'approval/requested': z.object({
    approvalId: z.string(),
    tool: z.string(),
    toolVersion: z.string(),
    planDigest: z.string(),
    /** Absolute expiry (ms since epoch): a persisted deadline, re-armed after a crash. */
    expiresAt: z.number().int(),
    /** The normalized execution plan a person approves (argv, cwd, env names, paths). */
    plan: z.record(z.string(), z.unknown()).optional(),
    /** Resources the call touches. */
    scope: z.array(z.object({ key: z.string(), mode: z.enum(['read', 'write']) })).optional(),
    rule: z.string().optional(),
    reason: z.string().nullable().optional(),
    /** What the person is shown (a diff, the patch, the argv); absent in logs written before it existed. */
    preview: ApprovalPreviewSchema.optional(),
  }),
  'approval/granted': z.object({
    approvalId: z.string(),
    by: z.string(),
    /** The inbox message that carried the answer. */
    messageId: z.string().optional(),
    /** Allow the same tool and plan again for this agent without asking. */
    always: z.boolean().optional(),
  }),
  'approval/denied': z.object({
    approvalId: z.string(),
    by: z.string(),
    reason: z.string().nullable(),
    messageId: z.string().optional(),
  }),
  'tool/start': z.object({
    name: z.string(),
    input: z.unknown(),
    effects: EffectsSchema,
    idempotencyKey: z.string(),
    rerun: z.boolean(),
    /** The call's arguments were stored as this blob: `input` is their parse with long strings cut. */
    argumentsRef: BlobRefSchema.optional(),
    /**
     * What the tool's `preimage` recorded of the world it is about to change (e.g. a file's
     * identity), taken just before this start: `reconcile` compares the world with it after a crash.
     */
    preimage: z.unknown().optional(),
  }),
  /**
   * Recovery asked a tool with `reconcile` semantics what became of a call a crash left started:
   * `applied` (its result follows, carrying `output`), `not_applied` (it runs again) or
   * `unknown` (it ends `tool/outcome_unknown` with `reason`, after a person confirmed).
   */
  'tool/reconciled': z.object({
    verdict: z.enum(['applied', 'not_applied', 'unknown']),
    /** Why the outcome is unknown (the tool's answer, or the error it threw). */
    reason: z.string().nullable(),
    /** The observation of an applied call, redacted and within the observation budget. */
    output: z.string().nullable(),
    durationMs: z.number().int().nonnegative(),
    redactions: z.number().int().nonnegative().optional(),
  }),
  'tool/result': z.object({
    ok: z.boolean(),
    output: z.string(),
    error: ErrorInfoSchema.nullable(),
    durationMs: z.number().int().nonnegative(),
    /** Output over the observation budget, stored whole as a blob; `output` is its preview. */
    artifact: z
      .object({ id: z.string(), digest: z.string(), bytes: z.number().int().nonnegative(), binary: z.boolean() })
      .nullable()
      .optional(),
    /** Provenance: where the observation came from (`tool:<name>`) and how far it is trusted. */
    source: z.string().optional(),
    trust: z.enum(['trusted', 'untrusted']).optional(),
    /** Secrets redacted from the output before anyone saw it. */
    redactions: z.number().int().nonnegative().optional(),
    /**
     * The observation the model reads, kept out of the log (a sensitive answer): `output` then
     * says `[sensitive]`, and the request is built from this blob.
     */
    outputRef: BlobRefSchema.optional(),
  }),
  'tool/denied': z.object({ reason: z.string() }),
  /**
   * Spend reserved before it is allocated (design §6a). `attempt`: the worst case of one model
   * attempt (the prepared input's tokens plus the output cap, at the model's price), committed
   * with its `attempt/start`, before the request is sent. `tool_calls`: the calls of a step that
   * may run, committed with their `tool/call` events, before any is dispatched. Settled exactly
   * once by `budget/settled`.
   */
  'budget/reserved': z.object({
    reservationId: z.string(),
    scope: BudgetScopeSchema,
    kind: ReservationKindSchema,
    attemptId: z.string().optional(),
    /** The goal reserved against (scope `goal`). */
    goalId: z.string().optional(),
    /** Worst-case tokens (input + output cap); 0 for tool calls. */
    tokens: z.number().int().nonnegative(),
    /** Worst-case USD; null when the model has no known price (and no cost budget asked for one). */
    costUsd: z.number().nonnegative().nullable(),
    /** Tool calls reserved (kind `tool_calls`; kind `subagent`: the child's carve of them). */
    calls: z.number().int().nonnegative().optional(),
    /** Steps reserved (kind `subagent`: the child's carve of its parent's steps). */
    steps: z.number().int().nonnegative().optional(),
    /** Of the worst-case tokens, the output's share: streamed output past it cuts the stream. */
    outputTokens: z.number().int().nonnegative().optional(),
  }),
  /**
   * A reservation's end: `charged` with what was actually spent (at most the worst case but for
   * the provider's own count), or `released` when nothing was (a call never run).
   */
  'budget/settled': z.object({
    reservationId: z.string(),
    tokens: z.number().int().nonnegative(),
    costUsd: z.number().nonnegative().nullable(),
    calls: z.number().int().nonnegative().optional(),
    steps: z.number().int().nonnegative().optional(),
    outcome: z.enum(['charged', 'released']),
  }),
  /**
   * The model chose to end the turn `stopped` with a reason of its own (the built-in `stop` tool,
   * or a `{"kind": "stop"}` final answer under an output schema); the turn ends after its step.
   */
  'stop/decided': z.object({ reason: z.string(), via: z.enum(['tool', 'answer']) }),
  /**
   * The call ended without a result. `started`: a `tool/start` of it was committed (a call
   * cancelled by the budget or while deciding or awaiting approval never started). `confirmed`:
   * it is known to have stopped — it never ran, its tool has no effects, or its executor settled
   * after the abort. An effectful call that started and did not confirm ends
   * `tool/outcome_unknown` instead; `verify` checks it. Absent in logs written before them.
   */
  'tool/cancelled': z.object({ reason: z.string(), started: z.boolean().optional(), confirmed: z.boolean().optional() }),
  'tool/outcome_unknown': z.object({ reason: z.string() }),
  'step/end': z.object({
    /** `rejected`: the final answer failed validation; the turn decides whether to ask again. */
    outcome: z.enum(['tool_calls', 'final', 'rejected', 'stopped', 'failed', 'cancelled']),
    reason: z.string().nullable(),
    toolCalls: z.number().int().nonnegative(),
    /** Usage and cost (USD; null: unknown) of every attempt of the step. */
    usage: UsageSchema.optional(),
    costUsd: z.number().nonnegative().nullable().optional(),
  }),
  'inbox/received': z.object({
    messageId: z.string(),
    kind: z.string(),
    from: z.string(),
    content: z.string(),
    request: TurnRequestSchema.nullable(),
    /**
     * The content is kept out of the log (an answer that may be a secret): `content` is then
     * `[sensitive]` and the runtime reads the message from this blob.
     */
    contentRef: BlobRefSchema.optional(),
    /**
     * Secrets redacted from the content before it was committed (absent: none). A message that
     * held one, or whose content the log keeps out, is erased from the inbox once received.
     */
    redactions: z.number().int().positive().optional(),
  }),
  /**
   * An inbox message that was refused (e.g. an approval that did not come from a client). One
   * refused at the door, before it was received, names its kind and claimed sender here.
   */
  'inbox/cancelled': z.object({ messageId: z.string(), reason: z.string(), kind: z.string().optional(), from: z.string().optional() }),
  'recovery/started': z.object({
    fromSeq: z.number().int().nonnegative(),
    reason: z.string(),
    /** Messages a step had reserved that no prepared request included: `pending` again. */
    requeued: z.array(z.string()).optional(),
  }),
  'recovery/continuation': z.object({
    closed: z.array(z.string()),
    resume: z.enum(['step', 'turn', 'none']),
  }),
  'actor/rehydrated': z.object({
    snapshotSeq: z.number().int().nonnegative(),
    tailEvents: z.number().int().nonnegative(),
  }),
  /**
   * Committed by the recovering incarnation, first in its recovery: the previous one died (it left
   * work open and never released the actor). `epoch`: the incarnation that died; `lastSeq`: the
   * last seq of the log when it died (the last it wrote, or found if it wrote none); `point`: the
   * fault point that killed it when a fault record names one, else null (not known).
   */
  'actor/killed': z.object({
    point: z.string().nullable(),
    detectedBy: z.string(),
    epoch: z.number().int().nonnegative(),
    lastSeq: z.number().int().nonnegative(),
  }),
  /**
   * An incarnation let go of the actor on purpose with work still open (a host draining, a command
   * leaving a turn that waits for a person): what is open was left for the next one, not by a crash.
   */
  'actor/released': z.object({ reason: z.string() }),
  'actor/stopped': z.object({ reason: z.string() }),
  /**
   * The actor can do nothing more until a person answers (design §4, "parked facts"): committed
   * when its work is idle and what it waits on is a person's, so a client never infers a wait
   * from silence. `commands` are what a person runs to answer, one per line.
   */
  /**
   * A person asked the open turn to stop (Ctrl-C, `actorloop interrupt`, a gateway): committed
   * before anything is aborted, so every scope it ends is closed after it in the log.
   */
  'interrupt/requested': z.object({
    messageId: z.string(),
    by: z.string(),
    /** Queued follow-ups are kept for later turns or cancelled (`interrupt_follow_ups`). */
    followUps: z.enum(['keep', 'cancel']),
  }),
  /** The built-in `ask_user` tool asked a person a question; the turn waits for the answer. */
  'ask/asked': z.object({
    /** Stable: derived from the call, so a rerun after a crash finds the same question. */
    questionId: z.string(),
    question: z.string(),
    options: z.array(z.object({ id: z.string(), label: z.string() })),
    allowFreeText: z.boolean(),
    /** The answer reaches the model but never the event stream, client output or logs. */
    sensitive: z.boolean(),
    /** Absolute expiry (ms since epoch): a persisted deadline, re-armed after a crash. */
    expiresAt: z.number().int(),
  }),
  /** A person answered a question (or it expired, or the turn stopped waiting). */
  'ask/answered': z.object({
    questionId: z.string(),
    /** The inbox message that carried the answer; null when nobody answered (expired, cancelled). */
    messageId: z.string().nullable(),
    by: z.string(),
    outcome: z.enum(['answered', 'expired', 'cancelled']),
    /** The option chosen, if any. */
    optionId: z.string().nullable(),
    /** The answer as the model reads it; `[sensitive]` when the question was sensitive. */
    answer: z.string(),
    /** Where a sensitive answer is kept for the model (never in the log). */
    answerRef: BlobRefSchema.optional(),
  }),
  /** The agent's plan, whole, with its version (one more than the plan it replaced). */
  'plan/replaced': z.object({
    version: z.number().int().positive(),
    items: z.array(z.object({ content: z.string(), status: z.enum(['pending', 'in_progress', 'completed']) })),
    explanation: z.string().nullable(),
  }),
  /**
   * The completion policy refused a final answer (design §6a): what is missing, in words the model
   * can act on; the model reads them in its next step. Committed with the `step/end` of that answer.
   */
  'completion/rejected': z.object({
    policy: CompleteWhenSchema,
    missing: z.array(z.string()).min(1),
    /** The goal revision the refusal was decided against; null while the turn has no goal. */
    goalRevision: z.number().int().nonnegative().nullable(),
    /** That goal was active then: at the limit under `block` it is what the turn blocks (absent in older logs: false). */
    goalActive: z.boolean().optional(),
  }),
  /** A goal that outlives a turn (design §5), at revision 0. */
  'goal/created': z.object({
    goalId: z.string(),
    objective: z.string(),
    budget: GoalBudgetSchema,
    maxIdleTurns: z.number().int().positive(),
  }),
  /**
   * A change of the goal, at exactly one revision past the one it replaced (`expected` names it:
   * an update against another revision is refused, never committed). `by`: who changed it — the
   * model (`update_goal`), a person (`actorloop goal`, its inbox message in `messageId`) or the
   * runtime (a budget, no progress, a completion decided). `requested: complete`: the model asked
   * to complete, which the completion decision settles at the turn's end. `usage`: what the goal
   * had spent when it changed (`verify` checks it against the attempts).
   */
  'goal/updated': z.object({
    goalId: z.string(),
    revision: z.number().int().positive(),
    expected: z.number().int().nonnegative(),
    phase: GoalPhaseSchema,
    reason: z.string().nullable(),
    by: z.enum(['model', 'person', 'runtime']),
    messageId: z.string().optional(),
    requested: z.literal('complete').optional(),
    usage: GoalUsageSchema,
  }),
  'actor/parked': z.object({
    waitingFor: z.enum(['approval', 'question']),
    /** The approvals (or questions) waited on, soonest expiry first. */
    ids: z.array(z.string()).min(1),
    commands: z.array(z.string()),
  }),
  // a parent and its children (design §6b): spawn, messages, notices, waits
  ...SUBAGENT_EVENT_DATA,
  // what the model is given besides the history (design §10): docs, skills, memory
  ...CONTEXT_EVENT_DATA,
  ...COMPACTION_EVENT_DATA,
  // a job's own log (design §11b): its start, every move of its machine, its notice to its owner
  ...JOB_EVENT_DATA,
  // a workflow run's own log (design §11b): its file, each node's attempts, its end
  ...WORKFLOW_EVENT_DATA,
} as const;

/** Every event type this version writes. */
export type EventType = keyof typeof EventDataSchemas;
/** The data of event type T. */
export type EventData<T extends EventType> = z.infer<(typeof EventDataSchemas)[T]>;

const ScopeFields = {
  turn: z.string().optional(),
  step: z.string().optional(),
  attempt: z.string().optional(),
  call: z.string().optional(),
};

const EnvelopeFields = {
  v: z.literal(EVENT_VERSION),
  seq: z.number().int().positive(),
  id: z.string(),
  at: z.string(),
  epoch: z.number().int().nonnegative(),
  actor: z.string(),
  ...ScopeFields,
};

function envelope<T extends EventType>(type: T) {
  return z.object({ ...EnvelopeFields, type: z.literal(type), data: EventDataSchemas[type] });
}

const eventTypes = Object.keys(EventDataSchemas) as EventType[];

/** Schema of one committed event: the envelope with its typed data. */
export const EventSchema = z.discriminatedUnion(
  'type',
  eventTypes.map((t) => envelope(t)) as unknown as [ReturnType<typeof envelope<'turn/start'>>],
);

/** One committed event of type T. */
export type EventOf<T extends EventType> = {
  v: typeof EVENT_VERSION;
  seq: number;
  id: string;
  at: string;
  epoch: number;
  actor: string;
  turn?: string;
  step?: string;
  attempt?: string;
  call?: string;
  type: T;
  data: EventData<T>;
};

/** Any committed event. */
export type ActorEvent = { [T in EventType]: EventOf<T> }[EventType];

/** An event before it is committed: the log stamps v, seq, id, at, epoch and actor. */
export type EventDraft = {
  [T in EventType]: {
    type: T;
    data: EventData<T>;
    turn?: string;
    step?: string;
    attempt?: string;
    call?: string;
    /** Override of the commit time (ISO 8601); defaults to the clock. */
    at?: string;
  };
}[EventType];

/** Builds a draft with typed data. */
export function draft<T extends EventType>(
  type: T,
  data: EventData<T>,
  scope: { turn?: string; step?: string; attempt?: string; call?: string } = {},
): Extract<EventDraft, { type: T }> {
  return { type, data, ...scope } as Extract<EventDraft, { type: T }>;
}

/** Schema of one commit on the wire: one JetStream message with ≥1 events. */
export const CommitSchema = z.object({ events: z.array(EventSchema).min(1) });

/** Parses one event, throwing a zod error that names the field at fault. */
export function parseEvent(raw: unknown): ActorEvent {
  return EventSchema.parse(raw) as ActorEvent;
}
