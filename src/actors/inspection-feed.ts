import type { InspectionEvent } from 'xstate';
import type { LivePublisher } from '../bus/log-publisher.js';
import { inspectSubject } from '../bus/subjects.js';
import { WATCH_FRESH_MS, type InspectionReport } from '../protocol/inspection.js';
import type { AgentSnapshot } from './agent-logic.js';
import type { MachineStates } from './machine-set.js';

/** What the feed reads of the agents hosted here (a supervisor, or several). */
export interface InspectedAgents {
  /** The root of an actor hosted here; undefined when it is not hosted here. */
  rootOf(actorId: string): string | undefined;
  /** The state values of a hosted actor's machines now; undefined when it is not hosted here. */
  machinesOf(actorId: string): MachineStates | undefined;
}

/** Options of an `InspectionFeed`. */
export interface InspectionFeedOptions {
  /** This host's name in the reports. */
  host: string;
  /** Where reports go: core NATS, best effort, with the next commit's socket write. */
  live: Pick<LivePublisher, 'publish'>;
  agents: InspectedAgents;
  clock?: { nowMs(): number };
  /** How long a watch lasts without being asked again (default WATCH_FRESH_MS). */
  freshMs?: number;
}

/**
 * A host's side of the live inspection feed (src/protocol/inspection.ts). Its `observer` is the
 * XState inspect observer of every agent the host runs; it reports an agent's snapshots on
 * `inspect.<rootId>.<actorId>` only while a watch of that agent is fresh. With no watch at all
 * it returns on its first comparison: a host nobody watches reads no snapshot and publishes
 * nothing. Which agents are watched is kept here, not asked of the bus, for the same reason.
 */
export class InspectionFeed {
  /** Actor → when its watch lapses (ms, this host's clock). */
  private readonly watched = new Map<string, number>();
  private readonly clock: { nowMs(): number };
  private readonly freshMs: number;
  /** The inspect observer to give the supervisor. */
  readonly observer: (e: InspectionEvent) => void;

  constructor(private readonly o: InspectionFeedOptions) {
    this.clock = o.clock ?? { nowMs: () => Date.now() };
    this.freshMs = o.freshMs ?? WATCH_FRESH_MS;
    this.observer = (e) => {
      if (this.watched.size === 0 || e.type !== '@xstate.snapshot') return;
      // each agent is its own root XState actor whose systemId is the actor's ID (design §7)
      const actorId = (e.actorRef as { systemId?: string }).systemId;
      if (actorId === undefined || !this.fresh(actorId)) return;
      // an actor being built (replaying its log before it is hosted) has no root here yet: its
      // replayed transitions are the log's, not live ones
      const rootId = this.o.agents.rootOf(actorId);
      if (rootId === undefined) return;
      this.report(actorId, rootId, e.event.type, (e.snapshot as AgentSnapshot).machines);
    };
  }

  /** A watch request for `actorId`: report it for `freshMs` from now; `hello`: report its states at once. */
  watch(actorId: string, hello: boolean): void {
    this.watched.set(actorId, this.clock.nowMs() + this.freshMs);
    if (!hello) return;
    const rootId = this.o.agents.rootOf(actorId);
    const machines = this.o.agents.machinesOf(actorId);
    if (rootId !== undefined && machines !== undefined) this.report(actorId, rootId, null, machines);
  }

  /** The actors watched now (lapsed watches are dropped here). */
  watching(): string[] {
    return [...this.watched.keys()].filter((id) => this.fresh(id));
  }

  private fresh(actorId: string): boolean {
    const until = this.watched.get(actorId);
    if (until === undefined) return false;
    if (until >= this.clock.nowMs()) return true;
    this.watched.delete(actorId);
    return false;
  }

  private report(actorId: string, rootId: string, event: string | null, machines: MachineStates): void {
    const r: InspectionReport = { v: 1, actorId, rootId, event, machines: machines as InspectionReport['machines'], at: this.clock.nowMs(), host: this.o.host };
    this.o.live.publish(inspectSubject(rootId, actorId), JSON.stringify(r));
  }
}
