import type { Logger } from 'pino';
import type { Bus } from '../bus/connection.js';
import type { DirectoryEntry } from '../bus/directory.js';
import { ensureInboxConsumer, openInbox, publishInbox, type Inbox } from '../bus/inbox.js';
import { inboxSubject, liveSubject } from '../bus/subjects.js';
import type { Subscription } from '@nats-io/nats-core';
import { NotFoundError } from '../protocol/errors.js';
import type { TurnSettings } from '../protocol/events.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { ModelAdapter, ModelStreamEvent } from '../model/model-port.js';
import type { Price } from '../model/pricing.js';
import type { ActorEvent } from '../protocol/events.js';
import type { BlobStore } from '../store/blob-port.js';
import { createJetStreamLog, createLogReader } from '../store/jetstream-log.js';
import type { LogReader } from '../store/log-port.js';
import { emptyProjection, foldEvent, PROJECTION_VERSION, type Projection } from '../store/projection.js';
import { rehydrate } from '../store/rehydrate.js';
import type { SnapshotStore } from '../store/snapshots.js';
import type { ToolRegistry } from '../tools/registry.js';
import { AgentActor } from './agent-actor.js';
import { ActorDropped, type FaultInjector } from './faults.js';
import { lazyChild } from './lazy-logger.js';
import type { MachineSnapshots } from './machine-set.js';
import { defaultTooling, type ToolingPorts } from './tooling.js';

/** What a supervisor needs to host agents. */
export interface SupervisorOptions {
  bus: Bus;
  blobs: BlobStore;
  snapshots: SnapshotStore | null;
  tools: ToolRegistry;
  /** Policy rules, sandbox, secrets and budgets of the tool pipeline; default: no rules, no sandbox. */
  tooling?: ToolingPorts;
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  faults: FaultInjector;
  logger: Logger;
  snapshotEvery?: number;
  clock?: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  /** The price of a model (USD per million tokens), for the cost of each attempt. */
  pricing?(model: string): Price | null;
  onCommit?(actorId: string, events: ActorEvent[]): void;
  onDelta?(actorId: string, delta: ModelStreamEvent): void;
}

/** A hosted agent and the state of its inbox reader. */
interface Hosted {
  actor: AgentActor;
  /** Open only while a drain runs: a parked actor keeps no consumer handle. */
  inbox: Inbox | null;
  /** A drain is running; `again` asks it to look once more when it ends. */
  draining: boolean;
  again: boolean;
  /** A look scheduled for redeliveries (nak, lost ack). */
  retry: NodeJS.Timeout | null;
}

/** Inbox drains running at once on one host. */
const MAX_CONCURRENT_DRAINS = 16;

/** How long to wait before looking again for a message delivered but not acked. */
const REDELIVERY_CHECK_MS = 1_500;

/**
 * The single-host supervisor: hosts agents in this process, creates them, rehydrates them from
 * snapshot + log tail, recovers what a crash left open, and feeds each its durable inbox.
 * (Leases, epochs from lease revisions and many hosts come with the supervision issue.)
 */
export class Supervisor {
  readonly reader: LogReader;
  private readonly hosted = new Map<string, Hosted>();
  private readonly clock: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  private wakeups: Subscription | null = null;
  private readonly tooling: ToolingPorts;
  private stopped = false;

  constructor(private readonly opts: SupervisorOptions) {
    this.reader = createLogReader({ js: opts.bus.js, jsm: opts.bus.jsm });
    this.clock = opts.clock ?? { nowMs: () => Date.now() };
    this.tooling = opts.tooling ?? defaultTooling();
  }

  /**
   * Inbox publishes are plain NATS messages too: one core subscription on `inbox.>` tells the
   * host which hosted actor has mail, and only then is its durable consumer pulled. A parked actor
   * holds no pull request, timer or heartbeat (a pull loop per actor cost ~8 KB and a request a
   * second each, and missed heartbeats once a thousand of them shared one event loop).
   */
  private async listen(): Promise<void> {
    if (this.wakeups) return;
    const prefix = inboxSubject('');
    this.wakeups = this.opts.bus.nc.subscribe(inboxSubject('>'), {
      callback: (_err, msg) => this.wake(msg.subject.slice(prefix.length)),
    });
    // registered with the server before any actor looks at its inbox: no publish falls between
    await this.opts.bus.nc.flush();
  }

  /** Registers a new agent in the directory and hosts it with an empty log. */
  async create(entry: Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>): Promise<AgentActor> {
    const now = new Date(this.clock.nowMs()).toISOString();
    await this.opts.bus.directory.put({ ...entry, status: 'running', createdAt: now, updatedAt: now });
    const position = await this.reader.end(entry.rootId, entry.actorId);
    const projection = emptyProjection(entry.actorId);
    const actor = this.build(entry.actorId, entry.rootId, projection, null, position, 1, 0);
    actor.open();
    await this.serve(actor);
    return actor;
  }

  /**
   * Rehydrates an agent (latest snapshot + log tail, refusing gaps), then, when a crash left a
   * turn open, commits how it was closed and carries on. Returns whether recovery ran.
   */
  async hydrate(
    actorId: string,
    onHydrated?: (actor: AgentActor) => void,
  ): Promise<{ actor: AgentActor; recovered: boolean; entry: DirectoryEntry }> {
    const entry = await this.opts.bus.directory.get(actorId);
    if (!entry) {
      throw new NotFoundError('actor.not_found', `no agent ${actorId} in this data dir`, {
        hint: 'list agents with `actorloop runs`, and pass the same --data-dir and --nats as the run',
      });
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
    // A new incarnation: its epoch is one past the highest in the log.
    const epoch = r.state.epoch + 1;
    const actor = this.build(actorId, entry.rootId, r.state, r.machines as MachineSnapshots | null, r.position, epoch, r.snapshotSeq);
    actor.replay(r.tail);
    onHydrated?.(actor);
    actor.open();
    let recovered = false;
    if (actor.machines.hasOpenTurn() || actor.machines.isClaiming()) {
      actor.stage({ type: 'actor/rehydrated', data: { snapshotSeq: r.snapshotSeq, tailEvents: r.tail.length } });
      try {
        this.opts.faults.hit('during:recovery', actorId);
      } catch (err) {
        // dropped mid-recovery: nothing of it was committed; the next incarnation starts over
        if (!(err instanceof ActorDropped)) throw err;
        actor.fail(err);
        return { actor, recovered: true, entry };
      }
      recovered = actor.recover('the previous incarnation stopped with a turn open');
    }
    await this.serve(actor);
    return { actor, recovered, entry };
  }

  /** Messages waiting in an actor's inbox: not yet delivered, or delivered and not acked. */
  async inboxPending(actorId: string): Promise<number> {
    const inbox = await openInbox(this.opts.bus.js, this.opts.bus.jsm, actorId, { logger: this.opts.logger, ensured: true });
    return inbox.pending();
  }

  /** Publishes a message to an actor's durable inbox (the PubAck means the inbox accepted it). */
  async send(msg: InboxMessage): Promise<void> {
    await publishInbox(this.opts.bus.js, msg);
  }

  private build(
    actorId: string, rootId: string, projection: Projection, machines: MachineSnapshots | null,
    position: { seq: number; streamSeq: number }, epoch: number, snapshotSeq: number,
  ): AgentActor {
    const logger = lazyChild(this.opts.logger, { actorId });
    const log = createJetStreamLog({ js: this.opts.bus.js, rootId, actorId, position, epoch, logger });
    return new AgentActor({
      actorId,
      rootId,
      projection,
      machines,
      snapshotEvery: this.opts.snapshotEvery ?? 64,
      snapshotSeq,
      ports: {
        log,
        blobs: this.opts.blobs,
        snapshots: this.opts.snapshots,
        tools: this.opts.tools,
        tooling: this.tooling,
        modelFor: this.opts.modelFor,
        clock: this.clock,
        ...(this.opts.pricing ? { pricing: this.opts.pricing } : {}),
        faults: this.opts.faults,
        logger,
        onCommit: (events) => this.opts.onCommit?.(actorId, events),
        onDelta: (d) => {
          // Live only (core NATS, not persisted): clients see tokens as they come; the log
          // records the accepted output alone.
          this.opts.bus.nc.publish(liveSubject(rootId, actorId), JSON.stringify(d));
          this.opts.onDelta?.(actorId, d);
        },
      },
    });
  }

  private async serve(actor: AgentActor): Promise<void> {
    await this.listen();
    await ensureInboxConsumer(this.opts.bus.jsm, actor.actorId);
    this.hosted.set(actor.actorId, { actor, inbox: null, draining: false, again: false, retry: null });
    // mail that arrived while no host listened
    this.wake(actor.actorId);
  }

  /** Reads an actor's inbox until nothing is waiting; a wake during a drain makes it look again. */
  private wake(actorId: string): void {
    const h = this.hosted.get(actorId);
    if (!h || this.stopped) return;
    if (h.draining) {
      h.again = true;
      return;
    }
    h.draining = true;
    void this.limited(() => this.drain(h)).finally(() => {
      h.draining = false;
      h.inbox = null;
      if (h.again) {
        h.again = false;
        this.wake(actorId);
      }
    });
  }

  // Drains run a few at a time: a thousand actors woken at once would otherwise starve the event
  // loop, and their pulls' heartbeats would time out.
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  private async limited<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= MAX_CONCURRENT_DRAINS) await new Promise<void>((r) => this.waiting.push(r));
    this.running += 1;
    try {
      return await fn();
    } finally {
      this.running -= 1;
      this.waiting.shift()?.();
    }
  }

  private async drain(h: Hosted): Promise<void> {
    const { actor } = h;
    while (!this.stopped && !actor.failed) {
      let delivery;
      try {
        const inbox = (h.inbox ??= await openInbox(this.opts.bus.js, this.opts.bus.jsm, actor.actorId, {
          logger: this.opts.logger,
          ensured: true,
        }));
        const { undelivered, unacked } = await inbox.counts();
        if (undelivered === 0) {
          // Delivered elsewhere and never acked (a crashed host, a nak): it comes again after its
          // wait, with no publish to wake us, so look again then.
          if (unacked > 0) this.lookAgain(h, REDELIVERY_CHECK_MS);
          return;
        }
        delivery = await inbox.next({ expiresMs: 1_000 });
      } catch (err) {
        if (this.stopped) return;
        // Under load a pull can miss its heartbeats; nothing is lost, the next look finds the message.
        this.opts.logger.debug({ err, actorId: actor.actorId }, 'inbox read failed; looking again shortly');
        this.lookAgain(h, 500);
        return;
      }
      if (!delivery) continue;
      if (this.stopped) return delivery.nak();
      try {
        // Include before ack: a crash between the two redelivers, and the message ID dedupes it.
        await actor.receive(delivery.message);
        this.opts.faults.hit('before:inbox-ack', actor.actorId);
        await delivery.ack();
      } catch (err) {
        if (err instanceof ActorDropped) actor.fail(err);
        delivery.nak();
        if (actor.failed) return;
        this.opts.logger.warn({ err, actorId: actor.actorId }, 'inbox message not taken; it will be redelivered');
        this.lookAgain(h, REDELIVERY_CHECK_MS);
        return;
      }
    }
  }

  private lookAgain(h: Hosted, delayMs: number): void {
    if (h.retry) return;
    h.retry = setTimeout(() => {
      h.retry = null;
      this.wake(h.actor.actorId);
    }, delayMs);
    h.retry.unref?.();
  }

  /** Stops hosting every actor: inbox reads end, in-flight work is aborted, nothing is closed in the log. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeups?.unsubscribe();
    this.wakeups = null;
    for (const h of this.hosted.values()) {
      if (h.retry) clearTimeout(h.retry);
      h.actor.stop();
    }
    this.hosted.clear();
  }
}
