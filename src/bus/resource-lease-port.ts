import { createHash } from 'node:crypto';

// Resource leases (design §6b, §8): calls of different agents of one tree whose resource keys
// conflict run one at a time, by a lease per resource key. A lease is exclusive (a write of a
// file, a process in a workspace) or shared (a file write holds its workspace shared, so a process
// there, which may touch any file, waits for it, while writes of two files go on together).
// `createKvResourceLeases` (KV `resource_leases`) and `createMemoryResourceLeases` implement it.

/** The default TTL of a resource lease: a holder that crashed frees its resources after this long. */
export const DEFAULT_RESOURCE_LEASE_TTL_MS = 30_000;

/** Stable bus error codes of resource leases. */
export const RESOURCE_LEASE_CODES = {
  failed: 'bus.resource_lease_failed',
} as const;

/** How a lease is held: alone, or beside other shared holders. */
export type ResourceLeaseMode = 'exclusive' | 'shared';

/** A lease held on one resource key. */
export interface ResourceLease {
  /** The resource key as the runtime named it (`path:/abs/file`, `process:/abs/workspace`). */
  resource: string;
  /** Who holds it: the actor and the call (`<actorId>/<callId>`). */
  holder: string;
  mode: ResourceLeaseMode;
  /** Milliseconds (the writer's `nowMs` clock) after which others may take it. */
  expiresAt: number;
}

/**
 * Who may touch a resource now, across every agent of every host. Every change is a
 * compare-and-set on the resource's record, so of calls racing for it only compatible ones get
 * it; a holder renews its lease while its call runs and releases it after the call's result.
 */
export interface ResourceLeaseStore {
  /**
   * Takes the lease when no live holder forbids it (an exclusive one: any other holder; a shared
   * one: another's exclusive lease), or when it is already this holder's (a call run again after
   * a crash); null when another holds it.
   */
  take(resource: string, holder: string, mode: ResourceLeaseMode, nowMs: number): Promise<ResourceLease | null>;
  /** Renews; null when the lease was lost (it lapsed and was dropped or taken). */
  renew(lease: ResourceLease, nowMs: number): Promise<ResourceLease | null>;
  /** Releases, so a waiting call may take it at once; a lease lost meanwhile is not an error. */
  release(lease: ResourceLease): Promise<void>;
  /** The live holders of a resource (none: free). */
  holdersOf(resource: string, nowMs: number): Promise<string[]>;
  /** How long a take or renewal lasts. */
  readonly ttlMs: number;
}

/** One holder's entry in a resource's record. */
export interface HolderEntry {
  mode: ResourceLeaseMode;
  expiresAt: number;
}

/**
 * The record after `holder` takes `resource` in `mode`, or null when a live holder forbids it.
 * Lapsed entries are dropped. Shared by the implementations, so they cannot disagree.
 */
export function afterTake(
  holders: Readonly<Record<string, HolderEntry>>, holder: string, mode: ResourceLeaseMode, nowMs: number, ttlMs: number,
): Record<string, HolderEntry> | null {
  const live = liveHolders(holders, nowMs);
  delete live[holder];
  const others = Object.values(live);
  if (mode === 'exclusive' && others.length > 0) return null;
  if (mode === 'shared' && others.some((h) => h.mode === 'exclusive')) return null;
  return { ...live, [holder]: { mode, expiresAt: nowMs + ttlMs } };
}

/** The entries whose holders' leases have not lapsed by `nowMs`. */
export function liveHolders(holders: Readonly<Record<string, HolderEntry>>, nowMs: number): Record<string, HolderEntry> {
  const out: Record<string, HolderEntry> = {};
  for (const [h, e] of Object.entries(holders)) if (e.expiresAt > nowMs) out[h] = e;
  return out;
}

/**
 * The store key of a resource: a hash, since resource keys hold paths (slashes, dots, any
 * character) and KV keys may not; the resource itself is kept in the value.
 */
export function resourceLeaseKey(resource: string): string {
  return `r_${createHash('sha256').update(resource).digest('hex').slice(0, 40)}`;
}
