import type { Logger } from 'pino';
import type { Lease, LeaseStore } from '../../bus/leases.js';
import { hostname } from 'node:os';
import { localProcessGone } from '../../bus/hosts.js';
import { BusError } from '../../protocol/errors.js';

/** The holder name of a command or host started without `--name`: `<hostname>:<pid>`. */
export function localHolder(pid: number = process.pid): string {
  return `${hostname()}:${pid}`;
}

/** True when `holder` names a process of this machine that is gone (signal 0 finds no such process). */
export function deadLocalHolder(holder: string): boolean {
  const m = /^(.*):(\d+)$/.exec(holder);
  return m !== null && localProcessGone(m[1]!, Number(m[2]));
}

/**
 * Holds the leases of the agents one command hosts in-process (`run`, `resume`, `approve`): a
 * host process must not claim an agent that a command is running, and the command's epoch is
 * its lease revision like a host's. Renews every TTL/3; a lost lease, or a renewal neither written
 * nor read back (`bus.lease_unknown`), calls `onLost`.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, Lease>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly leases: LeaseStore,
    private readonly holder: string,
    private readonly logger: Logger,
    private readonly onLost: (actorId: string, err: unknown) => void = () => {},
  ) {}

  /**
   * Takes an agent's lease; null when another holder has a live one. A lease held by a process
   * of this machine that no longer exists (a `run` killed mid-turn) is taken at once rather than
   * after its TTL: `resume` right after a crash must not wait for the dead process's lease.
   */
  async take(actorId: string): Promise<Lease | null> {
    let lease = await this.leases.take(actorId, this.holder, Date.now());
    if (!lease) {
      const held = await this.leases.get(actorId, Date.now());
      if (held && deadLocalHolder(held.host)) lease = await this.leases.takeFrom(held, this.holder, Date.now());
    }
    if (!lease) return null;
    this.held.set(actorId, lease);
    this.timer ??= setInterval(() => void this.renewAll(), Math.max(200, Math.floor(this.leases.ttlMs / 3)));
    this.timer.unref?.();
    return lease;
  }

  /** The live holder of an agent's lease, or null. */
  holderOf(actorId: string): Promise<Lease | null> {
    return this.leases.get(actorId, Date.now());
  }

  private async renewAll(): Promise<void> {
    for (const [actorId, lease] of [...this.held]) {
      try {
        this.held.set(actorId, await this.leases.renew(lease, Date.now()));
      } catch (err) {
        if (err instanceof BusError && (err.code === 'bus.lease_lost' || err.code === 'bus.lease_unknown')) {
          // unanswered (an election, a dead node): lost until a read says otherwise, as a host
          // takes it; a command has no claim pass to read it again, so it stops here and
          // `resume` (which reads the lease first) carries the agent on
          this.held.delete(actorId);
          this.logger.error({ actorId, code: err.code }, err.code === 'bus.lease_lost'
            ? 'the lease moved to another holder; stopping here'
            : 'lease renewal unanswered; stopping here until the lease is read again (resume carries it on)');
          this.onLost(actorId, err);
        } else this.logger.warn({ err, actorId }, 'lease renewal failed; retrying');
      }
    }
  }

  /** Releases one agent's lease (a host is to take it); a lease not held here is no error. */
  async release(actorId: string): Promise<void> {
    const lease = this.held.get(actorId);
    if (!lease) return;
    this.held.delete(actorId);
    await this.leases.release(lease);
  }

  /** Releases every lease (the command is done with its agents). */
  async releaseAll(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const lease of this.held.values()) await this.leases.release(lease).catch(() => {});
    this.held.clear();
  }
}
