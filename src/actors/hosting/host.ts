import type { Logger } from 'pino';
import { NEEDS_HOST, type ActorDirectory } from '../../bus/directory.js';
import { DirectoryStatuses } from './directory-status.js';
import type { HostIdentity, HostPresence } from '../../bus/hosts.js';
import type { Lease, LeaseStore } from '../../bus/leases.js';
import { ActorloopError, BusError } from '../../protocol/errors.js';
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

/** Lease renewals one host has in flight at once. */
const RENEWALS_IN_FLIGHT = 64;
/**
 * Actors one host claims and rehydrates at once. A claim is a dozen round trips and little CPU:
 * at 16 a host taking over 1,000 agents sat idle a third of the time; at 128 it is busy.
 */
export const CLAIMS_IN_FLIGHT = 128;

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
  private renewing: Promise<void> | null = null;
  private scanning: Promise<void> | null = null;
  private claimsRunning = 0;
  private readonly statuses: DirectoryStatuses;
  private readonly claimQueue: Array<() => void> = [];
  private draining = false;
  private readonly clock: { nowMs(): number };

  constructor(private readonly opts: HostOptions) {
    this.clock = opts.clock ?? { nowMs: () => Date.now() };
    this.statuses = new DirectoryStatuses(opts.directory, opts.logger, this.clock);
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
    // a child an agent here spawns runs here, under a lease this host renews like the others
    this.opts.supervisor.setAdopter?.(async (actorId) => {
      if (this.draining || this.held.has(actorId)) return null;
      const lease = await this.opts.leases.take(actorId, this.opts.name, this.clock.nowMs());
      if (!lease) return null;
      this.held.set(actorId, lease);
      return lease.epoch;
    });
    // a job that is over gives its lease back: a host does not renew one for every job it ran
    this.opts.supervisor.setReleaser?.((actorId) => this.release(actorId));
    await this.opts.supervisor.listenForMail((actorId) => void this.claim(actorId, 'mail'));
    await this.announce();
    await this.tick();
    const every = Math.max(200, Math.floor(this.opts.leases.ttlMs / 3));
    this.timer = setInterval(() => void this.tick(), every);
  }

  /** Keeps the directory's status of a hosted actor in step with its log (`DirectoryStatuses`). */
  committed(actorId: string, events: Array<{ type: string; data?: unknown }>): void {
    this.statuses.committed(actorId, events);
  }

  /** Mail the supervisor is about to hand an actor: one that starts a turn is `running` in the directory first (`DirectoryStatuses.mailArrives`). */
  mailArrives(actorId: string, kind: string): Promise<void> {
    return this.statuses.mailArrives(actorId, kind);
  }

  /** Puts this host's presence record again (it lapses after the lease TTL unless renewed). */
  private async announce(): Promise<void> {
    const p = this.opts.presence;
    if (!p || this.draining) return;
    await p.store.announce(p.identity, this.clock.nowMs()).catch((err: unknown) => {
      this.opts.logger.warn({ err }, 'host presence not announced; retrying at the next pass');
    });
  }

  /**
   * One pass: renew what this host holds (and announce it), and take actors whose lease is gone and that have work.
   * The two run apart, and neither starts again while its previous pass still runs: two renewal
   * passes at once CAS the same lease twice and take the loser for lost (a pass over 1,000 leases
   * outlasted TTL/3), and a long claim pass (a takeover) must not hold back the renewals of the
   * leases it has already taken.
   */
  private tick(): Promise<void> {
    if (this.draining) return Promise.resolve();
    this.renewing ??= this.renewAll().finally(() => (this.renewing = null));
    this.scanning ??= this.claimLapsed().finally(() => (this.scanning = null));
    return Promise.all([this.renewing, this.scanning]).then(() => {});
  }

  // Renewals are independent per actor: a bounded number run at once, since one round trip
  // after another took a pass over 1,000 leases past TTL/3.
  private async renewAll(): Promise<void> {
    await inParallel([...this.held.keys()], RENEWALS_IN_FLIGHT, async (actorId) => {
      const lease = this.held.get(actorId);
      if (!lease || this.draining) return;
      try {
        const renewed = await this.opts.leases.renew(lease, this.clock.nowMs());
        // lost and taken again meanwhile: the newer lease stays
        if (this.held.get(actorId) === lease) this.held.set(actorId, renewed);
      } catch (err) {
        if (err instanceof BusError && err.code === 'bus.lease_lost') {
          if (this.held.get(actorId) === lease) this.lost(actorId, err);
        } else if (err instanceof BusError && err.code === 'bus.lease_unknown') {
          // lost until a read says otherwise: the actor stops here, and the next claim pass reads
          // the lease and takes it again (a new epoch, fencing this incarnation) if it is still free or ours
          if (this.held.get(actorId) === lease) this.lost(actorId, err, 'lease renewal unanswered; stopping the actor here until the lease is read again');
        } else this.opts.logger.warn({ err, actorId }, 'lease renewal failed; retrying at the next pass');
      }
    });
    await this.announce();
  }

  // No listing of the leases first: take() reads each one and leaves a live lease alone, while a
  // key listing of the bucket waits out a 30 s consumer heartbeat when a key changes under it
  // (every renewal does) — and one pass at a time, a wait like that left the host blind.
  private async claimLapsed(): Promise<void> {
    for (;;) {
      let entries;
      try {
        entries = await this.opts.directory.list();
      } catch (err) {
        this.opts.logger.warn({ err }, 'directory unreadable; retrying at the next pass');
        return;
      }
      const wanted = entries.filter((e) => NEEDS_HOST.has(e.status) && !this.held.has(e.actorId));
      const taken = await Promise.all(wanted.map((e) => this.claim(e.actorId, 'lease expired')));
      // a dead host's leases lapse over its last renewal pass: after taking some, look again at once
      if (this.draining || !taken.includes(true)) return;
    }
  }

  /** Takes the actor's lease and hosts it; does nothing when another host holds a live lease. */
  async claim(actorId: string, why: string): Promise<boolean> {
    if (this.draining || this.held.has(actorId) || this.claiming.has(actorId)) return false;
    this.claiming.add(actorId);
    // A few at a time: a thousand at once (mail for each, or a takeover) starve the event loop,
    // and the renewals of the leases already taken then miss their TTL.
    if (this.claimsRunning >= CLAIMS_IN_FLIGHT) await new Promise<void>((resolve) => this.claimQueue.push(resolve));
    this.claimsRunning += 1;
    try {
      if (this.draining) return false;
      const lease = await this.opts.leases.take(actorId, this.opts.name, this.clock.nowMs());
      if (!lease) return false;
      this.held.set(actorId, lease);
      try {
        await this.opts.supervisor.hostClaimed(actorId, lease.epoch);
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
      this.claimsRunning -= 1;
      this.claimQueue.shift()?.();
    }
  }

  /** Gives one actor's lease back (the supervisor is done with it). */
  private async release(actorId: string): Promise<void> {
    const lease = this.held.get(actorId);
    if (!lease) return;
    this.held.delete(actorId);
    await this.opts.leases.release(lease);
  }

  /** The lease moved to another host: stop the actor now, before it starts another effect. */
  private lost(actorId: string, cause: unknown, why = 'lease lost to another host; stopping the actor here'): void {
    this.held.delete(actorId);
    this.opts.logger.error({ actorId }, why);
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
    // a renewal landing after the release would hold the lease for another TTL
    await Promise.allSettled([this.renewing, this.scanning]);
    const p = this.opts.presence;
    await p?.store.withdraw(p.identity.name).catch((err: unknown) => {
      this.opts.logger.warn({ err }, 'host presence not withdrawn; it lapses after the lease TTL');
    });
    await this.opts.supervisor.quiesceTools(this.opts.drainToolsMs ?? 30_000);
    await this.opts.supervisor.stop(`host ${this.opts.name} drained`);
    await this.statuses.settled();
    for (const lease of this.held.values()) await this.opts.leases.release(lease).catch(() => {});
    this.held.clear();
  }
}

/** Runs `fn` (which handles its own errors) over `items` with at most `limit` calls in flight. */
async function inParallel<T>(items: T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
