// Leases (design §6, §7): who hosts which actor, the KV revision as the epoch. `createKvLeaseStore`
// (KV `leases`) and `createMemoryLeaseStore` implement the port.

/** The default lease TTL: a host that stops renewing loses its actors after this long. */
export const DEFAULT_LEASE_TTL_MS = 10_000;

/** Stable bus error codes raised by leases. */
export const LEASE_CODES = {
  lost: 'bus.lease_lost',
  /**
   * A renewal whose write and read-back both failed (a timeout during a leader election): it may
   * have landed or not, and the lease may have lapsed meanwhile. The holder treats it as lost until
   * a read says otherwise: it stops writing for that actor and takes the lease again (reading first).
   */
  unknown: 'bus.lease_unknown',
  failed: 'bus.lease_failed',
  invalidKey: 'bus.invalid_lease_key',
} as const;

/** A lease held on one actor. */
export interface Lease {
  actorId: string;
  host: string;
  /** The KV revision of the last write: the incarnation's fencing token. */
  epoch: number;
  /** Milliseconds (the `nowMs` clock of the writer) after which others may take it. */
  expiresAt: number;
}

/** Who hosts which actor: taken with create, renewed and released with revision CAS. */
export interface LeaseStore {
  /** Takes the lease when no live one exists (KV create); returns null when another host holds a live lease. */
  take(actorId: string, host: string, nowMs: number): Promise<Lease | null>;
  /**
   * Takes a live lease from a holder known to be dead (a local process that no longer exists),
   * by CAS on its last revision; null when the holder renewed meanwhile.
   */
  takeFrom(held: Lease, host: string, nowMs: number): Promise<Lease | null>;
  /**
   * Renews by revision CAS; throws BusError 'bus.lease_lost' when the revision moved or the key is
   * gone, 'bus.lease_unknown' when neither the write nor a read-back was answered.
   */
  renew(lease: Lease, nowMs: number): Promise<Lease>;
  /** Releases (delete with CAS) so another host may take it at once; a lost lease is not an error here. */
  release(lease: Lease): Promise<void>;
  /** The current holder, or null (missing, deleted, unreadable, or past its expiry). */
  get(actorId: string, nowMs: number): Promise<Lease | null>;
  /** Live holders by actor (for a host deciding what to claim). */
  list(nowMs: number): Promise<Lease[]>;
  /** How long a take or renewal lasts. */
  readonly ttlMs: number;
}

