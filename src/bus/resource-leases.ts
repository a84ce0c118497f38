import type { Kvm, KV } from '@nats-io/kv';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { createHolderRecords, openOnce } from './holder-record.js';
import { BUCKETS } from './subjects.js';
import { ensureTtlBucket } from './ttl-bucket.js';
import {
  afterTake, DEFAULT_RESOURCE_LEASE_TTL_MS, liveHolders, RESOURCE_LEASE_CODES, resourceLeaseKey,
  type HolderEntry, type ResourceLease, type ResourceLeaseStore,
} from './resource-lease-port.js';

// Resource leases on KV `resource_leases`, one record per resource holding its holders, done as
// the actor leases of leases.ts are on nats-server 2.9: no per-key TTL, so the bucket's max age is
// the lease TTL (a record nobody rewrites vanishes) and each holder's `expiresAt` is compared with
// the caller's clock (max_age is swept lazily, and shared holders keep a record alive for each
// other). Every write is a compare-and-set on the record's last revision: a take that loses a race
// reads again and decides again, so of incompatible takers exactly one lands.

export {
  DEFAULT_RESOURCE_LEASE_TTL_MS, RESOURCE_LEASE_CODES, type ResourceLease, type ResourceLeaseMode, type ResourceLeaseStore,
} from './resource-lease-port.js';

/** Creates (or opens) the `resource_leases` bucket with max age = `ttlMs`. */
export async function ensureResourceLeaseBucket(
  kvm: Kvm, ttlMs: number = DEFAULT_RESOURCE_LEASE_TTL_MS, logger: Logger = pino({ level: 'silent' }),
): Promise<KV> {
  return ensureTtlBucket(kvm, BUCKETS.resourceLeases, ttlMs, RESOURCE_LEASE_CODES.failed, logger);
}

/** Options of `createKvResourceLeases`. */
export interface KvResourceLeasesOptions {
  /** The bucket, or how to open it on first use (a host's supervisor is made before any tree exists). */
  kv: KV | (() => Promise<KV>);
  /** Lease TTL; should equal the bucket's max age. */
  ttlMs?: number;
  logger?: Logger;
}

/** Resource leases over the `resource_leases` bucket. */
export function createKvResourceLeases(opts: KvResourceLeasesOptions): ResourceLeaseStore {
  const ttlMs = opts.ttlMs ?? DEFAULT_RESOURCE_LEASE_TTL_MS;
  const logger = opts.logger ?? pino({ level: 'silent' });
  const given = opts.kv;
  const { read, change } = createHolderRecords<HolderEntry>({
    bucket: typeof given === 'function' ? openOnce(given) : () => Promise.resolve(given),
    holder: z.object({ mode: z.enum(['exclusive', 'shared']), expiresAt: z.number() }),
    key: resourceLeaseKey,
    fields: (resource) => ({ resource }),
    describe: (resource) => `the resource lease of ${resource}`,
    code: RESOURCE_LEASE_CODES.failed,
    unreadable: (resource, revision) => {
      // a record this code cannot read may be a newer runtime's: held, until max_age drops it
      logger.warn({ resource, revision }, 'unreadable resource lease record');
      return { '(unreadable)': { mode: 'exclusive', expiresAt: Number.MAX_SAFE_INTEGER } };
    },
  });

  return {
    ttlMs,
    take(resource, holder, mode, nowMs) {
      return change(resource, (holders) => {
        const next = afterTake(holders, holder, mode, nowMs, ttlMs);
        return next ? { holders: next, result: { resource, holder, mode, expiresAt: next[holder]!.expiresAt } } : { holders: null, result: null };
      });
    },
    renew(lease, nowMs) {
      return change(resource(lease), (holders) => {
        if (!holders[lease.holder]) return { holders: null, result: null };
        const expiresAt = nowMs + ttlMs;
        return { holders: { ...holders, [lease.holder]: { mode: lease.mode, expiresAt } }, result: { ...lease, expiresAt } };
      });
    },
    release(lease) {
      return change(resource(lease), (holders) => {
        if (!holders[lease.holder]) return { holders: null, result: undefined };
        const { [lease.holder]: _gone, ...rest } = holders;
        return { holders: rest, result: undefined };
      });
    },
    async holdersOf(r, nowMs) {
      return Object.keys(liveHolders((await read(r)).holders, nowMs)).sort();
    },
  };
}

function resource(lease: ResourceLease): string {
  return lease.resource;
}
