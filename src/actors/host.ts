import type { Logger } from 'pino';
import type { ActorDirectory } from '../bus/directory.js';
import type { HostIdentity, HostPresence } from '../bus/hosts.js';
import type { Lease, LeaseStore } from '../bus/leases.js';
import { ActorloopError, BusError } from '../protocol/errors.js';
import type { Supervisor } from './supervisor.js';

/** Options of a host. */
export interface HostOptions {
  /** This host's name in leases (unique per process: a restarted host is a new holder). */
  name: string;
  supervisor: Supervisor;
  leases: LeaseStore;
  directory: ActorDirectory;
  logger: Logger;
  clock?: { nowMs(): number };
  /** How long a drain waits for running tools to reach a recordable end. */
  drainToolsMs?: number;
  /** Where this host announces itself (every pass) so commands hand it their work; absent: silent. */
  presence?: { store: HostPresence; identity: HostIdentity };
}

/** Directory statuses of actors that have work a host should run. */
const NEEDS_HOST = new Set(['running', 'waiting']);

/**
 * A long-running host (design §7): claims a lease for every actor that needs a host — mail in
 * its inbox, or a lease that expired with its holder — rehydrates it with the lease revision as
 * its epoch, renews its leases every TTL/3 by revision CAS, and stops an actor at once when its
 * lease is lost (another host took it: the zombie's next append is refused by the log's
 * sequence check anyway, but it must not start an effect before that). On `drain` it stops
 * claiming, lets running tools reach a recordable end, stops its actors (an open model request
 * is abandoned uncommitted: the next host closes it as interrupted) and releases its leases.
 */
export class Host {
  private readonly held = new Map<string, Lease>();
  private readonly claiming = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private draining = false;
  private readonly clock: { nowMs(): number };

  constructor(private readonly opts: HostOptions) {
    this.clock = opts.clock ?? { nowMs: () => Date.now() };
  }

  /** Actor IDs this host holds a lease for. */
  actors(): string[] {
    return [...this.held.keys()];
  }

  /**
   * Starts claiming: mail for an actor nobody hosts claims it; a periodic pass renews, announces
   * this host and takes over. Announced only once mail is listened for: a command that sees the
   * record may hand work over at once.
   */
  async start(): Promise<void> {
    await this.opts.supervisor.listenForMail((actorId) => void this.claim(actorId, 'mail'));
    await this.announce();
    await this.tick();
    const every = Math.max(200, Math.floor(this.opts.leases.ttlMs / 3));
    this.timer = setInterval(() => void this.tick(), every);
  }

  /** Puts this host's presence record again (it lapses after the lease TTL unless renewed). */
  private async announce(): Promise<void> {
    const p = this.opts.presence;
    if (!p || this.draining) return;
    await p.store.announce(p.identity, this.clock.nowMs()).catch((err: unknown) => {
      this.opts.logger.warn({ err }, 'host presence not announced; retrying at the next pass');
    });
  }

  /** One pass: renew what this host holds, announce it, then take actors whose lease is gone and that have work. */
  private async tick(): Promise<void> {
    if (this.draining) return;
    const now = this.clock.nowMs();
    for (const [actorId, lease] of [...this.held]) {
      try {
        this.held.set(actorId, await this.opts.leases.renew(lease, now));
      } catch (err) {
        if (err instanceof BusError && err.code === 'bus.lease_lost') this.lost(actorId, err);
        else this.opts.logger.warn({ err, actorId }, 'lease renewal failed; retrying at the next pass');
      }
    }
    await this.announce();
    let entries;
    try {
      entries = await this.opts.directory.list();
    } catch (err) {
      this.opts.logger.warn({ err }, 'directory unreadable; retrying at the next pass');
      return;
    }
    const live = new Set((await this.opts.leases.list(now).catch(() => [])).map((l) => l.actorId));
    for (const e of entries) {
      if (!NEEDS_HOST.has(e.status) || this.held.has(e.actorId) || live.has(e.actorId)) continue;
      await this.claim(e.actorId, 'lease expired');
    }
  }

  /** Takes the actor's lease and hosts it; does nothing when another host holds a live lease. */
  async claim(actorId: string, why: string): Promise<boolean> {
    if (this.draining || this.held.has(actorId) || this.claiming.has(actorId)) return false;
    this.claiming.add(actorId);
    try {
      const lease = await this.opts.leases.take(actorId, this.opts.name, this.clock.nowMs());
      if (!lease) return false;
      this.held.set(actorId, lease);
      try {
        await this.opts.supervisor.hydrate(actorId, undefined, { epoch: lease.epoch });
      } catch (err) {
        this.opts.logger.error({ err, actorId }, 'could not host the actor; releasing its lease');
        this.held.delete(actorId);
        await this.opts.leases.release(lease).catch(() => {});
        return false;
      }
      this.opts.logger.info({ actorId, epoch: lease.epoch, why }, 'hosting actor');
      return true;
    } catch (err) {
      this.opts.logger.warn({ err, actorId }, 'could not take the lease');
      return false;
    } finally {
      this.claiming.delete(actorId);
    }
  }

  /** The lease moved to another host: stop the actor now, before it starts another effect. */
  private lost(actorId: string, cause: unknown): void {
    this.held.delete(actorId);
    this.opts.logger.error({ actorId }, 'lease lost to another host; stopping the actor here');
    this.opts.supervisor.evict(actorId, new ActorloopError('actor.lease_lost', `the lease of ${actorId} moved to another host`, { cause }));
  }

  /**
   * Drains (SIGTERM): withdraws its presence (commands stop handing it work), stops claiming and
   * renewing, waits (bounded) for running tools to reach a recordable end, stops every actor
   * without closing anything, and releases the leases.
   */
  async drain(): Promise<void> {
    this.draining = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const p = this.opts.presence;
    await p?.store.withdraw(p.identity.name).catch((err: unknown) => {
      this.opts.logger.warn({ err }, 'host presence not withdrawn; it lapses after the lease TTL');
    });
    await this.opts.supervisor.quiesceTools(this.opts.drainToolsMs ?? 30_000);
    await this.opts.supervisor.stop(`host ${this.opts.name} drained`);
    for (const lease of this.held.values()) await this.opts.leases.release(lease).catch(() => {});
    this.held.clear();
  }
}
