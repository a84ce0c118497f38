import type { InspectionEvent, Subscription } from 'xstate';
import type { LivePublisher } from '../../bus/log-publisher.js';
import { inspectSubject } from '../../bus/subjects.js';
import { WATCH_FRESH_MS, type InspectionReport } from '../../protocol/inspection.js';
import type { AgentActorRef, AgentSnapshot } from '../actor/agent-logic.js';

/** What the feed reads of the agents hosted here (a supervisor, or several). */
export interface InspectedAgents {
  /** The root of an actor hosted here; undefined when it is not hosted here. */
  rootOf(actorId: string): string | undefined;
  /** The XState actor of an actor hosted here; undefined when it is not hosted here. */
  refOf(actorId: string): Pick<AgentActorRef, 'system' | 'getSnapshot'> | undefined;
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

/** An agent's XState actor the feed inspects, and the inspection to end. */
interface Attached {
  ref: object;
  sub: Subscription;
}

/**
 * A host's side of the live inspection feed (src/protocol/inspection.ts). A watch request for an
 * agent hosted here attaches an inspect observer to that agent's XState actor (`system.inspect`),
 * which reports each of its snapshots on `inspect.<rootId>.<actorId>` while the watch is fresh
 * and detaches itself at the first event after it lapsed. An agent nobody watches has no
 * observer at all: a host nobody watches does and publishes nothing more than before the feed.
 * An agent that came to this host while watched is attached at the next request (they come
 * every WATCH_EVERY_MS); one that went elsewhere is reported by the host it went to.
 */
export class InspectionFeed {
  /** Actor → when its watch lapses (ms, this host's clock). */
  private readonly watched = new Map<string, number>();
  private readonly attached = new Map<string, Attached>();
  private readonly clock: { nowMs(): number };
  private readonly freshMs: number;

  constructor(private readonly o: InspectionFeedOptions) {
    this.clock = o.clock ?? { nowMs: () => Date.now() };
    this.freshMs = o.freshMs ?? WATCH_FRESH_MS;
  }

  /** A watch request for `actorId`: report it for `freshMs` from now; `hello`: report its states at once. */
  watch(actorId: string, hello: boolean): void {
    this.watched.set(actorId, this.clock.nowMs() + this.freshMs);
    // an actor whose watch lapsed while it took no event (parked, or gone from this host) lets go here
    for (const id of [...this.attached.keys()]) if (!this.fresh(id)) this.detach(id);
    const ref = this.o.agents.refOf(actorId);
    const rootId = this.o.agents.rootOf(actorId);
    const was = this.attached.get(actorId);
    // a new incarnation (killed and hosted here again) is a new XState actor
    if (was && was.ref !== ref) this.detach(actorId);
    if (!ref || rootId === undefined) return;
    if (!this.attached.has(actorId)) {
      const sub = ref.system.inspect((e: InspectionEvent) => {
        if (e.type !== '@xstate.snapshot') return;
        if (!this.fresh(actorId)) return this.detach(actorId);
        this.report(actorId, rootId, e.event.type, e.snapshot as AgentSnapshot);
      });
      this.attached.set(actorId, { ref, sub });
    }
    if (hello) this.report(actorId, rootId, null, ref.getSnapshot() as AgentSnapshot);
  }

  /** The actors watched now (lapsed watches are dropped here). */
  watching(): string[] {
    return [...this.watched.keys()].filter((id) => this.fresh(id));
  }

  /** The actors whose XState actor has the feed's observer attached. */
  inspecting(): string[] {
    return [...this.attached.keys()];
  }

  /** Detaches every observer (the host is stopping). */
  close(): void {
    for (const id of [...this.attached.keys()]) this.detach(id);
    this.watched.clear();
  }

  private fresh(actorId: string): boolean {
    const until = this.watched.get(actorId);
    if (until === undefined) return false;
    if (until >= this.clock.nowMs()) return true;
    this.watched.delete(actorId);
    return false;
  }

  private detach(actorId: string): void {
    this.attached.get(actorId)?.sub.unsubscribe();
    this.attached.delete(actorId);
  }

  private report(actorId: string, rootId: string, event: string | null, snapshot: AgentSnapshot): void {
    const r: InspectionReport = {
      v: 1, actorId, rootId, event, machines: snapshot.machines as InspectionReport['machines'], at: this.clock.nowMs(), host: this.o.host,
    };
    this.o.live.publish(inspectSubject(rootId, actorId), JSON.stringify(r));
  }
}
