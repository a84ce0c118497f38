import { createHash } from 'node:crypto';

// Resource leases (design §6b, §8): calls of different agents of one tree whose resource keys
// conflict (two writes of one file in a shared workspace) run one at a time, by a lease per
// resource key. `createKvResourceLeases` (KV `resource_leases`) and `createMemoryResourceLeases`
// implement the port.

/** The default TTL of a resource lease: a holder that crashed frees its resources after this long. */
export const DEFAULT_RESOURCE_LEASE_TTL_MS = 30_000;

/** Stable bus error codes of resource leases. */
export const RESOURCE_LEASE_CODES = {
  failed: 'bus.resource_lease_failed',
} as const;

/** A lease held on one resource key. */
export interface ResourceLease {
  /** The resource key as the tool named it (`path:/abs/file`, `process:/abs/workspace`). */
  resource: string;
  /** Who holds it: the actor and the call (`<actorId>/<callId>`). */
  holder: string;
  /** The revision of its last write: renewals and the release are compare-and-set on it. */
  revision: number;
  /** Milliseconds (the writer's `nowMs` clock) after which others may take it. */
  expiresAt: number;
}

/**
 * Who may touch a resource now, across every agent of every host. Taking is a compare-and-set,
 * so of any number of calls racing for a free or lapsed lease exactly one gets it; the holder
 * renews it while its call runs and releases it after the call's result.
 */
export interface ResourceLeaseStore {
  /** Takes the lease when it is free, lapsed, or already this holder's (a call run again after a crash); null when another holds it. */
  take(resource: string, holder: string, nowMs: number): Promise<ResourceLease | null>;
  /** Renews by CAS on the revision; null when the lease was lost (lapsed and taken by another). */
  renew(lease: ResourceLease, nowMs: number): Promise<ResourceLease | null>;
  /** Releases (delete with CAS) so a waiting call may take it at once; a lease lost meanwhile is not an error. */
  release(lease: ResourceLease): Promise<void>;
  /** The live holder of a resource, or null. */
  holderOf(resource: string, nowMs: number): Promise<string | null>;
  /** How long a take or renewal lasts. */
  readonly ttlMs: number;
}

/**
 * The store key of a resource: a hash, since resource keys hold paths (slashes, dots, any
 * character) and KV keys may not; the resource itself is kept in the value.
 */
export function resourceLeaseKey(resource: string): string {
  return `r_${createHash('sha256').update(resource).digest('hex').slice(0, 40)}`;
}
