import { DEFAULT_RESOURCE_LEASE_TTL_MS, resourceLeaseKey, type ResourceLease, type ResourceLeaseStore } from './resource-lease-port.js';

/** Options of `createMemoryResourceLeases`. */
export interface MemoryResourceLeasesOptions {
  ttlMs?: number;
  /** The store's own clock, standing in for the server's: a key unwritten for `ttlMs` by it is gone (max_age). */
  now?: () => number;
}

/**
 * Resource leases in this process's memory with the KV store's semantics: one revision counter,
 * take and renew by CAS on the revision, release by CAS, expiry by the caller's `nowMs` and by
 * the store's clock (the bucket's max age). For agents of one process and for tests.
 */
export function createMemoryResourceLeases(opts: MemoryResourceLeasesOptions = {}): ResourceLeaseStore {
  const ttlMs = opts.ttlMs ?? DEFAULT_RESOURCE_LEASE_TTL_MS;
  const now = opts.now ?? (() => Date.now());
  const keys = new Map<string, { revision: number; holder: string; resource: string; expiresAt: number; writtenAtMs: number }>();
  let revision = 0;

  const read = (key: string) => {
    const k = keys.get(key);
    if (k && now() - k.writtenAtMs >= ttlMs) {
      keys.delete(key);
      return undefined;
    }
    return k;
  };
  const write = (resource: string, holder: string, nowMs: number): ResourceLease => {
    const k = { revision: ++revision, holder, resource, expiresAt: nowMs + ttlMs, writtenAtMs: now() };
    keys.set(resourceLeaseKey(resource), k);
    return { resource, holder, revision: k.revision, expiresAt: k.expiresAt };
  };

  return {
    ttlMs,
    async take(resource, holder, nowMs) {
      const k = read(resourceLeaseKey(resource));
      if (k && k.expiresAt > nowMs && k.holder !== holder) return null;
      return write(resource, holder, nowMs);
    },
    async renew(lease, nowMs) {
      const k = read(resourceLeaseKey(lease.resource));
      if (k?.revision !== lease.revision) return null;
      return write(lease.resource, lease.holder, nowMs);
    },
    async release(lease) {
      const key = resourceLeaseKey(lease.resource);
      if (read(key)?.revision === lease.revision) keys.delete(key);
    },
    async holderOf(resource, nowMs) {
      const k = read(resourceLeaseKey(resource));
      return k && k.expiresAt > nowMs ? k.holder : null;
    },
  };
}
