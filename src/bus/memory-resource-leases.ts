import {
  afterTake, DEFAULT_RESOURCE_LEASE_TTL_MS, liveHolders, resourceLeaseKey, type HolderEntry, type ResourceLeaseStore,
} from './resource-lease-port.js';

/** Options of `createMemoryResourceLeases`. */
export interface MemoryResourceLeasesOptions {
  ttlMs?: number;
  /** The store's own clock, standing in for the server's: a record unwritten for `ttlMs` by it is gone (max_age). */
  now?: () => number;
}

/**
 * Resource leases in this process's memory with the KV store's semantics (the same take rule,
 * lapse by the caller's `nowMs` and by the store's clock as by the bucket's max age). For agents
 * of one process and for tests.
 */
export function createMemoryResourceLeases(opts: MemoryResourceLeasesOptions = {}): ResourceLeaseStore {
  const ttlMs = opts.ttlMs ?? DEFAULT_RESOURCE_LEASE_TTL_MS;
  const now = opts.now ?? (() => Date.now());
  const records = new Map<string, { holders: Record<string, HolderEntry>; writtenAtMs: number }>();

  const read = (resource: string): Record<string, HolderEntry> => {
    const key = resourceLeaseKey(resource);
    const r = records.get(key);
    if (r && now() - r.writtenAtMs >= ttlMs) records.delete(key);
    return records.get(key)?.holders ?? {};
  };
  const write = (resource: string, holders: Record<string, HolderEntry>): void => {
    if (Object.keys(holders).length === 0) records.delete(resourceLeaseKey(resource));
    else records.set(resourceLeaseKey(resource), { holders, writtenAtMs: now() });
  };

  return {
    ttlMs,
    async take(resource, holder, mode, nowMs) {
      const next = afterTake(read(resource), holder, mode, nowMs, ttlMs);
      if (!next) return null;
      write(resource, next);
      return { resource, holder, mode, expiresAt: next[holder]!.expiresAt };
    },
    async renew(lease, nowMs) {
      const holders = read(lease.resource);
      if (!holders[lease.holder]) return null;
      const expiresAt = nowMs + ttlMs;
      write(lease.resource, { ...holders, [lease.holder]: { mode: lease.mode, expiresAt } });
      return { ...lease, expiresAt };
    },
    async release(lease) {
      const holders = read(lease.resource);
      if (!holders[lease.holder]) return;
      const { [lease.holder]: _gone, ...rest } = holders;
      write(lease.resource, rest);
    },
    async holdersOf(resource, nowMs) {
      return Object.keys(liveHolders(read(resource), nowMs)).sort();
    },
  };
}
