import type { Logger } from 'pino';
import { createMemoryTreeSlots } from '../../bus/memory-tree-slots.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { InboxConsumerOptions, InboxDelivery, InboxWatch } from '../../bus/inbox-port.js';
import { InboxDrains, type Hosted } from './inbox-drains.js';
import { liveSubject, type InboxChannel } from '../../bus/subjects.js';
import { ActorloopError, agentNotFound } from '../../protocol/errors.js';
import type { TurnSettings } from '../../protocol/events.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { ModelAdapter, ModelStreamEvent } from '../../model/model-port.js';
import type { Price } from '../../model/pricing.js';
import type { ActorEvent } from '../../protocol/events.js';
import type { BlobStore } from '../../store/blob-port.js';
import { firstNaming } from '../../store/blob-refs.js';
import type { LogReader } from '../../store/log-port.js';
import { emptyProjection, foldEvent, PROJECTION_VERSION, type Projection } from '../../store/projection.js';
import { rehydrate } from '../../store/rehydrate.js';
import type { SnapshotStore } from '../../store/snapshots.js';
import type { ToolRegistry } from '../../tools/registry.js';
import { AgentActor } from '../actor/agent-actor.js';
import type { AgentActorRef, InspectObserver } from '../actor/agent-logic.js';
import { ActorDropped, type FaultInjector } from '../faults/faults.js';
import { createMemoryFaultRecords, type FaultRecords } from '../faults/fault-records.js';
import { commitRelease, killNotes } from './incarnation-end.js';
import { lazyChild } from './lazy-logger.js';
import type { MachineSnapshots } from '../actor/machine-set.js';
import type { SupervisorPorts } from './supervisor-ports.js';
import { defaultTooling, type ToolingPorts } from '../agent/tooling.js';
import { DEFAULT_SUBAGENT_LIMITS, type SubagentLimits } from '../../protocol/subagents.js';
import type { SubagentPort } from '../agent/subagent-port.js';
import { TreeHosting } from '../tree/tree-hosting.js';
import { keepsOutOfLog } from '../effects/questions.js';
import { redactedContent } from '../agent/task-redaction.js';
import type { ResourceLeaseStore } from '../../bus/resource-lease-port.js';
import type { JobHosting } from './job-hosting.js';
import type { WorkflowHosting } from './workflow-hosting.js';
import { backgroundHosting, type JobLimits } from './background-hosting.js';
import type { WorkflowPort } from '../agent/workflow-port.js';

/** What a supervisor needs to host agents. */
export interface SupervisorOptions {
  /** Inboxes, directory, logs and live deltas: `createJetStreamPorts(bus)`, or `createMemoryPorts()` with no NATS. */
  ports: SupervisorPorts;
  blobs: BlobStore;
  snapshots: SnapshotStore | null;
  tools: ToolRegistry;
  /** Policy rules, sandbox, secrets and budgets of the tool pipeline; default: no rules, no sandbox. */
  tooling?: ToolingPorts;
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  faults: FaultInjector;
  /** Where faults left records of the points that killed actors (default: this process's memory). */
  faultRecords?: FaultRecords;
  logger: Logger;
  /** Delivery settings of every hosted actor's inbox (max_deliver, backoff); default: inbox.ts's. */
  inbox?: InboxConsumerOptions;
  snapshotEvery?: number;
  clock?: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  /** The price of a model (USD per million tokens), for the cost of each attempt. */
  pricing?(model: string): Price | null;
  onCommit?(actorId: string, events: ActorEvent[]): void;
  /**
   * Awaited before a delivered message is handed to its actor: a host makes the directory say
   * `running` for mail that starts a turn (`DirectoryStatuses.mailArrives`), so a host dying
   * after it leaves the actor for another host to take on.
   */
  beforeReceive?(actorId: string, message: InboxMessage): Promise<void>;
  onDelta?(actorId: string, delta: ModelStreamEvent): void;
  /** Receives XState's inspection events (`@xstate.actor`, `@xstate.event`, `@xstate.snapshot`) of every hosted agent. */
  inspect?: InspectObserver;
  /** Depth and width of subagent trees, and what a parent's end does to its children (default: 3, 8, 64, cancel). */
  subagentLimits?: SubagentLimits;
  /** Git worktrees of `worktree` children (absent: such a spawn is refused). */
  worktrees?: Pick<SubagentPort, 'worktree' | 'worktreeDiff' | 'worktreeProblem'>;
  /** Leases that order conflicting calls of different agents of a tree (absent: only each agent orders its own). */
  resourceLeases?: ResourceLeaseStore;
  /** Limits of background jobs (default: the scheduler's). */
  jobLimits?: JobLimits;
  /** This process's name in leases and `job/started` (a host sets it; default `local`). */
  hostId?: string;
}

/**
 * The single-host supervisor: hosts agents in this process, creates them, rehydrates them from
 * snapshot + log tail, recovers what a crash left open, and feeds each its durable inbox.
 * (Leases, epochs from lease revisions and many hosts come with the supervision issue.)
 */
export class Supervisor {
  readonly reader: LogReader;
  private readonly hosted = new Map<string, Hosted>();
  private readonly clock: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  private wakeups: Promise<InboxWatch> | null = null;
  private claims: InboxWatch | null = null;
  /** A host's claim hook: mail arrived for an actor this process does not host. */
  private onUnhostedMail: ((actorId: string) => void) | null = null;
  private readonly tooling: ToolingPorts;
  private readonly faultRecords: FaultRecords;
  private stopped = false;
  /** Hosting of the children its agents spawn, and the port they reach their tree through. */
  private readonly tree: TreeHosting;
  /** Its agents' inbox reads: a few at a time, each until nothing waits. */
  private readonly drains: InboxDrains;
  /** The background jobs its agents start, each an actor of its own hosted beside them. */
  private readonly jobs!: JobHosting;
  /** The workflow runs started here (a person's or an agent's), each an actor of its own whose nodes are jobs. */
  private readonly workflows!: WorkflowHosting;

  constructor(private readonly opts: SupervisorOptions) {
    this.reader = opts.ports.logs.reader;
    this.clock = opts.clock ?? { nowMs: () => Date.now() };
    this.tooling = opts.tooling ?? defaultTooling();
    this.faultRecords = opts.faultRecords ?? createMemoryFaultRecords();
    this.tree = new TreeHosting(this, {
      directory: opts.ports.directory,
      inbox: opts.ports.inbox,
      reader: this.reader,
      clock: this.clock,
      limits: opts.subagentLimits ?? DEFAULT_SUBAGENT_LIMITS,
      // without a shared store the places are this supervisor's own: exact for the trees it hosts alone
      slots: opts.ports.treeSlots ?? createMemoryTreeSlots(),
      ...(opts.worktrees ? { worktrees: opts.worktrees } : {}),
    });
    this.drains = new InboxDrains({
      inbox: opts.ports.inbox,
      logger: opts.logger,
      stopped: () => this.stopped,
      ensureConsumer: (h) => this.ensureConsumer(h),
      take: (h, msg, channel) => this.take(h, msg, channel),
      erase: (actorId, delivery) => this.erase(actorId, delivery),
      wake: (actorId) => this.wake(actorId),
    });
    ({ jobs: this.jobs, workflows: this.workflows } = backgroundHosting(opts, {
      tooling: this.tooling, clock: this.clock,
      onCommit: (actorId, events) => this.opts.onCommit?.(actorId, events),
      listen: () => this.listen(),
    }));
  }

  /** Starts workflow runs hosted by this supervisor (`actorloop workflow run`, `start_workflow`). */
  get workflowPort(): WorkflowPort {
    return this.workflows.port;
  }

  /**
   * One watch of every inbox's mail signals tells the host which hosted actor has mail, and only
   * then is its durable consumer pulled. A parked actor holds no pull request, timer or heartbeat
   * (a pull loop per actor cost memory and a request a second each, and missed heartbeats once
   * thousands of them shared one event loop). A resync (a reconnect) makes every one look again.
   */
  private async listen(): Promise<void> {
    this.wakeups ??= this.opts.ports.inbox.watch({
      mail: (actorId) => this.wake(actorId),
      resync: () => {
        if (!this.stopped) for (const id of this.hosted.keys()) this.wake(id);
        if (!this.stopped) this.workflows.wakeAll();
      },
    });
    // registered before any actor looks at its inbox: no publish falls between
    await this.wakeups;
  }

  /** Registers a new agent in the directory and hosts it with an empty log. */
  async create(entry: Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>, opts: { epoch?: number } = {}): Promise<AgentActor> {
    const now = new Date(this.clock.nowMs()).toISOString();
    // The entry and the mail watch at once: creation is a round trip (investigators are many and
    // short). A new actor's log is empty, so it is not read: its first commit is fenced on "nothing
    // on this subject yet", and a log that held anything would refuse it. Its consumer is made
    // beside it, not before: mail sent from this process is handed over once the inbox accepted it,
    // and the consumer (which delivers from the inbox's first message) is only needed for the copy
    // to ack and for mail from elsewhere. A crash before it exists loses nothing: the next host
    // makes it, and it delivers everything.
    await Promise.all([
      this.opts.ports.directory.put({ ...entry, status: 'running', createdAt: now, updatedAt: now }),
      this.listen(),
    ]);
    const projection = emptyProjection(entry.actorId);
    const actor = this.build(entry.actorId, entry.rootId, projection, null, { seq: 0, streamSeq: 0 }, opts.epoch ?? 1, 0);
    actor.open();
    const h: Hosted = { actor, consumer: null, inbox: null, takes: Promise.resolve(), leftToDrain: null, draining: false, again: false, retry: null };
    this.hosted.set(actor.actorId, h);
    this.ensureConsumer(h).catch((err: unknown) => {
      // the drain makes it when mail wakes the actor
      this.opts.logger.debug({ err, actorId: actor.actorId }, 'inbox consumer not made yet; the next look makes it');
    });
    // mail that arrived before the consumer listened for it
    this.wake(actor.actorId);
    return actor;
  }

  /**
   * Rehydrates an agent (latest snapshot + log tail, refusing gaps), then, when a crash left a
   * turn open, commits how it was closed and carries on. Returns whether recovery ran.
   */
  async hydrate(
    actorId: string,
    onHydrated?: (actor: AgentActor) => void,
    opts: { epoch?: number } = {},
  ): Promise<{ actor: AgentActor; recovered: boolean; entry: DirectoryEntry }> {
    const entry = await this.opts.ports.directory.get(actorId);
    if (!entry) {
      throw agentNotFound(actorId);
    }
    if (entry.kind === 'workflow') {
      throw new ActorloopError('actor.is_workflow', `${actorId} is a workflow run, not an agent`, { hint: `see it with actorloop workflow ${actorId}` });
    }
    if (entry.kind === 'job') {
      throw new ActorloopError('actor.is_job', `${actorId} is a background job, not an agent`, { hint: `see it with actorloop job ${actorId}` });
    }
    const r = await rehydrate<Projection>({
      reader: this.reader,
      snapshots: this.opts.snapshots ?? { load: async () => undefined, save: async () => {}, delete: async () => {} },
      rootId: entry.rootId,
      actorId,
      schemaVersion: PROJECTION_VERSION,
      initial: () => emptyProjection(actorId),
      restore: (p) => p as Projection,
      fold: foldEvent,
      logger: this.opts.logger,
    });
    // A new incarnation: its epoch is its lease revision under a host, else one past the highest
    // in the log; either way never below what the log holds (epochs never go back).
    const epoch = Math.max(opts.epoch ?? 0, r.state.epoch + 1);
    const actor = this.build(actorId, entry.rootId, r.state, r.machines as MachineSnapshots | null, r.position, epoch, r.snapshotSeq);
    actor.replay(r.tail);
    onHydrated?.(actor);
    actor.open();
    let recovered = false;
    const records = this.faultRecords.list(actorId);
    if (actor.machines.hasOpenTurn() || actor.machines.isClaiming()) {
      // first in the recovery batch: how the incarnations before this one ended
      for (const note of killNotes(r.state, records)) actor.stage(note);
      const rehydrated = actor.stage({ type: 'actor/rehydrated', data: { snapshotSeq: r.snapshotSeq, tailEvents: r.tail.length } });
      // the records are spent once the notes are in the log (a crash before that reads them again)
      if (records.length > 0) actor.afterCommit(rehydrated.seq, { run: () => this.faultRecords.clear(actorId), drop: () => {} });
      try {
        this.opts.faults.hit('during:recovery', actorId, epoch);
      } catch (err) {
        // dropped mid-recovery: nothing of it was committed; the next incarnation starts over
        if (!(err instanceof ActorDropped)) throw err;
        actor.fail(err);
        return { actor, recovered: true, entry };
      }
      recovered = actor.recover('the previous incarnation stopped with a turn open');
    } else if (records.length > 0) {
      // nothing open: no recovery will ever need them
      this.faultRecords.clear(actorId);
    }
    await this.serve(actor);
    // a child that died owing its parent a turn's notice sends it now (deduped by its ID)
    if (!recovered && actor.projection.noticeOwed) actor.sendOwedNotice();
    return { actor, recovered, entry };
  }

  /**
   * Hosts an actor a host took the lease of, with the lease revision as its epoch: an agent is
   * rehydrated (and recovered), a job replayed from its log (and its lost execution decided).
   */
  async hostClaimed(actorId: string, epoch: number): Promise<void> {
    const entry = await this.opts.ports.directory.get(actorId);
    if (entry?.kind === 'job') return this.jobs.hydrate(entry, epoch);
    if (entry?.kind === 'workflow') return this.workflows.hydrate(entry, epoch);
    await this.hydrate(actorId, undefined, { epoch });
  }

  /** Messages waiting in an actor's inbox: not yet delivered, or delivered and not acked. */
  async inboxPending(actorId: string): Promise<number> {
    const h = this.hosted.get(actorId);
    if (h) await this.ensureConsumer(h);
    const inbox = await this.opts.ports.inbox.open(actorId, { logger: this.opts.logger });
    return inbox.pending();
  }

  /**
   * Publishes what a person says to an actor's durable inbox (the PubAck means the inbox accepted
   * it), on the person channel: on JetStream through the bus's client login, which a bus opened
   * for a host process alone does not have.
   */
  async send(msg: InboxMessage): Promise<void> {
    await this.opts.ports.inbox.publish(msg, 'person');
    // accepted: an actor hosted here takes it now, not when its consumer delivers it
    this.takeAccepted(msg);
  }

  /**
   * Hands a message a person sent, which its inbox accepted, to its actor when hosted here, as a
   * drain would take a delivery of it (the same fault point and `beforeReceive` first); the
   * consumer's copy is then acked once the receipt is committed. Anything that stops it leaves
   * the message to the consumer, which takes it as any delivery (and dead-letters it in the end).
   */
  private takeAccepted(msg: InboxMessage): void {
    const h = this.hosted.get(msg.to);
    if (!h || this.stopped || h.actor.failed || h.actor.projection.inbox[msg.id]) return;
    const { actor } = h;
    // A message whose content the log keeps out (a sensitive answer) or redacted is erased from
    // the inbox's store right after its receipt, before its ack: the delivery is what erases, so
    // such a message waits for it, and so does every message after it.
    if (h.leftToDrain || (msg.kind === 'ask_answer' ? keepsOutOfLog(actor.projection, msg.content) : redactedContent(msg.kind, msg.content, actor.ports.tooling.redactor).redactions > 0)) {
      (h.leftToDrain ??= new Set()).add(msg.id);
      return;
    }
    this.take(h, msg, 'person').catch((err: unknown) => {
      if (err instanceof ActorDropped) actor.fail(err);
      else this.opts.logger.debug({ err, actorId: actor.actorId, messageId: msg.id }, 'message not taken at once; its delivery takes it');
    });
  }

  /**
   * Takes a message into its actor's log, after the take before it: the fault point and
   * `beforeReceive` once per message (a copy of one already received waits for its receipt
   * alone), then the receipt. Resolves once the receipt is committed. One at a time, so a receipt
   * that awaits (a sealed answer) keeps its place, whichever path each message came by.
   */
  private take(h: Hosted, msg: InboxMessage, channel: InboxChannel): Promise<void> {
    const { actor } = h;
    const run = async (): Promise<void> => {
      if (!actor.projection.inbox[msg.id]) {
        actor.ports.faults.hit('before:inbox-receive', actor.actorId);
        if (this.opts.beforeReceive) await this.opts.beforeReceive(actor.actorId, msg);
      }
      // Include before ack: a crash between the two redelivers, and the message ID dedupes it.
      await actor.receive(msg, channel);
    };
    const taken = h.takes.then(run);
    h.takes = taken.catch(() => {});
    return taken;
  }

  /** Makes sure of the hosted actor's inbox consumer, once (again after a failure). */
  private ensureConsumer(h: Hosted): Promise<void> {
    h.consumer ??= this.opts.ports.inbox.ensure(h.actor.actorId, this.opts.inbox).catch((err: unknown) => {
      h.consumer = null;
      throw err;
    });
    return h.consumer;
  }

  private build(
    actorId: string, rootId: string, projection: Projection, machines: MachineSnapshots | null,
    position: { seq: number; streamSeq: number }, epoch: number, snapshotSeq: number,
  ): AgentActor {
    const logger = lazyChild(this.opts.logger, { actorId });
    // the writer retries an unknown commit until it is stored; a stopped actor's must give up
    const life = new AbortController();
    const log = this.opts.ports.logs.writer({ rootId, actorId, position, epoch, logger, signal: life.signal });
    return new AgentActor({
      actorId,
      rootId,
      projection,
      machines,
      snapshotEvery: this.opts.snapshotEvery ?? 64,
      snapshotSeq,
      // each agent is its own root XState actor, systemId = its ID (design §7)
      ...(this.opts.inspect ? { inspect: this.opts.inspect } : {}),
      ports: {
        log,
        blobs: this.opts.blobs,
        snapshots: this.opts.snapshots,
        tools: this.opts.tools,
        tooling: this.tooling,
        modelFor: this.opts.modelFor,
        clock: this.clock,
        ...(this.opts.pricing ? { pricing: this.opts.pricing } : {}),
        // the actor's points name its epoch, for the fault record recovery reads
        faults: { hit: (point, id) => this.opts.faults.hit(point, id, epoch) },
        logger,
        onHalt: () => life.abort(),
        subagents: this.tree.port,
        jobs: this.jobs.port,
        workflows: this.workflows.port,
        ...(this.opts.resourceLeases ? { resourceLeases: this.opts.resourceLeases } : {}),
        // read only when a blob the log names is missing: the error names the event that needs it
        blobNaming: (digest) => firstNaming(this.reader, rootId, actorId, digest),
        onCommit: (events) => this.opts.onCommit?.(actorId, events),
        onDelta: (d) => {
          // Live only (core NATS, not persisted): clients see tokens as they come; the log
          // records the accepted output alone.
          this.opts.ports.live.publish(liveSubject(rootId, actorId), JSON.stringify(d));
          this.opts.onDelta?.(actorId, d);
        },
      },
    });
  }

  private async serve(actor: AgentActor): Promise<void> {
    await this.listen();
    const consumer = this.opts.ports.inbox.ensure(actor.actorId, this.opts.inbox);
    await consumer;
    this.hosted.set(actor.actorId, { actor, consumer, inbox: null, takes: Promise.resolve(), leftToDrain: null, draining: false, again: false, retry: null });
    // mail that arrived while no host listened
    this.wake(actor.actorId);
  }

  /** Reads an actor's inbox until nothing is waiting; a wake during a drain makes it look again. */
  private wake(actorId: string): void {
    if (this.jobs.hosts(actorId)) return this.jobs.wake(actorId);
    if (this.workflows.hosts(actorId)) return this.workflows.wake(actorId);
    const h = this.hosted.get(actorId);
    if (!h && !this.stopped) this.onUnhostedMail?.(actorId);
    if (!h || this.stopped) return;
    if (h.draining) {
      h.again = true;
      return;
    }
    h.draining = true;
    void this.drains.run(h).finally(() => {
      h.draining = false;
      h.inbox = null;
      if (h.again) {
        h.again = false;
        this.wake(actorId);
      }
    });
  }

  /**
   * Erases a received message whose content held a secret from the inbox's store. A failure (a
   * stream that denies deletes, a timeout) is logged and the delivery is acked all the same: the
   * log holds its receipt, and holding the message back would make it a dead letter, copied whole.
   */
  private async erase(actorId: string, delivery: InboxDelivery): Promise<void> {
    try {
      await delivery.erase();
    } catch (err) {
      this.opts.logger.warn({ actorId, messageId: delivery.message.id, code: err instanceof ActorloopError ? err.code : undefined, err },
        'inbox message holding a secret was not erased from the INBOX stream; it stays there until the stream drops it');
    }
  }

  /**
   * Who takes the lease of a child an agent here creates (a host, a command hosting its tree):
   * the child runs here when it returns an epoch, elsewhere when it returns null.
   */
  setAdopter(adopter: (actorId: string) => Promise<number | null>): void {
    this.tree.setAdopter(adopter);
    this.jobs.setAdopter(adopter);
    this.workflows.setAdopter(adopter);
  }

  /** Who gives back the lease of a job that is over here: a host's, or a command's lease keeper. */
  setReleaser(release: (actorId: string) => Promise<void>): void {
    this.jobs.setReleaser(release);
    this.workflows.setReleaser(release);
  }

  /** True when this process hosts the actor now. */
  hosts(actorId: string): boolean {
    return this.hosted.has(actorId) || this.jobs.hosts(actorId) || this.workflows.hosts(actorId);
  }

  /** The root of an actor hosted here now, or undefined (the live inspection feed's subject names it). */
  rootOf(actorId: string): string | undefined {
    return this.hosted.get(actorId)?.actor.rootId;
  }

  /** The XState actor of an actor hosted here now, or undefined (the live inspection feed inspects it while it is watched). */
  refOf(actorId: string): AgentActorRef | undefined {
    return this.hosted.get(actorId)?.actor.ref;
  }

  /**
   * Hands an accepted message to the actor it is for, when hosted here, on the actors' channel
   * (the subagent port's messages), taken as a delivery would be (in order, the fault point and
   * `beforeReceive` first); null when it is not hosted here.
   */
  handOver(msg: InboxMessage): Promise<void> | null {
    const h = this.hosted.get(msg.to);
    if (!h || this.stopped || h.actor.failed) return null;
    if (h.leftToDrain) {
      // mail before it waits for its delivery: so does this
      h.leftToDrain.add(msg.id);
      return null;
    }
    return this.take(h, msg, 'actor').catch((err: unknown) => {
      if (err instanceof ActorDropped) h.actor.fail(err);
      throw err;
    });
  }

  /** True once `stop` was called: nothing more is hosted. */
  get isStopped(): boolean {
    return this.stopped;
  }

  /**
   * Hosts an agent of a tree this process runs, once, under the lease the adopter takes (a command
   * resuming a tree after a kill hosts the tree's other agents beside the one it resumes); nothing
   * when another process holds it.
   */
  adopt(entry: DirectoryEntry): Promise<void> {
    if (entry.kind === 'job') return this.jobs.adopt(entry);
    if (entry.kind === 'workflow') return this.workflows.adopt(entry);
    return this.tree.host(entry);
  }

  /**
   * Listens for inbox mail now, calling `onUnhosted` for mail to an actor this process does not
   * host, and for a command's request that a host claim an actor (`claim.<actorId>`).
   */
  async listenForMail(onUnhosted: (actorId: string) => void): Promise<void> {
    this.onUnhostedMail = onUnhosted;
    this.claims ??= this.opts.ports.inbox.watchClaims((actorId) => {
      if (!this.stopped && !this.hosts(actorId)) onUnhosted(actorId);
    });
    await this.listen();
  }

  /** Stops hosting one actor (its lease moved elsewhere): in-flight work is aborted, nothing committed. */
  evict(actorId: string, reason: unknown): void {
    this.jobs.evict(actorId);
    this.workflows.evict(actorId);
    const h = this.hosted.get(actorId);
    if (!h) return;
    if (h.retry) clearTimeout(h.retry);
    h.actor.fail(reason);
    this.hosted.delete(actorId);
  }

  /** Waits until no hosted actor runs a tool, or `timeoutMs` passes (a drain lets effects reach a recordable end). */
  async quiesceTools(timeoutMs: number): Promise<void> {
    const until = this.clock.nowMs() + timeoutMs;
    while (this.clock.nowMs() < until && [...this.hosted.values()].some((h) => h.actor.runner.active > 0)) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Stops hosting every actor: inbox reads end, in-flight work is aborted, nothing is closed in
   * the log. An actor left with work open gets `actor/released` (with `reason`), so the next
   * incarnation knows it was let go, not killed.
   */
  async stop(reason = 'its host process stopped hosting it'): Promise<void> {
    this.stopped = true;
    // a watch still being set up is closed once it is; a closed connection has nothing to close
    void this.wakeups?.then((w) => w.close()).catch(() => {});
    this.wakeups = null;
    this.claims?.close();
    this.claims = null;
    const releases: Array<Promise<void>> = [];
    for (const h of this.hosted.values()) {
      if (h.retry) clearTimeout(h.retry);
      const a = h.actor;
      const open = !a.isHalted && (a.machines.hasOpenTurn() || a.machines.isClaiming());
      a.stop();
      if (open) releases.push(commitRelease(a, reason));
    }
    this.hosted.clear();
    this.workflows.stop();
    await Promise.all([...releases, this.jobs.stop()]);
  }
}
