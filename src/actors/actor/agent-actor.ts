import { createActor } from 'xstate';
import type { ActorEvent, EventDraft } from '../../protocol/events.js';
import type { HostedAgent, TurnEnded } from './hosted-agent.js';
import { ActorloopError, StoreError } from '../../protocol/errors.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { InboxChannel } from '../../bus/subjects.js';
import { admit } from './inbox-door.js';
import { OutputTexts } from '../agent/output-blobs.js';
import { blobScope } from '../agent/missing-blob.js';
import { PROJECTION_VERSION, type Projection } from '../../store/projection.js';
import { queuedForNextTurn } from '../../store/inbox-delivery.js';
import { ActorDropped } from '../faults/faults.js';
import type { MachineSet, MachineSnapshots } from './machine-set.js';
import type { MachineEffect } from './machine-effects.js';
import { performEffect, type QueuedEffect } from './agent-effects.js';
import { ToolRunner } from '../effects/tool-runner.js';
import { PersonWatch } from './person-watch.js';
import { expireDueQuestions, keepsOutOfLog, SENSITIVE } from '../effects/questions.js';
import { sealText } from '../agent/sealed-text.js';
import { snapshotDue } from '../agent/commit-batch.js';
import { CommitPipeline } from './commit-pipeline.js';
import { settleOrphans } from '../goals/budget.js';
import type { AgentPorts } from '../agent/agent-ports.js';
import type { EffectContext, TurnCache } from '../agent/effect-context.js';
import { ActorEffectContext } from './actor-effect-context.js';
import { NOTICE_KINDS } from '../../protocol/subagents.js';
import { onChildMessage, sendOwedNotice, storeCarriedArtifacts } from '../tree/subagent-messages.js';
import { refusedTask } from '../tree/child-task.js';
import { redactedContent } from '../agent/task-redaction.js';
import { createAgentLogic, type AgentActorRef, type AgentLogic, type InspectObserver, type PersistedAgentSnapshot } from './agent-logic.js';

export type { AgentPorts } from '../agent/agent-ports.js';

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
  /** Receives XState's inspection events of this agent's actor (none given: inspection costs nothing). */
  inspect?: InspectObserver;
}

/**
 * One hosted agent: its projection, its XState actor (which owns its machines), its commit
 * pipeline and its effect pump. Events are *staged* (applied to the projection and sent to the
 * actor at once) and *committed* in batches: every effect that acts on the world (a model
 * request, a tool execution) first flushes what is staged, so nothing reaches a model or a tool
 * that is not in the log. That gives about two commits per step. Effect handlers see the narrow
 * `EffectContext` this class builds, never the class.
 */
export class AgentActor implements HostedAgent {
  readonly actorId: string;
  readonly rootId: string;
  /** @internal */
  readonly ports: AgentPorts;
  /** The agent's projection of its log: read it, never write it. */
  readonly projection: Projection;
  /** The agent's XState actor: `subscribe`, `getSnapshot`, `getPersistedSnapshot`, and inspection. */
  readonly ref: AgentActorRef;
  /** Aborted when in-flight work must stop (deadline, interrupt, shutdown). @internal */
  turnAbort = new AbortController();

  private readonly logic: AgentLogic;
  /** @internal */
  readonly pipeline: CommitPipeline;
  private readonly ctx: EffectContext;
  /** @internal */
  readonly turnCache: TurnCache = { model: null, prepared: new Map() };
  /** Whole texts of the model output the log keeps as blobs (made on first use: most agents have none). */
  private outputTexts: OutputTexts | null = null;
  private toolRunner: ToolRunner | null = null;
  private readonly snapshotEvery: number;
  private readonly queue: QueuedEffect[] = [];
  private sinkOpen = false;
  private pumping: Promise<void> | null = null;
  private turnWaiters: Array<(t: TurnEnded) => void> = [];
  /** Receipts staged and not yet committed, by message ID (a copy of one waits for its commit). */
  private readonly receiving = new Map<string, Promise<void>>();
  private deadlineTimer: NodeJS.Timeout | null = null;
  private approvalWatch: PersonWatch | null = null;
  private lastSnapshotSeq: number;
  private failure: unknown = null;
  /** Set by `stop` and `fail`: from then on this incarnation commits nothing, as after a crash. */
  /** @internal */
  halted = false;

  constructor(opts: AgentActorOptions) {
    this.actorId = opts.actorId;
    this.rootId = opts.rootId;
    this.ports = opts.ports;
    this.projection = opts.projection;
    this.snapshotEvery = opts.snapshotEvery;
    this.lastSnapshotSeq = opts.snapshotSeq;
    this.pipeline = new CommitPipeline({
      actorId: opts.actorId,
      log: opts.ports.log,
      projection: opts.projection,
      nowMs: () => this.ports.clock.nowMs(),
      staged: (e) => this.onStaged(e),
      committed: (events) => this.onCommitted(events),
      refusal: () => this.failure ?? new ActorloopError('actor.stopped', `actor ${this.actorId} was stopped; it commits nothing more`),
    });
    this.logic = createAgentLogic(opts.actorId, (e) => this.sink(e));
    const persisted: PersistedAgentSnapshot | undefined = opts.machines
      ? { status: 'active', output: undefined, error: undefined, machines: opts.machines }
      : undefined;
    this.ref = createActor(this.logic, {
      systemId: opts.actorId,
      input: { actorId: opts.actorId },
      ...(persisted ? { snapshot: persisted } : {}),
      ...(opts.inspect ? { inspect: opts.inspect } : {}),
    });
    this.ref.start();
    this.ctx = new ActorEffectContext(this);
  }

  /** The agent's machines (owned by its XState actor's logic). @internal */
  get machines(): MachineSet {
    return this.logic.machines;
  }

  /** Runs the tool calls of the open step (made on first use). @internal */
  get runner(): ToolRunner {
    return (this.toolRunner ??= new ToolRunner(this.ctx));
  }

  /** Whole texts of blob-stored model output: the next request's history, the open step's calls. @internal */
  get outputs(): OutputTexts {
    return (this.outputTexts ??= new OutputTexts(this.ports.blobs, blobScope(this)));
  }

  /** The approvals and questions this actor waits on (made on first use: most agents have none). */
  private get approvals(): PersonWatch {
    return (this.approvalWatch ??= new PersonWatch({
      projection: this.projection,
      nowMs: () => this.ports.clock.nowMs(),
      active: () => this.sinkOpen && !this.halted,
      busy: () => this.pipeline.pending > 0 || this.queue.length > 0 || this.pumping !== null || (this.toolRunner?.active ?? 0) > 0,
      idle: () => this.idle(),
      tick: (nowMs) => {
        this.send({ type: 'tick', nowMs });
        expireDueQuestions(this.ctx, nowMs);
        this.kick();
      },
      park: (waitingFor, ids, commands) => {
        this.stage({ type: 'actor/parked', data: { waitingFor, ids, commands } });
        this.kick();
      },
    }));
  }

  /** True once this incarnation stopped (or failed): it commits nothing more. */
  get isHalted(): boolean {
    return this.halted;
  }

  /** Runs `launch.run` once the event at `seq` is committed; `drop` if it never will be. @internal */
  afterCommit(seq: number, launch: { run(): void; drop(): void }): void {
    this.pipeline.afterCommit(seq, launch);
  }

  /** Replays events that are already committed (a log tail after a snapshot): no effect runs. @internal */
  replay(events: ActorEvent[]): void {
    for (const e of events) {
      this.send(e);
      this.pipeline.replayed(e);
    }
  }

  /** Starts acting: effects asked for from now on run. @internal */
  open(): void {
    this.sinkOpen = true;
    this.queue.length = 0;
  }

  /** The error that stopped this actor, if one did. */
  get failed(): unknown {
    return this.failure;
  }

  /** Sends an event to the XState actor; a throw inside its transition comes back out here. */
  /** Sends an event to the agent's XState actor, rethrowing what its transition threw. @internal */
  send(e: Parameters<AgentActorRef['send']>[0]): void {
    this.ref.send(e);
    this.logic.rethrow();
  }

  private sink(effect: MachineEffect): void {
    if (!this.sinkOpen) return;
    // Aborting must not wait behind the effect that is in flight: it is what stops that effect.
    if (effect.name === 'abortWork') {
      this.turnAbort.abort(effect.params.reason);
      return;
    }
    // an interrupt from the inbox stops the turn without queueing behind the effect in flight
    if (effect.name === 'interruptTurn') return this.interrupt(effect.params.messageId, effect.params.from);
    this.queue.push(effect);
  }

  /** Stages one event: stamps it, folds it into the projection, sends it to the machines. @internal */
  stage(d: EventDraft): ActorEvent {
    return this.pipeline.stage(d);
  }

  private onStaged(e: ActorEvent): void {
    this.send(e);
    // a new step's calls start afresh (not on a re-dispatch in recovery: queued calls would be lost)
    if (e.type === 'step/start') this.toolRunner?.reset();
    if (e.type === 'turn/start') this.onTurnStart(e.data.settings.budgets.deadlineAt);
    if (e.type === 'turn/end') this.onTurnEnd(e);
    // a child's notice goes once its turn's end is committed
    if (e.type === 'turn/end' && e.data.noticeOwed === true) this.afterCommit(e.seq, { run: () => this.sendOwedNotice(), drop: () => {} });
    if (e.type === 'approval/requested' || e.type === 'ask/asked') this.approvals.arm();
    if (e.type === 'tool/result' || e.type === 'tool/denied' || e.type === 'tool/cancelled' || e.type === 'tool/outcome_unknown') {
      // a call that waited on this one may start now
      this.toolRunner?.schedule();
    }
  }

  /** Commits everything staged as one log message. @internal */
  flush(): Promise<void> {
    return this.pipeline.flush();
  }

  private onCommitted(committed: ActorEvent[]): void {
    this.ports.onCommit?.(committed);
    for (const e of committed) this.ports.faults.hit(`after:${e.type}`, this.actorId);
    this.maybeSnapshot(committed[committed.length - 1]!.seq);
    this.approvalWatch?.committed();
  }

  private maybeSnapshot(seq: number): void {
    const store = this.ports.snapshots;
    if (!store || this.pipeline.pending > 0 || !snapshotDue(seq, this.lastSnapshotSeq, this.snapshotEvery, this.projection)) return;
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
    // A copy that comes while the first one's receipt is still being committed (one handed over
    // in-process, then delivered by the consumer) resolves only once that commit lands: acked
    // before it, a crash would lose the message.
    if (this.projection.inbox[msg.id]) return this.receiving.get(msg.id) ?? Promise.resolve();
    const verdict = admit(msg, channel);
    if (!verdict.admit) this.ports.logger.warn({ messageId: msg.id, kind: msg.kind, from: msg.from }, `inbox message refused: ${verdict.reason}`);
    if (verdict.admit && msg.kind === 'ask_answer' && keepsOutOfLog(this.projection, msg.content)) {
      // an answer that may be a secret: the log gets a reference to it, stored before the event that names it
      return sealText(this.ports.blobs, msg.content).then((contentRef) => {
        if (this.failure) throw this.failure;
        if (this.projection.inbox[msg.id]) return;
        const e = this.stage({
          type: 'inbox/received',
          data: { messageId: msg.id, kind: msg.kind, from: verdict.from, content: SENSITIVE, request: null, contentRef },
        });
        return this.commitReceived(e);
      });
    }
    if (verdict.admit && (NOTICE_KINDS.has(msg.kind) || msg.kind === 'job_notice')) return this.receiveFromChild(msg, verdict.from);
    const taskRefused = verdict.admit && msg.kind === 'subagent_task' ? refusedTask(this.actorId, this.projection, msg) : null;
    if (taskRefused) {
      this.ports.logger.warn({ messageId: msg.id, from: msg.from }, `subagent task refused: ${taskRefused}`);
      return this.commitReceived(this.stage({ type: 'inbox/cancelled', data: { messageId: msg.id, reason: taskRefused, kind: msg.kind, from: msg.from } }));
    }
    if (!verdict.admit) {
      return this.commitReceived(this.stage({ type: 'inbox/cancelled', data: { messageId: msg.id, reason: verdict.reason, kind: msg.kind, from: msg.from } }));
    }
    // a secret in what a person or a parent sent is redacted before the log holds it, as tool output is
    const { content, redactions } = redactedContent(msg.kind, msg.content, this.ports.tooling.redactor);
    return this.commitReceived(this.stage({
      type: 'inbox/received',
      data: { messageId: msg.id, kind: msg.kind, from: verdict.from, content, request: msg.request, ...(redactions > 0 ? { redactions } : {}) },
    }));
  }

  /**
   * True when a received message must not stay in the inbox's store: the log keeps its content
   * out (a sensitive answer) or holds it redacted. Read from the log, so a delivery that comes
   * again after a crash between the receipt and the erase is erased then.
   */
  erasesFromInbox(messageId: string): boolean {
    const item = this.projection.inbox[messageId];
    return item !== undefined && (item.contentRef !== undefined || (item.redactions ?? 0) > 0);
  }

  /**
   * A child's report or notice: artifacts it carries are stored in this host's blob store before
   * the event that names them (the log keeps their digests, not their text); once it is
   * committed, the child's carve is settled and a wait it satisfies takes it.
   */
  private async receiveFromChild(msg: InboxMessage, from: string): Promise<void> {
    const content = await storeCarriedArtifacts(this.ports.blobs, msg.kind, msg.content);
    if (this.failure) throw this.failure;
    if (this.projection.inbox[msg.id]) return;
    const e = this.stage({ type: 'inbox/received', data: { messageId: msg.id, kind: msg.kind, from, content, request: null } });
    await this.commitReceived(e);
    if (this.halted) return;
    onChildMessage(this.ctx, msg.id);
    this.kick();
  }

  /** Sends the completion notice a child owes its parent (a host that took it on after a crash calls it). @internal */
  sendOwedNotice(): void {
    if (!this.projection.noticeOwed || this.halted) return;
    sendOwedNotice(this.ctx).catch((err: unknown) => {
      // the notice stays owed (the directory keeps the child running): the next incarnation sends it
      if (!this.halted) this.ports.logger.warn({ err }, 'completion notice not sent to the parent; it is sent when the child is next hosted');
    });
  }

  /**
   * Commits a delivery at once, even while an effect is in flight (a model stream, a tool): the
   * inbox takes its next message only once this one is acked, and an interrupt must not wait
   * behind a steer. Resolves once it is committed.
   */
  private commitReceived(e: ActorEvent): Promise<void> {
    const done = this.pipeline.whenCommitted(e.seq);
    if (e.type === 'inbox/received' || e.type === 'inbox/cancelled') {
      const id = e.data.messageId;
      this.receiving.set(id, done);
      done.then(() => this.receiving.delete(id), () => this.receiving.delete(id));
    }
    if (this.pumping) this.flush().catch((err: unknown) => this.fail(err));
    else this.kick();
    return done;
  }

  /** Starts recovery after a rehydrate: closes what a crash left open, then carries on. @internal */
  recover(reason: string): boolean {
    const open = this.machines.hasOpenTurn() || this.machines.isClaiming();
    if (!open) return false;
    // a step's claim that no prepared request included is given back: a later step includes it once
    const requeued = this.projection.claimed && this.projection.claimed.length > 0 ? [...this.projection.claimed] : null;
    this.stage({ type: 'recovery/started', data: { fromSeq: this.projection.seq, reason, ...(requeued ? { requeued } : {}) } });
    this.pipeline.beginRecovery(this.projection.openTurn?.id);
    // a reservation whose attempt or step the crash left closed is settled now, once; an open
    // attempt's is settled by its own end (interrupted), which the `recover` below asks for
    if (settleOrphans(this) > 0) this.ctx.noteRecovered('budget reservations released');
    const deadline = this.projection.openTurn?.settings.budgets.deadlineAt ?? null;
    this.onTurnStart(deadline);
    // an interrupt in the log is carried out before anything is re-emitted: nothing runs again
    if (this.projection.openTurn?.interrupted) this.abort('interrupted');
    // pending approvals and questions keep their persisted expiry: re-armed, not restarted
    this.approvals.arm();
    this.send({ type: 'recover' });
    this.kick();
    return true;
  }

  /** Runs queued effects until none is left, then commits what is staged. @internal */
  kick(): void {
    if (this.pumping || this.failure || this.halted) return;
    this.pumping = this.pump().finally(() => {
      this.pumping = null;
      if (this.queue.length > 0 || this.pipeline.pending > 0) this.kick();
    });
  }

  private async pump(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const effect = this.queue.shift()!;
        await performEffect(this.ctx, effect);
      }
      await this.flush();
    } catch (err) {
      // a stopped actor's in-flight effect ends here; `stop` already said why
      if (this.halted && !this.failure) return;
      this.fail(err);
    }
  }

  /** Stops the actor after an error it cannot act past (fenced, dropped, store down). @internal */
  fail(err: unknown): void {
    if (this.failure) return;
    this.failure = err;
    this.halt('actor stopped');
    // the injector said it fired (to the log, or to a person): a second warning says it again
    if (err instanceof ActorDropped) this.ports.logger.debug({ actorId: this.actorId }, err.message);
    else if (err instanceof StoreError && err.code === 'store.fenced')
      this.ports.logger.error({ actorId: this.actorId }, 'another writer appended to this log; this incarnation stops');
    else this.ports.logger.error({ err, actorId: this.actorId }, 'actor stopped on an error');
    this.pipeline.rejectAll(err);
  }

  /** Stops the actor without closing anything (shutdown of its host). */
  stop(): void {
    this.halt('host stopping');
  }

  private halt(reason: string): void {
    this.halted = true;
    this.ports.onHalt?.();
    this.sinkOpen = false;
    this.turnAbort.abort(reason);
    this.clearDeadline();
    this.pipeline.halt();
    // no event is handled and no effect asked for after this, even one already in the mailbox
    this.machines.stop();
    this.ref.stop();
  }

  /** Resolves when the open (or next) turn ends. */
  whenTurnEnds(): Promise<TurnEnded> {
    return new Promise((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      this.turnWaiters.push(resolve);
      this.pipeline.wait({ seq: Number.MAX_SAFE_INTEGER, resolve: () => {}, reject });
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

  /**
   * Resolves with the pending approval IDs once the actor has nothing left to do but wait for a
   * person: every approval request committed, no effect queued, no tool running.
   */
  whenAwaitingApproval(): Promise<string[]> {
    return this.approvals.whenAwaiting('approval');
  }

  /** Resolves with the pending question IDs once the actor has nothing left to do but wait for their answers. */
  whenAwaitingQuestion(): Promise<string[]> {
    return this.approvals.whenAwaiting('question');
  }

  /**
   * Carries out a person's interrupt (design §6a): `interrupt/requested` first in the log (with
   * the follow-ups it cancels, when `interrupt_follow_ups = "cancel"`), then the turn's work is
   * aborted: the attempt ends aborted, nothing new is dispatched, running tools get the signal,
   * and the step and turn end cancelled. A recovery that finds it committed only aborts.
   */
  private interrupt(messageId: string, from: string): void {
    const turn = this.projection.openTurn?.id;
    const item = this.projection.inbox[messageId];
    if (item?.kind === 'subagent_interrupt' && item.state === 'pending' && from !== this.projection.parentLink?.parentId) {
      // only a child's own parent stops it this way; a person interrupts it as any agent
      this.stage({ type: 'inbox/cancelled', data: { messageId, reason: `${from} is not this agent's parent: only its parent (or a person, with actorloop interrupt) may stop its turn` } });
      this.kick();
      return;
    }
    if (messageId === '' || this.projection.inbox[messageId]?.state === 'included') {
      this.abort('interrupted');
      return;
    }
    const followUps = this.ports.tooling.interruptFollowUps ?? 'keep';
    this.stage({ type: 'interrupt/requested', ...(turn ? { turn } : {}), data: { messageId, by: from, followUps } });
    if (followUps === 'cancel') {
      for (const id of queuedForNextTurn(this.projection)) {
        this.stage({ type: 'inbox/cancelled', data: { messageId: id, reason: 'cancelled by an interrupt (interrupt_follow_ups = "cancel")' } });
      }
    }
    // Aborted in the same tick: every scope the abort closes is staged after interrupt/requested,
    // and no step, attempt or call starts in between. What the abort stops in the world (a
    // model stream, a process) leaves nothing a crash before the commit could not recover from.
    this.abort('interrupted');
    this.flush().catch((err: unknown) => this.fail(err));
    this.kick();
  }

  /** Stops in-flight work with a reason (interrupt, shutdown); the turn records how it ended. */
  abort(reason: string): void {
    this.send({ type: 'abort', reason });
  }

  private onTurnStart(deadlineAt: number | null): void {
    this.turnAbort = new AbortController();
    this.clearDeadline();
    if (deadlineAt === null || !this.sinkOpen) return;
    const delay = Math.max(0, deadlineAt - this.ports.clock.nowMs());
    // The deadline is absolute, in the log: after a rehydrate it is re-armed, not restarted.
    this.deadlineTimer = setTimeout(() => {
      this.send({ type: 'tick', nowMs: this.ports.clock.nowMs() });
      this.kick();
    }, delay);
    this.deadlineTimer.unref?.();
  }

  private onTurnEnd(e: Extract<ActorEvent, { type: 'turn/end' }>): void {
    this.clearDeadline();
    this.turnCache.model = null;
    this.turnCache.prepared.clear();
    delete this.turnCache.context;
    const ended: TurnEnded = {
      turnId: e.turn!,
      outcome: e.data.outcome,
      reason: e.data.reason,
      answer: e.data.answer,
      costUsd: e.data.costUsd ?? null,
      usage: e.data.usage,
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
      this.pipeline.wait({ seq: e.seq, resolve, reject: () => {} });
    }
  }

  private clearDeadline(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.approvalWatch?.clear();
  }
}
