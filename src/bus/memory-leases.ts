import { BusError } from '../protocol/errors.js';
import { DEFAULT_LEASE_TTL_MS, LEASE_CODES, type Lease, type LeaseStore } from './lease-port.js';

/** Options of `createMemoryLeaseStore`. */
export interface MemoryLeaseStoreOptions {
  ttlMs?: number;
  /** The store's own clock, standing in for the server's: a key unwritten for `ttlMs` by it is gone (max_age). */
  now?: () => number;
}

interface Key {
  revision: number;
  /** null: released (a delete marker). */
  value: { host: string; expiresAt: number } | null;
  writtenAtMs: number;
}

// Same rule as the KV store: actor IDs are keys verbatim.
const KEY_RE = /^[A-Za-z0-9_-]+$/;

/**
 * Leases in this process's memory, with the KV store's semantics: one revision counter for all
 * keys (the epoch), take by create, renew, take-over and release by CAS on the revision, expiry
 * both by the caller's `nowMs` and by the store's own clock (the bucket's max age).
 */
export function createMemoryLeaseStore(opts: MemoryLeaseStoreOptions = {}): LeaseStore {
  const ttlMs = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
  const now = opts.now ?? (() => Date.now());
  if (!(ttlMs > 0)) throw new BusError(LEASE_CODES.failed, `lease TTL must be positive, got ${ttlMs}`);
  const keys = new Map<string, Key>();
  let revision = 0;

  const read = (actorId: string): Key | null => {
    const k = keys.get(actorId);
    // aged out, as max_age drops a key nobody rewrote
    if (k && now() - k.writtenAtMs >= ttlMs) {
      keys.delete(actorId);
      return null;
    }
    return k ?? null;
  };

  const write = (actorId: string, host: string, nowMs: number, expected: number | null): Lease | null => {
    const current = read(actorId);
    if ((current?.revision ?? null) !== expected) return null;
    const k: Key = { revision: ++revision, value: { host, expiresAt: nowMs + ttlMs }, writtenAtMs: now() };
    keys.set(actorId, k);
    return { actorId, host, epoch: k.revision, expiresAt: k.value!.expiresAt };
  };

  const live = (actorId: string, nowMs: number): Lease | null => {
    const k = read(actorId);
    if (!k?.value || k.value.expiresAt <= nowMs) return null;
    return { actorId, host: k.value.host, epoch: k.revision, expiresAt: k.value.expiresAt };
  };

  return {
    ttlMs,
    async take(actorId, host, nowMs) {
      checkKey(actorId);
      const current = read(actorId);
      if (!current || !current.value) return write(actorId, host, nowMs, current?.revision ?? null);
      if (current.value.expiresAt > nowMs && current.value.host !== host) return null;
      // expired, or this very holder again: a new epoch that fences its earlier incarnation
      return write(actorId, host, nowMs, current.revision);
    },
    async takeFrom(held, host, nowMs) {
      checkKey(held.actorId);
      return write(held.actorId, host, nowMs, held.epoch);
    },
    async renew(lease, nowMs) {
      checkKey(lease.actorId);
      const renewed = write(lease.actorId, lease.host, nowMs, lease.epoch);
      if (renewed) return renewed;
      throw new BusError(LEASE_CODES.lost,
        `the lease of ${lease.actorId} (epoch ${lease.epoch}) was lost: another host took it or it expired`,
        { hint: 'stop hosting the actor; its next append will be refused by the log anyway' });
    },
    async release(lease) {
      checkKey(lease.actorId);
      // CAS: releasing must never delete a lease another host has taken since
      if (read(lease.actorId)?.revision !== lease.epoch) return;
      keys.set(lease.actorId, { revision: ++revision, value: null, writtenAtMs: now() });
    },
    async get(actorId, nowMs) {
      checkKey(actorId);
      return live(actorId, nowMs);
    },
    async list(nowMs) {
      return [...keys.keys()].sort().map((k) => live(k, nowMs)).filter((l): l is Lease => l !== null);
    },
  };
}

function checkKey(actorId: string): void {
  if (!KEY_RE.test(actorId)) {
    throw new BusError(LEASE_CODES.invalidKey, `actor ID ${JSON.stringify(actorId)} cannot be a lease key`);
  }
}
