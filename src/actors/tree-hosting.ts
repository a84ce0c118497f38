import type { ActorDirectory } from '../bus/directory.js';
import type { InboxPort } from '../bus/inbox-port.js';
import type { SubagentLimits } from '../protocol/subagents.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { LogReader } from '../store/log-port.js';
import type { ChildEntry, SubagentPort } from './subagent-port.js';

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
  private readonly treeCounts = new Map<string, { atMs: number; count: Promise<number> }>();
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
  host(entry: ChildEntry, opts: { fresh?: boolean } = {}): Promise<void> {
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
        if (known) await this.supervisor.hydrate(id, undefined, at);
        else await this.supervisor.create(entry, at);
      })().finally(() => this.adopting.delete(id));
      this.adopting.set(id, p);
    }
    return p;
  }

  /** Hands an accepted message to its recipient when it is hosted here; a failure leaves it to the consumer. */
  private handOver(msg: InboxMessage): void {
    this.supervisor.handOver(msg)?.catch(() => {});
  }

  private makePort(): SubagentPort {
    const { directory, inbox, reader, clock, limits, worktrees } = this.deps;
    return {
      limits,
      spawn: async (entry, task, opts) => {
        await this.host(entry, opts);
        await inbox.publish(task, 'actor');
        // accepted: a child hosted here takes its task at once, not when its consumer delivers it
        this.handOver(task);
      },
      send: async (msg) => {
        await inbox.publish(msg, 'actor');
        this.handOver(msg);
      },
      treeRunning: (rootId, parentId) => {
        // One listing of the directory serves the spawns of a moment (a fan-out asks for each
        // child). The asking parent's own children are left out: its log counts them exactly.
        const key = `${rootId}\u0000${parentId}`;
        const now = clock.nowMs();
        const cached = this.treeCounts.get(key);
        if (cached && now - cached.atMs < 1_000) return cached.count;
        const count = directory.list().then((all) =>
          all.filter((e) => e.rootId === rootId && e.parentId !== parentId && e.kind === 'subagent' && (e.status === 'running' || e.status === 'waiting')).length);
        this.treeCounts.set(key, { atMs: now, count });
        count.catch(() => this.treeCounts.delete(key));
        return count;
      },
      firstTurn: async (rootId, childId, signal) => {
        for await (const { event } of reader.follow(rootId, childId, { afterSeq: 0, signal })) {
          if (event.type === 'turn/start') return;
        }
      },
      ...(worktrees ?? {}),
    };
  }
}
