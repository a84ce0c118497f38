import { NEEDS_HOST, type ActorDirectory } from '../../bus/directory.js';
import type { TreeSlotStore } from '../../bus/tree-slot-port.js';
import type { InboxPort } from '../../bus/inbox-port.js';
import type { SubagentLimits } from '../../protocol/subagents.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { LogReader } from '../../store/log-port.js';
import type { ChildEntry, SubagentPort } from '../agent/subagent-port.js';

/** What tree hosting needs of the supervisor it works for: whether it hosts an actor, and how to host one. */
export interface TreeHost {
  hosts(actorId: string): boolean;
  /**
   * Hands a message that its inbox already accepted to the actor, when it is hosted here, as the
   * consumer would deliver it (the consumer's copy is then acked as a duplicate); null when the
   * actor is not hosted here.
   */
  handOver(msg: InboxMessage): Promise<void> | null;
  readonly isStopped: boolean;
  create(entry: ChildEntry, opts: { epoch?: number }): Promise<unknown>;
  hydrate(actorId: string, onHydrated: undefined, opts: { epoch?: number }): Promise<unknown>;
}

/** The rest of what tree hosting works with. */
export interface TreeHostingDeps {
  directory: ActorDirectory;
  inbox: InboxPort;
  reader: LogReader;
  clock: { nowMs(): number };
  limits: SubagentLimits;
  /** The places of trees, shared by every host that may run one of the tree's agents. */
  slots: TreeSlotStore;
  worktrees?: Pick<SubagentPort, 'worktree' | 'worktreeDiff' | 'worktreeProblem'>;
}

/**
 * A supervisor's side of its agents' trees (design §6b): the children they spawn are hosted here
 * when this process may take their leases (the adopter says), each once, and `port` is what every
 * agent hosted here reaches its tree through. One per supervisor, shared by its agents.
 */
export class TreeHosting {
  /** Takes the lease of a child this process creates: its epoch, or null when another process holds it (absent: no leases). */
  private adopter: ((actorId: string) => Promise<number | null>) | null = null;
  /** Children being hosted here right now, so a spawn retried at once hosts one. */
  private readonly adopting = new Map<string, Promise<void>>();
  /** The port every agent of this supervisor shares. */
  readonly port: SubagentPort;

  constructor(private readonly supervisor: TreeHost, private readonly deps: TreeHostingDeps) {
    this.port = this.makePort();
  }

  /** Who takes a child's lease: an epoch to host it here, null when another process holds it. */
  setAdopter(adopter: (actorId: string) => Promise<number | null>): void {
    this.adopter = adopter;
  }

  /**
   * Hosts an agent of a tree here, once: a new one with an empty log (its directory entry
   * written), one the directory already has by rehydrating it — unless another process holds its
   * lease, when only its entry is made sure of.
   */
  host(entry: ChildEntry, opts: { fresh?: boolean; beside?: () => Promise<unknown> } = {}): Promise<void> {
    const id = entry.actorId;
    if (this.supervisor.hosts(id) || this.supervisor.isStopped) return Promise.resolve();
    let p = this.adopting.get(id);
    if (!p) {
      p = (async () => {
        // a child whose request was committed just now cannot exist yet: nothing to look up
        const known = opts.fresh ? undefined : await this.deps.directory.get(id);
        const epoch = this.adopter ? await this.adopter(id) : undefined;
        if (epoch === null || this.supervisor.hosts(id) || this.supervisor.isStopped) {
          if (!known) {
            const now = new Date(this.deps.clock.nowMs()).toISOString();
            await this.deps.directory.put({ ...entry, status: 'running', createdAt: now, updatedAt: now });
          }
          return;
        }
        const at = epoch !== undefined ? { epoch } : {};
        // hosted here from now on (its lease is this process's): what goes `beside` its hosting
        // (its task's publish) needs nothing of it, and no other host will take its mail
        const both = await Promise.allSettled([
          known ? this.supervisor.hydrate(id, undefined, at) : this.supervisor.create(entry, at),
          opts.beside?.(),
        ]);
        for (const r of both) if (r.status === 'rejected') throw r.reason;
      })().finally(() => this.adopting.delete(id));
      this.adopting.set(id, p);
    }
    return p;
  }

  /**
   * Gives back the places of a full tree whose children are over by the directory: a place is
   * given back after its child's turn ends, before its notice is marked sent, so a crash in
   * between gives it back again; only a place whose child never came to be (a spawn that died
   * before its request was committed) or whose release was lost is left, and this finds it.
   * Returns how many were freed.
   */
  private async freeStale(rootId: string, holders: Record<string, { atMs: number }>): Promise<number> {
    const now = this.deps.clock.nowMs();
    let freed = 0;
    for (const [childId, h] of Object.entries(holders)) {
      const entry = await this.deps.directory.get(childId);
      const over = entry ? !NEEDS_HOST.has(entry.status) && now - h.atMs > STALE_ENDED_MS : now - h.atMs > STALE_UNBORN_MS;
      if (!over) continue;
      await this.deps.slots.release(rootId, childId, null);
      freed += 1;
    }
    return freed;
  }

  /** Hands an accepted message to its recipient when it is hosted here; a failure leaves it to the consumer. */
  private handOver(msg: InboxMessage): void {
    this.supervisor.handOver(msg)?.catch(() => {});
  }

  private makePort(): SubagentPort {
    const { inbox, reader, clock, limits, slots, worktrees } = this.deps;
    return {
      limits,
      spawn: async (entry, task, opts) => {
        // the task is published beside the child's creation once this process hosts it (one round
        // trip, not two), after its entry when another process does (its host looks the entry up
        // when the mail comes); the child acts on it only once the inbox accepted it
        let published: Promise<unknown> | null = null;
        await this.host(entry, { ...opts, beside: () => (published = inbox.publish(task, 'actor')) });
        await (published ?? inbox.publish(task, 'actor'));
        // accepted: a child hosted here takes its task at once, not when its consumer delivers it
        this.handOver(task);
      },
      send: async (msg) => {
        await inbox.publish(msg, 'actor');
        this.handOver(msg);
      },
      takeSlot: async (rootId, childId, token, max) => {
        const first = await slots.take(rootId, childId, token, max, clock.nowMs());
        if (first.taken) return first;
        // full: a place whose child is over (its release was lost in a crash) is given back, and the take tried once more
        if ((await this.freeStale(rootId, first.holders)) === 0) return { taken: false, running: Object.keys(first.holders).length };
        const again = await slots.take(rootId, childId, token, max, clock.nowMs());
        return again.taken ? again : { taken: false, running: Object.keys(again.holders).length };
      },
      releaseSlot: (rootId, childId, tokens) => slots.release(rootId, childId, tokens),
      firstTurn: async (rootId, childId, signal) => {
        for await (const { event } of reader.follow(rootId, childId, { afterSeq: 0, signal })) {
          if (event.type === 'turn/start') return;
        }
      },
      ...(worktrees ?? {}),
    };
  }
}

/** How long a place of a child the directory says is over is kept: its follow-up's mail may not have arrived yet. */
const STALE_ENDED_MS = 60_000;
/** How long a place of a child the directory does not know is kept: its spawn may be recovering on another host. */
const STALE_UNBORN_MS = 600_000;
