import type { Logger } from 'pino';
import type { Bus } from '../bus/connection.js';
import type { DirectoryEntry } from '../bus/directory.js';
import { openInbox, publishInbox, type Inbox } from '../bus/inbox.js';
import { liveSubject } from '../bus/subjects.js';
import { NotFoundError } from '../protocol/errors.js';
import type { TurnSettings } from '../protocol/events.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { ModelAdapter, ModelStreamEvent } from '../model/model-port.js';
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
import type { MachineSnapshots } from './machine-set.js';

/** What a supervisor needs to host agents. */
export interface SupervisorOptions {
  bus: Bus;
  blobs: BlobStore;
  snapshots: SnapshotStore | null;
  tools: ToolRegistry;
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  faults: FaultInjector;
  logger: Logger;
  snapshotEvery?: number;
  clock?: { nowMs(): number };
  onCommit?(actorId: string, events: ActorEvent[]): void;
  onDelta?(actorId: string, delta: ModelStreamEvent): void;
}

/** A hosted agent and the loop that feeds it its inbox. */
interface Hosted {
  actor: AgentActor;
  stopInbox: AbortController;
  inboxLoop: Promise<void>;
}

/**
 * The single-host supervisor: hosts agents in this process, creates them, rehydrates them from
 * snapshot + log tail, recovers what a crash left open, and feeds each its durable inbox.
 * (Leases, epochs from lease revisions and many hosts come with the supervision issue.)
 */
export class Supervisor {
  readonly reader: LogReader;
  private readonly hosted = new Map<string, Hosted>();
  private readonly clock: { nowMs(): number };

  constructor(private readonly opts: SupervisorOptions) {
    this.reader = createLogReader({ js: opts.bus.js, jsm: opts.bus.jsm });
    this.clock = opts.clock ?? { nowMs: () => Date.now() };
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
      this.opts.faults.hit('during:recovery', actorId);
      recovered = actor.recover('the previous incarnation stopped with a turn open');
    }
    await this.serve(actor);
    return { actor, recovered, entry };
  }

  /** Publishes a message to an actor's durable inbox (the PubAck means the inbox accepted it). */
  async send(msg: InboxMessage): Promise<void> {
    await publishInbox(this.opts.bus.js, msg);
  }

  private build(
    actorId: string, rootId: string, projection: Projection, machines: MachineSnapshots | null,
    position: { seq: number; streamSeq: number }, epoch: number, snapshotSeq: number,
  ): AgentActor {
    const logger = this.opts.logger.child({ actorId });
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
        modelFor: this.opts.modelFor,
        clock: this.clock,
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
    const inbox = await openInbox(this.opts.bus.js, this.opts.bus.jsm, actor.actorId, { logger: this.opts.logger });
    const stopInbox = new AbortController();
    const inboxLoop = this.inboxLoop(actor, inbox, stopInbox.signal);
    this.hosted.set(actor.actorId, { actor, stopInbox, inboxLoop });
  }

  private async inboxLoop(actor: AgentActor, inbox: Inbox, signal: AbortSignal): Promise<void> {
    while (!signal.aborted && !actor.failed) {
      let delivery;
      try {
        delivery = await inbox.next({ expiresMs: 1_000 });
      } catch (err) {
        if (signal.aborted) return;
        this.opts.logger.warn({ err, actorId: actor.actorId }, 'inbox read failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (!delivery) continue;
      if (signal.aborted) return delivery.nak();
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
      }
    }
  }

  /** Stops hosting every actor: inbox loops end, in-flight work is aborted, nothing is closed in the log. */
  async stop(): Promise<void> {
    for (const h of this.hosted.values()) {
      h.stopInbox.abort();
      h.actor.stop();
    }
    // Not awaited: a loop sits in a pull of up to a second that cannot be interrupted; once
    // stopped it naks whatever that pull returns, and closing the connection ends the pull.
    for (const h of this.hosted.values()) h.inboxLoop.catch(() => {});
    this.hosted.clear();
  }
}
