import { localProcessGone, type HostPresence } from '../bus/hosts.js';
import type { LeaseStore } from '../bus/leases.js';
import type { Projection } from '../store/projection.js';

// A death commits nothing: the log of an actor whose host was SIGKILLed mid-turn still says
// `running` until the next incarnation commits `actor/killed`, a lease TTL or more later. So the
// gateway asks the leases: an actor whose log has a turn open and whose lease holder is gone is
// shown `killed` at once. Cheap by design: one lease read per actor with a turn open, and one
// host record read per distinct holder, per check (a check lives for one read of the tree).

/** The ports a liveness check reads: the `leases` and `hosts` buckets, and a clock. */
export interface LivenessPorts {
  leases: Pick<LeaseStore, 'get'>;
  hosts: Pick<HostPresence, 'known'>;
  nowMs?: () => number;
  /**
   * The deaths already found, kept between checks (one per gateway): actor → the log position it
   * was found dead at. A death stays shown until the log moves past it, also once the next host
   * holds the lease and has not committed its takeover yet (the takeover's first word is the
   * death's `actor/killed`): without it a read in that window says `running` between two
   * `killed`. Absent: each check judges afresh.
   */
  deaths?: Map<string, number>;
}

/** Statuses of a log that say someone is carrying a turn on. */
const CARRIED = new Set(['running', 'waiting', 'recovering']);

/**
 * One liveness check over a read of the directory: `killed(actorId, p, status)` says whether the
 * actor whose log folds to `p` (with the tree's `status`) lost its holder. Holders are looked up
 * once per check.
 */
export class LivenessCheck {
  private readonly holders = new Map<string, Promise<boolean>>();
  private readonly nowMs: number;

  constructor(private readonly ports: LivenessPorts) {
    this.nowMs = (ports.nowMs ?? Date.now)();
  }

  /**
   * True when the log says a turn is open and being carried on (running, waiting, recovering),
   * it was not let go on purpose (`actor/released` last), and no live holder has its lease: the
   * lease is missing or past its expiry, or its holder is dead (a host whose record is stale or
   * names a process of this machine that is gone; a command hosting it in-process, which writes
   * no host record and holds the lease as `hostname:pid`, whose process is gone).
   */
  async killed(actorId: string, p: Projection, status: string): Promise<boolean> {
    const deaths = this.ports.deaths;
    if (!p.openTurn || !CARRIED.has(status) || p.released !== undefined) {
      deaths?.delete(actorId);
      return false;
    }
    if (deaths?.get(actorId) === p.seq) return true;
    deaths?.delete(actorId);
    const dead = await this.holderGone(actorId, status);
    if (dead) deaths?.set(actorId, p.seq);
    return dead;
  }

  /**
   * Who holds the actor's lease now (null: nobody, or only a lapsed lease), whether that holder is
   * alive (the rule `killed` reads), and when the lease lapses unless renewed.
   */
  async holder(actorId: string): Promise<{ host: string; alive: boolean; expiresAt: string } | null> {
    const lease = await this.ports.leases.get(actorId, this.nowMs);
    if (!lease) return null;
    return { host: lease.host, alive: await this.holderAlive(lease.host), expiresAt: new Date(lease.expiresAt).toISOString() };
  }

  private async holderGone(actorId: string, status: string): Promise<boolean> {
    const lease = await this.ports.leases.get(actorId, this.nowMs);
    // no holder at all: a parked turn needs none until a person answers (the answer's mail brings
    // a host); a running one goes on only while someone holds it
    if (!lease) return status !== 'waiting';
    return !(await this.holderAlive(lease.host));
  }

  private holderAlive(holder: string): Promise<boolean> {
    let alive = this.holders.get(holder);
    if (!alive) {
      alive = this.lookUp(holder);
      this.holders.set(holder, alive);
    }
    return alive;
  }

  private async lookUp(holder: string): Promise<boolean> {
    const record = await this.ports.hosts.known(holder);
    if (record) return record.expiresAt > this.nowMs && !localProcessGone(record.hostname, record.pid);
    // no host record: an in-process command (`hostname:pid`) is alive while its process is; any
    // other holder is as alive as its live lease says (it renews it, or it lapses)
    const m = /^(.*):(\d+)$/.exec(holder);
    return m === null || !localProcessGone(m[1]!, Number(m[2]));
  }
}
