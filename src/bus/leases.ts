import { randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Kvm, KV, KvEntry } from '@nats-io/kv';
import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { BUCKETS } from './subjects.js';
import { bucketKeys, ensureTtlBucket } from './ttl-bucket.js';
import { DEFAULT_LEASE_TTL_MS, LEASE_CODES, type Lease, type LeaseStore } from './lease-port.js';

// Leases on KV `leases` (design §6, §7): actor → host, with the KV revision as the epoch.
//
// nats-server 2.9 has no per-key TTL, so expiry is enforced twice:
//  (a) the bucket's max_age is the lease TTL: a key nobody renews vanishes from the server, and
//      its holder's next renewal fails its CAS (the subject's last sequence becomes 0);
//  (b) the value carries `expiresAt`, compared with the caller's `nowMs`, because max_age is
//      counted from the server's clock and is swept lazily, and because a host must be able to
//      judge "past its expiry" with the clock it is given (tests use a fake one).
// Every write is a compare-and-set on the key's last revision (create = "no revision yet"), so
// of any number of hosts racing for a free or expired lease exactly one write lands. Each
// renewal rewrites the value, so the epoch (the new revision) moves and fences older writers.
// Revisions are stream sequences of the bucket: monotonic for the whole bucket and kept by the
// server across restarts even when every message has aged out, so an actor's epochs only grow.
// Host clocks must agree to well within the TTL; the CAS, not the clock, is what keeps two
// holders from both writing.

export { DEFAULT_LEASE_TTL_MS, LEASE_CODES, type Lease, type LeaseStore } from './lease-port.js';

/** Options of `createKvLeaseStore`. */
export interface KvLeaseStoreOptions {
  /** Lease TTL; should equal the bucket's max age (`ensureLeaseBucket`). */
  ttlMs: number;
  logger?: Logger;
}

// The value of a lease key. `writeId` is unique per write so a write whose ack was lost (timeout,
// disconnect) can be recognised by reading the key back. `v` versions the value: one this code
// cannot read counts as held (see `take`) until its holder stops renewing and max_age drops it.
const LeaseValueSchema = z.object({
  v: z.literal(1),
  actorId: z.string(),
  host: z.string(),
  expiresAt: z.number(),
  writeId: z.string(),
});
type LeaseValue = z.infer<typeof LeaseValueSchema>;

// Same rule as the directory: actor IDs are used as KV keys verbatim.
const KEY_RE = /^[A-Za-z0-9_-]+$/;

/** Creates (or opens) the `leases` bucket with max age = `ttlMs`, updating it when it differs. */
export async function ensureLeaseBucket(
  kvm: Kvm, ttlMs: number = DEFAULT_LEASE_TTL_MS, logger: Logger = pino({ level: 'silent' }), replicas = 1,
): Promise<KV> {
  return ensureTtlBucket(kvm, BUCKETS.leases, ttlMs, LEASE_CODES.failed, logger, replicas);
}

/** A lease store over an open `leases` bucket. */
export function createKvLeaseStore(kv: KV, opts: KvLeaseStoreOptions): LeaseStore {
  const { ttlMs } = opts;
  const logger = opts.logger ?? pino({ level: 'silent' });
  if (!(ttlMs > 0)) throw new BusError(LEASE_CODES.failed, `lease TTL must be positive, got ${ttlMs}`);

  interface Current { revision: number; operation: KvEntry['operation']; value: LeaseValue | undefined }

  const read = async (actorId: string): Promise<Current | null> => {
    let e: KvEntry | null;
    try {
      e = await kv.get(actorId);
    } catch (err) {
      throw failed(`cannot read the lease of ${actorId}`, err);
    }
    if (!e) return null;
    if (e.operation !== 'PUT') return { revision: e.revision, operation: e.operation, value: undefined };
    return { revision: e.revision, operation: e.operation, value: decode(actorId, e) };
  };

  const decode = (actorId: string, e: KvEntry): LeaseValue | undefined => {
    try {
      return LeaseValueSchema.parse(e.json());
    } catch (err) {
      logger.warn({ actorId, revision: e.revision, err }, 'unreadable lease value');
      return undefined;
    }
  };

  const toLease = (v: LeaseValue, revision: number): Lease =>
    ({ actorId: v.actorId, host: v.host, epoch: revision, expiresAt: v.expiresAt });

  /**
   * Writes a new value with CAS on `expected` (null: the key must have no revision at all).
   * Returns the lease, or null when the CAS failed because another write moved the revision.
   */
  const write = async (
    actorId: string, host: string, nowMs: number, expected: number | null,
  ): Promise<Lease | null> => {
    const value: LeaseValue = { v: 1, actorId, host, expiresAt: nowMs + ttlMs, writeId: randomUUID() };
    const data = JSON.stringify(value);
    try {
      // create, not put-with-0: nats.js create also treats a delete marker as free (it retries
      // as a CAS on the marker's revision), which a key released between our read and write needs
      const revision = expected === null ? await kv.create(actorId, data) : await kv.update(actorId, data, expected);
      return toLease(value, revision);
    } catch (err) {
      if (isCasConflict(err)) return null;
      // The ack is lost, not necessarily the write: read back and look for our writeId.
      const now = await read(actorId).catch(() => undefined);
      // Unanswered twice (a leader election): whether it landed, and whether the lease is still
      // ours, is unknown. On a replicated bucket before nats-server 2.9.21 a takeover's CAS can land
      // next to ours, so the holder must not go on writing as if it held the lease.
      if (now === undefined) {
        throw new BusError(LEASE_CODES.unknown, `the lease of ${actorId} may be lost: neither its write nor a read-back was answered (${message(err)})`,
          { cause: err, retryable: true, hint: 'stop writing for the actor and take the lease again once NATS answers' });
      }
      if (now?.value?.writeId === value.writeId) return toLease(value, now.revision);
      // someone else's write (or max_age) moved the revision: as good as a CAS conflict
      const moved = now === null ? expected !== null : now.revision !== expected;
      if (moved) return null;
      throw failed(`cannot write the lease of ${actorId}`, err);
    }
  };

  return {
    ttlMs,

    async take(actorId, host, nowMs) {
      checkKey(actorId);
      const current = await read(actorId);
      // missing (never written, or aged out by max_age): create, which fails if anyone wrote first
      if (!current) return write(actorId, host, nowMs, null);
      // deleted (released): free, but still a CAS on the marker's revision so racers can't both win
      if (current.operation !== 'PUT') return write(actorId, host, nowMs, current.revision);
      const held = current.value;
      // a value we cannot read may belong to a newer host: leave it until max_age drops it
      if (!held) return null;
      if (held.expiresAt > nowMs && held.host !== host) return null;
      // Expired but still present (max_age has not swept it, or the clocks differ): a CAS update
      // on the revision we read, never a create, so of two hosts racing for it exactly one wins.
      // The same host re-taking its own live lease (a restart under a stable host ID) also lands
      // here: it gets a new epoch, which fences the earlier incarnation.
      return write(actorId, host, nowMs, current.revision);
    },

    async takeFrom(held, host, nowMs) {
      checkKey(held.actorId);
      // CAS on the holder's last revision: if it renewed since, it is alive and this fails
      return write(held.actorId, host, nowMs, held.epoch);
    },

    async renew(lease, nowMs) {
      checkKey(lease.actorId);
      const renewed = await write(lease.actorId, lease.host, nowMs, lease.epoch);
      if (renewed) return renewed;
      // the revision moved (another host took it) or max_age removed the key (last sequence 0)
      throw new BusError(LEASE_CODES.lost,
        `the lease of ${lease.actorId} (epoch ${lease.epoch}) was lost: another host took it or it expired`,
        { hint: 'stop hosting the actor; its next append will be refused by the log anyway' });
    },

    async release(lease) {
      checkKey(lease.actorId);
      try {
        // CAS: releasing must never delete a lease another host has taken since
        await kv.delete(lease.actorId, { previousSeq: lease.epoch });
      } catch (err) {
        if (isCasConflict(err)) return;
        // not released: the lease lapses after ttlMs anyway
        throw failed(`cannot release the lease of ${lease.actorId}`, err);
      }
    },

    async get(actorId, nowMs) {
      checkKey(actorId);
      const current = await read(actorId);
      if (!current?.value || current.value.expiresAt <= nowMs) return null;
      return toLease(current.value, current.revision);
    },

    async list(nowMs) {
      // the keys from the stream's subjects (kv.keys() could wait forever on a bucket whose
      // leases are being renewed), then one direct get per key, in parallel
      let keys: string[];
      try {
        keys = await bucketKeys(kv);
      } catch (err) {
        throw failed('cannot list leases', err);
      }
      const out: Lease[] = [];
      for (const current of await Promise.all(keys.map((k) => read(k)))) {
        if (current?.value && current.value.expiresAt > nowMs) out.push(toLease(current.value, current.revision));
      }
      return out.sort((a, b) => (a.actorId < b.actorId ? -1 : a.actorId > b.actorId ? 1 : 0));
    },
  };
}

function checkKey(actorId: string): void {
  if (!KEY_RE.test(actorId)) {
    throw new BusError(LEASE_CODES.invalidKey, `actor ID ${JSON.stringify(actorId)} cannot be a lease key`);
  }
}

// 10071: the subject's last sequence is not the expected one; 10164 is its newer variant.
function isCasConflict(err: unknown): boolean {
  return err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
}

function failed(what: string, err: unknown): BusError {
  return new BusError(LEASE_CODES.failed, `${what}: ${message(err)}`, { cause: err, retryable: true });
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
