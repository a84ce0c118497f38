import { assertNever } from '../protocol/errors.js';
import type { ActorEvent, ApprovalPreview, TurnOutcome, TurnRequest, TurnSettings } from '../protocol/events.js';
import { NEXT_STEP_KINDS, requeue, requeueClaimed, setState, without } from './inbox-delivery.js';
import { addCost, addUsage, ZERO_USAGE, type BlobRef, type HistoryItem, type Usage } from '../protocol/history.js';
import { noteEpochs } from './incarnations.js';
import { emptyFacts, foldFacts, type CompletionFacts } from './completion-facts.js';
import { foldGoal, type GoalRecord } from './goal-projection.js';
import { foldReserved, foldSettled, type BudgetSpend, type ReservationRecord } from './budget-projection.js';
import { foldContext, type ContextState } from './context-projection.js';
import { foldCompaction, type CompactionState } from './compaction-projection.js';
import { foldOwnerJobs, type OwnerJobRecord } from './job-projection.js';
import { foldSubagents, type ChildRecord, type NoticeOwed, type ParentLink, type SpawnRequestRecord, type WaitRecord } from './subagent-projection.js';

export type { BudgetSpend, ReservationRecord } from './budget-projection.js';

/** Version of the projection's shape; snapshots of another version are ignored. */
export const PROJECTION_VERSION = 1;

/** States of an inbox item (design §6); they live in the log. */
export type InboxItemState = 'pending' | 'reserved' | 'included' | 'cancelled';

/** A received inbox message, until a turn includes it. */
export interface InboxItem {
  state: InboxItemState;
  kind: string;
  content: string;
  request: TurnRequest | null;
  /** Where content kept out of the log is (a sensitive answer). */
  contentRef?: BlobRef;
  /** Secrets redacted from the content before it was committed. */
  redactions?: number;
}

/** A tool call of the open step. */
export interface OpenCall {
  callId: string;
  index: number;
  providerId: string;
  name: string;
  /** The model's arguments, or their preview when `argumentsRef` names the blob holding them whole. */
  arguments: string;
  argumentsRef?: BlobRef;
  status: 'valid' | 'unknown_tool' | 'invalid_arguments';
  effects: 'none' | 'possible' | null;
  started: boolean;
  /** What the model sees for this call once it ended. */
  observation: string | null;
  /** The blob the model reads instead of `observation` (a sensitive answer the log never holds). */
  observationRef?: BlobRef;
  /** The approval asked for this call, while one is open or granted. */
  approvalId?: string;
  /** The last policy decision on the call: the rule that matched and why. */
  decided?: { decision: 'allow' | 'ask' | 'deny'; rule: string; reason: string | null };
  /** What the last allowing policy decision granted the call's process. */
  grant?: { network: boolean; envAllow: string[] };
  /** Its observation is untrusted (tool output): the history holds untrusted content once the step closes. */
  untrusted?: boolean;
  /** What the tool's `preimage` recorded in the call's last `tool/start`, for `reconcile`. */
  preimage?: unknown;
  /** Its plan is a verification of the turn's `verifyCommands` (the completion policy). */
  verifies?: boolean;
  /** Seq of its last `tool/start`: a verification counts for changes ended before it. */
  startedAt?: number;
}

/** An approval asked for (design §8): bound to one call, one plan digest, one tool version, an expiry. */
export interface ApprovalRecord {
  callId: string;
  tool: string;
  toolVersion: string;
  planDigest: string;
  /** Absolute expiry, ms since epoch. */
  expiresAt: number;
  /** `used` once the call it approved started: an approval is single use. */
  state: 'pending' | 'granted' | 'denied' | 'used';
  always: boolean;
  /** What a person is asked to approve: the normalized plan, the resources it touches, the rule that asked and why. */
  plan?: Record<string, unknown>;
  scope?: Array<{ key: string; mode: 'read' | 'write' }>;
  rule?: string;
  reason?: string | null;
  /** What the person is shown (a diff, the patch, the argv), as recorded where it was asked; absent in older logs. */
  preview?: ApprovalPreview;
}

/** A question the `ask_user` tool asked a person (design §6): open until answered, expired or cancelled. */
export interface QuestionRecord {
  callId: string;
  question: string;
  options: Array<{ id: string; label: string }>;
  allowFreeText: boolean;
  sensitive: boolean;
  /** Absolute expiry, ms since epoch. */
  expiresAt: number;
  /** When it was asked, ms since epoch. */
  askedAt?: number;
  state: 'pending' | 'answered' | 'expired' | 'cancelled';
}

/** The agent's plan as `update_plan` last wrote it. */
export interface PlanRecord {
  version: number;
  items: Array<{ content: string; status: 'pending' | 'in_progress' | 'completed' }>;
  explanation: string | null;
  /** The `update_plan` call that wrote it, so a rerun of that call after a crash writes it no second time. */
  callId?: string;
}

/** The actor's state folded from its log (design §4). Plain JSON, so snapshots store it as is. */
export interface Projection {
  version: number;
  actorId: string;
  seq: number;
  epoch: number;
  /** Closed model-visible history: only whole Steps are in it. */
  history: HistoryItem[];
  /** Items of the open step, closed into `history` (in call order) when the step ends. */
  pending: {
    assistant: HistoryItem | null;
    calls: OpenCall[];
    feedback?: string;
    /** The completion policy refused the step's answer: the model reads what is missing next step. */
    completion?: { policy: string; missing: string[] };
  };
  turns: number;
  openTurn: {
    id: string;
    settings: TurnSettings;
    startedAt: string;
    steps: number;
    toolCalls: number;
    usage: Usage;
    /** USD so far; null once any attempt had no known price. */
    costUsd: number | null;
    /** A person's interrupt is committed: the turn ends cancelled, a recovery first aborts it. */
    interrupted?: boolean;
    /** What the turn's settled budget reservations charged (made on the first settlement). */
    spend?: BudgetSpend;
    /** The model's stop decision (`stop/decided`), once it made one. */
    stopReason?: string;
  } | null;
  openStep: {
    id: string;
    index: number;
    usage?: Usage;
    costUsd?: number | null;
    /** The step's context held untrusted content since the last user message (provenance). */
    untrusted?: boolean;
  } | null;
  /** `kind: compaction`: the attempt writes a checkpoint's summary. */
  openAttempt: { id: string; index: number; requestDigest: string; kind?: 'compaction' } | null;
  lastPrepared: { digest: string; bytes: number } | null;
  inbox: Record<string, InboxItem>;
  usage: Usage;
  lastTurn: {
    id: string;
    outcome: TurnOutcome;
    reason: string | null;
    answer: string | null;
    /** Its goal goes on in a `goal_continuation` turn (absent: it does not). */
    goalContinues?: boolean;
  } | null;
  /** Settings of the last turn, the defaults of a follow-up that names none. */
  lastSettings: TurnSettings | null;
  /** Model responses consumed (succeeded or failed attempts): the scripted model's cursor. */
  modelResponses: number;
  stopped: boolean;
  /** Approvals of the open turn by ID (absent in snapshots written before approvals existed). */
  approvals?: Record<string, ApprovalRecord>;
  /** `tool\u0000planDigest` of plans a person allowed for good ("always"). */
  alwaysAllowed?: string[];
  /** Artifact ID → blob digest, for `artifact_read`. */
  artifacts?: Record<string, string>;
  /** Untrusted content (tool output) entered the history since the last user message. */
  untrusted?: boolean;
  /**
   * Set while the log's last event is `actor/released`: its incarnation let go of the actor on
   * purpose, so what is open was not left by a crash. Any later event clears it.
   */
  released?: { epoch: number; reason: string };
  /**
   * Set by `actor/parked`: what the actor waits on a person for. Any later event but
   * `actor/released` clears it (the wait is over, or the next incarnation parks again).
   */
  parked?: { waitingFor: 'approval' | 'question'; ids: string[]; commands: string[] };
  /** Questions asked by ID (made on first use); answered ones stay, so a second answer is refused. */
  questions?: Record<string, QuestionRecord>;
  /** The current plan (absent: none written yet). */
  plan?: PlanRecord;
  /**
   * Delivery (design §6): `steer` and `inject` messages still `pending`, oldest first: the next
   * step claims them all. Made on first use.
   */
  nextStep?: string[];
  /** Messages the open step reserved whose content is not in the history yet (its prepare adds it). */
  claimed?: string[];
  /** Reserved messages whose content is in the history but no prepared request held yet. */
  unsent?: string[];
  /**
   * The distinct epochs the log shows, in order (`incarnationOf` numbers them 1, 2, 3… for
   * people). Absent in snapshots written before it: then counted from the snapshot on.
   */
  epochs?: number[];
  /** Budget reservations not settled yet, by ID (made on first use; settled ones are removed). */
  reservations?: Record<string, ReservationRecord>;
  /**
   * What the completion policy decides on (evidence retrieved, changes and verifications of the
   * open turn). Made on first use; absent in snapshots written before it, which then count from
   * the snapshot on.
   */
  completion?: CompletionFacts;
  /** The agent's goal (absent: it has none). */
  goal?: GoalRecord;
  /** The agent's children by ID (made on first spawn). */
  children?: Record<string, ChildRecord>;
  /** Spawn requests whose child is not created yet, by request ID. */
  spawnRequests?: Record<string, SpawnRequestRecord>;
  /** Calls of the open step that wait for children, by call ID. */
  waits?: Record<string, WaitRecord>;
  /** A child's parent, from its task (absent: a top-level agent). */
  parentLink?: ParentLink;
  /** A child's turn ended and its parent has not had the notice yet. */
  noticeOwed?: NoticeOwed;
  /** A child's open turn: the messages it took (its place in the tree is held under their IDs). */
  turnMessages?: string[];
  /** Docs, skills and memory the model is given besides the history (made on first use). */
  context?: ContextState;
  /** Compaction: the history revision, what checkpoints must keep, the checkpoints (made on first use). */
  compaction?: CompactionState;
  /** The jobs this agent started and the notices it had of them, by job ID (made on first use). */
  jobs?: Record<string, OwnerJobRecord>;
}

/** The projection of an empty log. */
export function emptyProjection(actorId: string): Projection {
  return {
    version: PROJECTION_VERSION,
    actorId,
    seq: 0,
    epoch: 0,
    history: [],
    pending: { assistant: null, calls: [] },
    turns: 0,
    openTurn: null,
    openStep: null,
    openAttempt: null,
    lastPrepared: null,
    inbox: {},
    usage: ZERO_USAGE,
    lastTurn: null,
    lastSettings: null,
    modelResponses: 0,
    stopped: false,
    // approvals, alwaysAllowed, artifacts and untrusted are made on first use: a parked agent
    // (thousands per host) carries none of them
  };
}

/** True when a turn ended saying its goal goes on and no turn has started since: the scheduler owes the continuation. */
export function continuationPending(p: Projection): boolean {
  return p.openTurn === null && p.lastTurn?.goalContinues === true;
}

/** The questions still waiting for a person, soonest expiry first. */
export function pendingQuestions(p: Projection): Array<{ questionId: string } & QuestionRecord> {
  return Object.entries(p.questions ?? {})
    .filter(([, q]) => q.state === 'pending')
    .map(([questionId, q]) => ({ questionId, ...q }))
    .sort((x, y) => x.expiresAt - y.expiresAt);
}

/** Approvals of the projection (created on first use for projections from older snapshots). */
export function approvalsOf(p: Projection): Record<string, ApprovalRecord> {
  return (p.approvals ??= {});
}

// The records are plain objects (snapshots decode to them): a lookup by an ID someone gave must
// not find what every object inherits (`constructor`, `toString`, `__proto__`).

/** The approval of the open turn with this ID, if it was asked for. */
export function approvalById(p: Projection, approvalId: string): ApprovalRecord | undefined {
  return p.approvals && Object.hasOwn(p.approvals, approvalId) ? p.approvals[approvalId] : undefined;
}

/** The question with this ID, if it was asked. */
export function questionById(p: Projection, questionId: string): QuestionRecord | undefined {
  return p.questions && Object.hasOwn(p.questions, questionId) ? p.questions[questionId] : undefined;
}

/** Approvals still waiting for a person, soonest expiry first. */
export function pendingApprovals(p: Projection): Array<{ approvalId: string } & ApprovalRecord> {
  return Object.entries(p.approvals ?? {})
    .filter(([, a]) => a.state === 'pending')
    .map(([approvalId, a]) => ({ approvalId, ...a }))
    .sort((x, y) => x.expiresAt - y.expiresAt);
}

function endCall(p: Projection, callId: string | undefined, observation: string): void {
  const call = p.pending.calls.find((c) => c.callId === callId);
  if (call) call.observation = observation;
}

/**
 * Folds one event into the projection, in place, O(1) amortized: never a re-read of the log.
 * Deterministic: the same events always give the same projection.
 */
export function foldEvent(p: Projection, e: ActorEvent): Projection {
  p.seq = e.seq;
  if (p.released !== undefined) delete p.released;
  if (p.parked !== undefined && e.type !== 'actor/released') delete p.parked;
  if (e.epoch > p.epoch) p.epoch = e.epoch;
  noteEpochs((p.epochs ??= []), e);
  if (FACT_EVENTS.has(e.type) && (p.completion !== undefined || e.type !== 'turn/start')) {
    const call = e.call === undefined ? null : (p.pending.calls.find((c) => c.callId === e.call) ?? null);
    foldFacts((p.completion ??= emptyFacts()), e, call, p.openTurn?.settings.workspace ?? '');
  }
  // before the rest: it reads the plan an update replaces and the calls of the step
  foldGoal(p, e);
  foldSubagents(p, e);
  foldContext(p, e);
  foldCompaction(p, e);
  foldOwnerJobs(p, e);
  switch (e.type) {
    case 'inbox/received':
      p.inbox[e.data.messageId] = { state: 'pending', kind: e.data.kind, content: e.data.content, request: e.data.request };
      if (e.data.contentRef) p.inbox[e.data.messageId]!.contentRef = e.data.contentRef;
      if (e.data.redactions) p.inbox[e.data.messageId]!.redactions = e.data.redactions;
      if (NEXT_STEP_KINDS.has(e.data.kind)) (p.nextStep ??= []).push(e.data.messageId);
      break;
    case 'turn/start':
      p.lastSettings = e.data.settings;
      p.openTurn = { id: e.turn!, settings: e.data.settings, startedAt: e.at, steps: 0, toolCalls: 0, usage: ZERO_USAGE, costUsd: 0 };
      // claimed by the turn: its `user/message` events follow in this commit, and its first request includes them
      for (const id of e.data.messageIds) setState(p, id, 'reserved');
      if (p.nextStep) p.nextStep = without(p.nextStep, e.data.messageIds);
      break;
    case 'user/message': {
      p.history.push({ role: 'user', content: e.data.content });
      if (p.untrusted) p.untrusted = false;
      const item = p.inbox[e.data.messageId];
      if (item?.state === 'reserved') {
        // The content lives on in `history`; the ID stays, so a redelivery is recognised.
        p.inbox[e.data.messageId] = { ...item, content: '', request: null };
        if (p.claimed) p.claimed = without(p.claimed, [e.data.messageId]);
        (p.unsent ??= []).push(e.data.messageId);
      }
      break;
    }
    case 'step/start':
      p.openStep = { id: e.step!, index: e.data.index, usage: ZERO_USAGE, costUsd: 0, untrusted: p.untrusted === true };
      p.pending = { assistant: null, calls: [] };
      if (p.openTurn) p.openTurn.steps += 1;
      if (e.data.messageIds && e.data.messageIds.length > 0) {
        for (const id of e.data.messageIds) setState(p, id, 'reserved');
        p.claimed = [...(p.claimed ?? []), ...e.data.messageIds];
        if (p.nextStep) p.nextStep = without(p.nextStep, e.data.messageIds);
      }
      break;
    case 'request/prepared':
      p.lastPrepared = { digest: e.data.digest, bytes: e.data.bytes };
      if (e.data.messageIds && e.data.messageIds.length > 0) {
        for (const id of e.data.messageIds) setState(p, id, 'included');
        if (p.unsent) p.unsent = without(p.unsent, e.data.messageIds);
      }
      break;
    case 'attempt/start':
      p.openAttempt = e.data.kind === 'compaction'
        ? { id: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest, kind: 'compaction' }
        : { id: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest };
      break;
    case 'attempt/end': {
      const summary = p.openAttempt?.kind === 'compaction';
      p.openAttempt = null;
      p.usage = addUsage(p.usage, e.data.usage);
      if (p.openStep) {
        p.openStep.usage = addUsage(p.openStep.usage ?? ZERO_USAGE, e.data.usage);
        p.openStep.costUsd = addCost(p.openStep.costUsd ?? 0, e.data.costUsd ?? null);
      }
      if (p.openTurn) {
        p.openTurn.usage = addUsage(p.openTurn.usage, e.data.usage);
        p.openTurn.costUsd = addCost(p.openTurn.costUsd, e.data.costUsd ?? null);
      }
      // a compaction attempt's answer comes from the script's `summaries`, not its responses
      if (!summary && (e.data.outcome === 'succeeded' || e.data.outcome === 'failed' || e.data.outcome === 'overflow')) p.modelResponses += 1;
      break;
    }
    case 'assistant/accepted':
      p.pending.assistant = { role: 'assistant', content: e.data.content, toolCalls: e.data.toolCalls };
      // a blob-stored answer: the history keeps the reference, and the request sent resolves it
      if (e.data.contentRef) p.pending.assistant.contentRef = e.data.contentRef;
      break;
    case 'tool/call':
      p.pending.calls.push({
        callId: e.call!,
        index: e.data.index,
        providerId: e.data.providerId,
        name: e.data.name,
        arguments: e.data.arguments,
        status: e.data.status,
        effects: e.data.effects,
        started: false,
        observation: null,
      });
      if (e.data.argumentsRef) p.pending.calls[p.pending.calls.length - 1]!.argumentsRef = e.data.argumentsRef;
      break;
    case 'tool/start': {
      const call = p.pending.calls.find((c) => c.callId === e.call);
      if (call) {
        call.started = true;
        call.startedAt = e.seq;
        if (e.data.preimage !== undefined) call.preimage = e.data.preimage;
        else if (call.preimage !== undefined) delete call.preimage;
      }
      const approval = call?.approvalId ? p.approvals?.[call.approvalId] : undefined;
      if (approval?.state === 'granted') approval.state = 'used';
      if (p.openTurn && !e.data.rerun) p.openTurn.toolCalls += 1;
      break;
    }
    case 'tool/result':
      endCall(p, e.call, e.data.output);
      if (e.data.outputRef) {
        const call = p.pending.calls.find((c) => c.callId === e.call);
        if (call) call.observationRef = e.data.outputRef;
      }
      if (e.data.artifact) (p.artifacts ??= {})[e.data.artifact.id] = e.data.artifact.digest;
      if (e.data.trust === 'untrusted') markUntrusted(p, e.call);
      break;
    case 'tool/denied':
      endCall(p, e.call, `Denied: ${e.data.reason}`);
      break;
    case 'tool/cancelled':
      endCall(p, e.call, `Cancelled: ${e.data.reason}`);
      break;
    case 'tool/outcome_unknown':
      endCall(p, e.call, `Outcome unknown: ${e.data.reason}`);
      break;
    case 'step/end':
      closeStep(p);
      requeueClaimed(p);
      break;
    case 'turn/end':
      if (p.approvals) p.approvals = {};
      p.turns += 1;
      p.lastTurn = { id: e.turn!, outcome: e.data.outcome, reason: e.data.reason, answer: e.data.answer };
      if (e.data.goalContinues === true) p.lastTurn.goalContinues = true;
      p.openTurn = null;
      p.openStep = null;
      p.openAttempt = null;
      break;
    case 'actor/stopped':
      p.stopped = true;
      break;
    case 'actor/released':
      p.released = { epoch: e.epoch, reason: e.data.reason };
      break;
    case 'actor/parked':
      p.parked = { waitingFor: e.data.waitingFor, ids: [...e.data.ids], commands: [...e.data.commands] };
      break;
    case 'assistant/rejected':
      // the refused answer and why stay in the history: the next step answers again knowing both
      p.pending.assistant = { role: 'assistant', content: e.data.content ?? null, toolCalls: [] };
      if (e.data.contentRef) p.pending.assistant.contentRef = e.data.contentRef;
      p.pending.feedback = e.data.reason;
      break;
    case 'approval/requested': {
      approvalsOf(p)[e.data.approvalId] = {
        callId: e.call!,
        tool: e.data.tool,
        toolVersion: e.data.toolVersion,
        planDigest: e.data.planDigest,
        expiresAt: e.data.expiresAt,
        state: 'pending',
        always: false,
        ...(e.data.plan ? { plan: e.data.plan } : {}),
        ...(e.data.scope ? { scope: e.data.scope } : {}),
        ...(e.data.rule ? { rule: e.data.rule } : {}),
        ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
        ...(e.data.preview ? { preview: e.data.preview } : {}),
      };
      const call = p.pending.calls.find((c) => c.callId === e.call);
      if (call) call.approvalId = e.data.approvalId;
      break;
    }
    case 'approval/granted': {
      const a = approvalsOf(p)[e.data.approvalId];
      if (a) {
        a.state = 'granted';
        a.always = e.data.always === true;
        if (a.always) (p.alwaysAllowed ??= []).push(`${a.tool}\u0000${a.planDigest}`);
      }
      includeMessage(p, e.data.messageId);
      break;
    }
    case 'approval/denied': {
      const a = approvalsOf(p)[e.data.approvalId];
      if (a) a.state = 'denied';
      includeMessage(p, e.data.messageId);
      break;
    }
    case 'inbox/cancelled': {
      const item = p.inbox[e.data.messageId];
      // refused at the door: the ID is kept all the same, so a redelivery is recognised
      p.inbox[e.data.messageId] = { ...(item ?? { kind: e.data.kind ?? 'unknown' }), state: 'cancelled', content: '', request: null };
      if (p.nextStep) p.nextStep = without(p.nextStep, [e.data.messageId]);
      break;
    }
    case 'policy/decided': {
      const call = p.pending.calls.find((c) => c.callId === e.call);
      if (call) call.decided = { decision: e.data.decision, rule: e.data.rule, reason: e.data.reason };
      if (call && e.data.verification === true) call.verifies = true;
      else if (call?.verifies !== undefined) delete call.verifies;
      if (call && e.data.decision === 'allow') call.grant = { network: e.data.network === true, envAllow: e.data.envAllow ?? [] };
      break;
    }
    case 'ask/asked':
      (p.questions ??= {})[e.data.questionId] = {
        callId: e.call ?? '',
        question: e.data.question,
        options: e.data.options,
        allowFreeText: e.data.allowFreeText,
        sensitive: e.data.sensitive,
        expiresAt: e.data.expiresAt,
        askedAt: Date.parse(e.at),
        state: 'pending',
      };
      break;
    case 'ask/answered': {
      const q = p.questions?.[e.data.questionId];
      if (q) q.state = e.data.outcome;
      includeMessage(p, e.data.messageId ?? undefined);
      break;
    }
    case 'completion/rejected':
      p.pending.completion = { policy: e.data.policy, missing: [...e.data.missing] };
      break;
    case 'plan/replaced':
      p.plan = { version: e.data.version, items: e.data.items, explanation: e.data.explanation, ...(e.call ? { callId: e.call } : {}) };
      break;
    case 'interrupt/requested':
      includeMessage(p, e.data.messageId);
      if (p.openTurn) p.openTurn.interrupted = true;
      break;
    case 'recovery/started':
      if (e.data.requeued && e.data.requeued.length > 0) {
        if (p.claimed) p.claimed = without(p.claimed, e.data.requeued);
        for (const id of e.data.requeued) requeue(p, id);
      }
      break;
    case 'budget/reserved':
      foldReserved(p, e);
      break;
    case 'budget/settled':
      foldSettled(p, e);
      break;
    case 'stop/decided':
      if (p.openTurn) p.openTurn.stopReason = e.data.reason;
      break;
    case 'goal/updated':
      includeMessage(p, e.data.messageId);
      break;
    case 'goal/created':
    case 'subagent/spawn_requested':
    case 'subagent/spawned':
    case 'subagent/message_sent':
    case 'subagent/reported':
    case 'subagent/completed':
    case 'subagent/notified':
    case 'subagent/waiting':
    case 'subagent/detached':
    case 'recovery/continuation':
    case 'actor/rehydrated':
    case 'actor/killed':
    case 'tool/reconciled':
    case 'doc/loaded':
    case 'skills/indexed':
    case 'skill/loaded':
    case 'memory/loaded':
    case 'memory/changed':
    case 'retrieval/loaded':
    case 'compaction/started':
    case 'checkpoint/committed':
    case 'compaction/rejected':
    // a job's own log: folded by job-projection.ts
    case 'job/created': case 'job/started': case 'job/phase': case 'job/cancel_requested': case 'job/notified':
    // a workflow run's own log: folded by src/jobs/workflow-run.ts
    case 'workflow/created': case 'node/started': case 'node/ended': case 'workflow/cancel_requested': case 'workflow/ended':
      break;
    default:
      assertNever(e, 'event');
  }
  return p;
}

/** An answer message (approval) was consumed: its ID stays so a redelivery is recognised. */
function includeMessage(p: Projection, messageId: string | undefined): void {
  const item = messageId ? p.inbox[messageId] : undefined;
  if (item) p.inbox[messageId!] = { ...item, state: 'included', content: '', request: null };
}

/** The open step's untrusted observation enters the history when the step closes. */
function markUntrusted(p: Projection, callId: string | undefined): void {
  const call = p.pending.calls.find((c) => c.callId === callId);
  if (call) call.untrusted = true;
}

/** Moves the open step's items into the closed history, tool results in call order. */
function closeStep(p: Projection): void {
  const { assistant, calls, feedback, completion } = p.pending;
  if (assistant && feedback !== undefined) {
    p.history.push(assistant, {
      role: 'user',
      content: `Your final answer was not accepted: ${feedback}. Answer again with only JSON that matches the required output schema.`,
    });
  } else if (assistant) {
    p.history.push(assistant);
    const byIndex = [...calls].sort((a, b) => a.index - b.index);
    for (const c of byIndex) {
      const content = c.observation ?? 'No result was recorded.';
      const item: HistoryItem = c.observationRef
        ? { role: 'tool', callId: c.providerId, name: c.name, content, contentRef: c.observationRef }
        : { role: 'tool', callId: c.providerId, name: c.name, content };
      // the request wraps it as data from outside (design §10): the model is told not to obey it
      if (c.untrusted) item.untrusted = true;
      p.history.push(item);
      if (c.untrusted) p.untrusted = true;
    }
    if (completion) p.history.push({ role: 'user', content: completionFeedback(completion) });
  }
  p.openStep = null;
  p.pending = { assistant: null, calls: [] };
}

/** Events whose facts the completion policy folds (`completion-facts.ts`). */
const FACT_EVENTS: ReadonlySet<ActorEvent['type']> = new Set<ActorEvent['type']>([
  'turn/start', 'completion/rejected', 'tool/result', 'tool/outcome_unknown', 'tool/cancelled',
]);

/** What the model reads after an answer the completion policy refused. */
export function completionFeedback(r: { policy: string; missing: string[] }): string {
  return `Your answer does not complete the task yet (completion policy "${r.policy}"): ${r.missing.join('; ')}. Do what is missing, then give your final answer again.`;
}
