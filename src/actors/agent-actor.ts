import type { Logger } from 'pino';
import { EVENT_VERSION, type ActorEvent, type EventDraft, type TurnOutcome } from '../protocol/events.js';
import { ActorloopError, StoreError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { InboxChannel } from '../bus/subjects.js';
import { admit } from './inbox-door.js';
import type { ModelAdapter, ModelStreamEvent, PreparedRequest } from '../model/model-port.js';
import type { Price } from '../model/pricing.js';
import type { BlobStore } from '../store/blob-port.js';
import { OutputTexts } from './output-blobs.js';
import type { ActorLogWriter } from '../store/log-port.js';
import { foldEvent, PROJECTION_VERSION, type Projection } from '../store/projection.js';
import type { SnapshotStore } from '../store/snapshots.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { TurnSettings } from '../protocol/events.js';
import { ActorDropped, type FaultInjector } from './faults.js';
import { MachineSet, type Effect, type MachineSnapshots } from './machine-set.js';
import { performEffect } from './agent-effects.js';
import type { ToolingPorts } from './tooling.js';
import { ToolRunner } from './tool-runner.js';
import { ApprovalWatch } from './approval-watch.js';
import { pendingApprovals } from '../store/projection.js';
import { isoOf } from '../protocol/iso-time.js';
import { snapshotDue, withContinuation, type CommitWaiter, type Launch, type RecoveryNote } from './commit-batch.js';

/** The ports an agent actor acts through (design §2): everything outside the machines. */
export interface AgentPorts {
  log: ActorLogWriter;
  blobs: BlobStore;
  snapshots: SnapshotStore | null;
  tools: ToolRegistry;
  /** Policy rules, sandbox, secrets and budgets of the tool pipeline. */
  tooling: ToolingPorts;
  /** Builds the model adapter for a turn; `cursor` is how many responses the log says were consumed. */
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  /** Time; `sleep` (optional) waits on this clock, so retry backoff follows a fake clock in tests. */
  clock: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  /** The price of a model, for the cost of each attempt; null (or absent): unknown. */
  pricing?(model: string): Price | null;
  faults: FaultInjector;
  logger: Logger;
  /** Called with each commit once JetStream acknowledged it. */
  onCommit?(events: ActorEvent[]): void;
  /** Called with live stream deltas of a model attempt (never committed). */
  onDelta?(delta: ModelStreamEvent): void;
  /** Called once when this incarnation stops or fails: its log writer stops retrying commits. */
  onHalt?(): void;
}

/** Options of an agent actor. */
export interface AgentActorOptions {
  actorId: string;
  rootId: string;
  ports: AgentPorts;
  projection: Projection;
  machines: MachineSnapshots | null;
  /** Save a snapshot after this many events. */
  snapshotEvery: number;
  /** Seq of the snapshot this incarnation started from (0: none). */
  snapshotSeq: number;
}

/** How a turn ended, as `turn/end` recorded it. */
export interface TurnEnded {
  turnId: string;
  outcome: TurnOutcome;
  reason: string | null;
  answer: string | null;
  /** USD of the turn's attempts; null when the model has no known price. */
  costUsd: number | null;
}

/**
 * One agent: its projection, its machines and its effect pump. Events are *staged* (applied to
 * the projection and routed to the machines at once) and *committed* in batches: every effect that
 * acts on the world (a model request, a tool execution) first flushes what is staged, so nothing
 * reaches a model or a tool that is not in the log. That gives about two commits per step.
 */
export class AgentActor {
  readonly actorId: string;
  readonly rootId: string;
  readonly ports: AgentPorts;
  readonly projection: Projection;
  readonly machines: MachineSet;
  /** The model adapter of the open turn, built on first use. */
  model: ModelAdapter | null = null;
  /** Aborted when in-flight work must stop (deadline, interrupt, shutdown). */
  turnAbort = new AbortController();
  /** Prepared requests of this incarnation by digest, so an attempt need not re-read its blob. */
  readonly prepared = new Map<string, PreparedRequest>();
  /** Whole texts of the model output the log keeps as blobs (made on first use: most agents have none). */
  private outputTexts: OutputTexts | null = null;
  private toolRunner: ToolRunner | null = null;

  private readonly snapshotEvery: number;
  private readonly queue: Effect[] = [];
  private staged: ActorEvent[] = [];
  private nextSeq: number;
  private sinkOpen = false;
  private pumping: Promise<void> | null = null;
  private waiters: CommitWaiter[] = [];
  private turnWaiters: Array<(t: TurnEnded) => void> = [];
  private deadlineTimer: NodeJS.Timeout | null = null;
  private launches: Launch[] = [];
  private approvalWatch: ApprovalWatch | null = null;
  private lastSnapshotSeq: number;
  private failure: unknown = null;
  /** Set by `stop` and `fail`: from then on this incarnation commits nothing, as after a crash. */
  private halted = false;
  /** While recovering: where `recovery/continuation` goes in the staged batch, and what was closed. */
  private recovery: RecoveryNote | null = null;

  constructor(opts: AgentActorOptions) {
    this.actorId = opts.actorId;
    this.rootId = opts.rootId;
    this.ports = opts.ports;
    this.projection = opts.projection;
    this.snapshotEvery = opts.snapshotEvery;
    this.nextSeq = opts.projection.seq + 1;
    this.lastSnapshotSeq = opts.snapshotSeq;
    this.machines = new MachineSet(opts.actorId, (e) => this.sink(e), opts.machines);
  }

  /** Runs the tool calls of the open step, in parallel where their resources allow (made on first use). */
  get runner(): ToolRunner {
    return (this.toolRunner ??= new ToolRunner(this));
  }

  /** Whole texts of blob-stored model output: the next request's history, the open step's calls. */
  get outputs(): OutputTexts {
    return (this.outputTexts ??= new OutputTexts(this.ports.blobs));
  }

  /** The approvals this actor waits on (made on first use: a parked agent has none). */
  private get approvals(): ApprovalWatch {
    return (this.approvalWatch ??= new ApprovalWatch({
      projection: this.projection,
      nowMs: () => this.ports.clock.nowMs(),
      active: () => this.sinkOpen && !this.halted,
      busy: () => this.staged.length > 0 || this.queue.length > 0 || this.pumping !== null || (this.toolRunner?.active ?? 0) > 0,
      idle: () => this.idle(),
      tick: (nowMs) => {
        this.machines.signal({ type: 'tick', nowMs });
        this.kick();
      },
      park: (ids, commands) => {
        this.stage({ type: 'actor/parked', data: { waitingFor: 'approval', ids, commands } });
        this.kick();
      },
    }));
  }


  /** True once this incarnation stopped (or failed): it commits nothing more. */
  get isHalted(): boolean {
    return this.halted;
  }

  /** Runs `launch.run` once the event at `launch.seq` is committed; `drop` if it never will be. */
  afterCommit(seq: number, launch: Omit<Launch, 'seq'>): void {
    this.launches.push({ seq, ...launch });
  }

  private dropLaunches(): void {
    const dropped = this.launches;
    this.launches = [];
    for (const l of dropped) l.drop();
  }

  /** Replays events that are already committed (a log tail after a snapshot): no effect runs. */
  replay(events: ActorEvent[]): void {
    for (const e of events) {
      this.machines.route(e);
      this.nextSeq = e.seq + 1;
    }
  }

  /** Starts acting: effects asked for from now on run. */
  open(): void {
    this.sinkOpen = true;
    this.queue.length = 0;
  }

  /** The error that stopped this actor, if one did. */
  get failed(): unknown {
    return this.failure;
  }

  private sink(effect: Effect): void {
    if (!this.sinkOpen) return;
    // Aborting must not wait behind the effect that is in flight: it is what stops that effect.
    if (effect.name === 'abortWork') {
      this.turnAbort.abort(effect.params.reason);
      return;
    }
    // an interrupt from the inbox stops the turn as Ctrl-C's `abort` does, without queueing behind it
    if (effect.name === 'interruptTurn') return this.abort(effect.params.reason);
    this.queue.push(effect);
  }

  /** Stages one event: stamps it, folds it into the projection, routes it to the machines. */
  stage(d: EventDraft): ActorEvent {
    // A stopped actor's machines are stopped too: what in-flight work tries to stage is refused.
    if (this.halted) this.refuseCommit();
    const e = {
      v: EVENT_VERSION,
      seq: this.nextSeq++,
      id: '',
      at: d.at ?? this.isoNow(),
      epoch: this.ports.log.epoch,
      actor: this.actorId,
      ...d,
    } as ActorEvent;
    this.staged.push(e);
    foldEvent(this.projection, e);
    this.machines.route(e);
    // a new step's calls start afresh (not on a re-dispatch in recovery: queued calls would be lost)
    if (e.type === 'step/start') this.toolRunner?.reset();
    if (e.type === 'turn/start') this.onTurnStart(e.data.settings.budgets.deadlineAt);
    if (e.type === 'turn/end') this.onTurnEnd(e);
    if (e.type === 'approval/requested') this.approvals.arm();
    if (e.type === 'tool/result' || e.type === 'tool/denied' || e.type === 'tool/cancelled' || e.type === 'tool/outcome_unknown') {
      // a call that waited on this one may start now
      this.toolRunner?.schedule();
    }
    return e;
  }

  private isoMs = -1;
  private iso = '';
  /** The clock as ISO 8601, formatted once per millisecond (a step stages about ten events). */
  private isoNow(): string {
    const ms = this.ports.clock.nowMs();
    if (ms !== this.isoMs) {
      this.isoMs = ms;
      this.iso = isoOf(ms);
    }
    return this.iso;
  }

  /** Notes a closing event staged by recovery, so `recovery/continuation` lists it and follows it. */
  noteRecovered(description: string): void {
    if (!this.recovery) return;
    this.recovery.closed.push(description);
    this.recovery.insertAt = this.staged.length;
  }

  /** Commits everything staged as one JetStream message. */
  async flush(): Promise<void> {
    if (this.halted) this.refuseCommit();
    if (this.staged.length === 0) return;
    let batch = this.staged;
    this.staged = [];
    if (this.recovery) {
      batch = withContinuation(batch, this.recovery);
      this.recovery = null;
      this.nextSeq += 1;
      this.projection.seq += 1;
    }
    // Staged events carry their place in the log: the writer fills in their IDs, not copies them.
    const committed = await this.ports.log.commit(batch);
    const last = committed[committed.length - 1]!;
    for (const w of this.waiters.filter((w) => w.seq <= last.seq)) w.resolve();
    this.waiters = this.waiters.filter((w) => w.seq > last.seq);
    this.ports.onCommit?.(committed);
    for (const e of committed) this.ports.faults.hit(`after:${e.type}`, this.actorId);
    this.maybeSnapshot(last.seq);
    this.approvalWatch?.committed();
    if (this.launches.length > 0) {
      const ready = this.launches.filter((l) => l.seq <= last.seq);
      this.launches = this.launches.filter((l) => l.seq > last.seq);
      for (const l of ready) l.run();
    }
  }

  /**
   * A stopped or dropped incarnation leaves what is open as a crash would: what its in-flight
   * effect staged after the abort (an aborted attempt, a cancelled call) is never committed, or
   * the next incarnation would read a cancellation nobody asked for. Throwing also stops that
   * effect from going on as if its intent were in the log.
   */
  private refuseCommit(): never {
    const err = this.failure ?? new ActorloopError('actor.stopped', `actor ${this.actorId} was stopped; it commits nothing more`);
    const lost = this.staged.at(-1)?.seq ?? 0;
    this.staged = [];
    this.dropLaunches();
    for (const w of this.waiters.filter((w) => w.seq <= lost)) w.reject(err);
    this.waiters = this.waiters.filter((w) => w.seq > lost);
    throw err;
  }

  private maybeSnapshot(seq: number): void {
    const store = this.ports.snapshots;
    if (!store || this.staged.length > 0 || !snapshotDue(seq, this.lastSnapshotSeq, this.snapshotEvery, this.projection)) return;
    this.lastSnapshotSeq = seq;
    const pos = this.ports.log.position();
    const snapshot = {
      schemaVersion: PROJECTION_VERSION,
      actorId: this.actorId,
      rootId: this.rootId,
      seq: pos.seq,
      streamSeq: pos.streamSeq,
      // Not cloned: the store encodes it before `save` returns, and the projection changes after.
      projection: this.projection,
      machines: this.machines.persist(),
      savedAt: new Date(this.ports.clock.nowMs()).toISOString(),
    };
    store.save(snapshot).catch((err: unknown) => this.ports.logger.warn({ err }, 'snapshot save failed'));
  }

  /**
   * Delivers one inbox message; resolves once `inbox/received` is committed (then it may be
   * acked). `channel` is the subject it came in on, which decides who it is from: a message the
   * door refuses is committed as `inbox/cancelled` alone, and nothing else changes.
   */
  receive(msg: InboxMessage, channel: InboxChannel = 'person'): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    // Dedupe by ID, never by delivery count: an ack lost in a crash redelivers an included message.
    if (this.projection.inbox[msg.id]) return Promise.resolve();
    const verdict = admit(msg, channel);
    if (!verdict.admit) this.ports.logger.warn({ messageId: msg.id, kind: msg.kind, from: msg.from }, `inbox message refused: ${verdict.reason}`);
    const e = verdict.admit
      ? this.stage({
        type: 'inbox/received',
        data: { messageId: msg.id, kind: msg.kind, from: verdict.from, content: msg.content, request: msg.request },
      })
      : this.stage({ type: 'inbox/cancelled', data: { messageId: msg.id, reason: verdict.reason, kind: msg.kind, from: msg.from } });
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ seq: e.seq, resolve, reject }));
    this.kick();
    return done;
  }

  /** Starts recovery after a rehydrate: closes what a crash left open, then carries on. */
  recover(reason: string): boolean {
    const open = this.machines.hasOpenTurn() || this.machines.isClaiming();
    if (!open) return false;
    this.stage({ type: 'recovery/started', data: { fromSeq: this.projection.seq, reason } });
    this.recovery = { insertAt: this.staged.length, closed: [], turn: this.projection.openTurn?.id };
    const deadline = this.projection.openTurn?.settings.budgets.deadlineAt ?? null;
    this.onTurnStart(deadline);
    // pending approvals keep their persisted expiry: re-armed, not restarted
    this.approvals.arm();
    this.machines.signal({ type: 'recover' });
    this.kick();
    return true;
  }

  /** Runs queued effects until none is left, then commits what is staged. */
  kick(): void {
    if (this.pumping || this.failure || this.halted) return;
    this.pumping = this.pump().finally(() => {
      this.pumping = null;
      if (this.queue.length > 0 || this.staged.length > 0) this.kick();
    });
  }

  private async pump(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const effect = this.queue.shift()!;
        await performEffect(this, effect);
      }
      await this.flush();
    } catch (err) {
      // a stopped actor's in-flight effect ends here; `stop` already said why
      if (this.halted && !this.failure) return;
      this.fail(err);
    }
  }

  /** Stops the actor after an error it cannot act past (fenced, dropped, store down). */
  fail(err: unknown): void {
    if (this.failure) return;
    this.failure = err;
    this.halted = true;
    this.ports.onHalt?.();
    this.sinkOpen = false;
    this.turnAbort.abort('actor stopped');
    this.clearDeadline();
    this.dropLaunches();
    if (err instanceof ActorDropped) this.ports.logger.warn({ actorId: this.actorId }, err.message);
    else if (err instanceof StoreError && err.code === 'store.fenced')
      this.ports.logger.error({ actorId: this.actorId }, 'another writer appended to this log; this incarnation stops');
    else this.ports.logger.error({ err, actorId: this.actorId }, 'actor stopped on an error');
    for (const w of this.waiters) w.reject(err);
    this.waiters = [];
    this.machines.stop();
  }

  /** Resolves when the open (or next) turn ends. */
  whenTurnEnds(): Promise<TurnEnded> {
    return new Promise((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      this.turnWaiters.push(resolve);
      this.waiters.push({ seq: Number.MAX_SAFE_INTEGER, resolve: () => {}, reject });
    });
  }

  /** Resolves when the pump has nothing left to do and no tool is running. */
  async idle(): Promise<void> {
    while (this.pumping || (this.toolRunner?.active ?? 0) > 0) {
      if (this.pumping) await this.pumping;
      else await this.toolRunner!.idle();
    }
    if (this.failure) throw this.failure;
  }

  /** Approval IDs the open turn waits on; non-empty with nothing else to do means a person must answer. */
  waitingApprovals(): string[] {
    return pendingApprovals(this.projection).map((a) => a.approvalId);
  }

  /**
   * Resolves with the pending approval IDs once the actor has nothing left to do but wait for a
   * person: every approval request committed, no effect queued, no tool running.
   */
  whenAwaitingApproval(): Promise<string[]> {
    return this.approvals.whenAwaiting();
  }

  /** Stops in-flight work with a reason (interrupt, shutdown); the turn records how it ended. */
  abort(reason: string): void {
    this.machines.signal({ type: 'abort', reason });
  }

  /** Stops the actor without closing anything (shutdown of its host). */
  stop(): void {
    this.halted = true;
    this.ports.onHalt?.();
    this.sinkOpen = false;
    this.turnAbort.abort('host stopping');
    this.clearDeadline();
    this.dropLaunches();
    this.machines.stop();
  }

  private onTurnStart(deadlineAt: number | null): void {
    this.turnAbort = new AbortController();
    this.clearDeadline();
    if (deadlineAt === null || !this.sinkOpen) return;
    const delay = Math.max(0, deadlineAt - this.ports.clock.nowMs());
    // The deadline is absolute, in the log: after a rehydrate it is re-armed, not restarted.
    this.deadlineTimer = setTimeout(() => {
      this.machines.signal({ type: 'tick', nowMs: this.ports.clock.nowMs() });
      this.kick();
    }, delay);
    this.deadlineTimer.unref?.();
  }

  private onTurnEnd(e: Extract<ActorEvent, { type: 'turn/end' }>): void {
    this.clearDeadline();
    this.model = null;
    this.prepared.clear();
    const ended: TurnEnded = {
      turnId: e.turn!,
      outcome: e.data.outcome,
      reason: e.data.reason,
      answer: e.data.answer,
      costUsd: e.data.costUsd ?? null,
    };
    // Resolved only once the turn/end is committed: a caller may exit right after.
    const waiters = this.turnWaiters;
    this.turnWaiters = [];
    // a blob-stored answer is handed over whole: the caller prints what the person asked for
    const whole = e.data.answerRef ? this.outputs.load(e.data.answerRef).catch(() => null) : null;
    this.outputTexts?.reset();
    if (waiters.length > 0) {
      const hand = (answer: string | null): void => waiters.forEach((w) => w(answer === null ? ended : { ...ended, answer }));
      const resolve = (): void => void (whole ?? Promise.resolve(null)).then(hand);
      this.waiters.push({ seq: e.seq, resolve, reject: () => {} });
    }
  }

  private clearDeadline(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.approvalWatch?.clear();
  }
}
