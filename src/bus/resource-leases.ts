import { randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Kvm, KV, KvEntry } from '@nats-io/kv';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';
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

// `writeId` tells our own write from another's when an ack was lost and the record is read back.
const ValueSchema = z.object({
  v: z.literal(1),
  resource: z.string(),
  holders: z.record(z.string(), z.object({ mode: z.enum(['exclusive', 'shared']), expiresAt: z.number() })),
  writeId: z.string(),
});

/** How often one change retries after losing a race for the record before it says so. */
const MAX_RACES = 50;

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
  let opened: Promise<KV> | null = typeof opts.kv === 'function' ? null : Promise.resolve(opts.kv);
  const bucket = (): Promise<KV> => {
    if (!opened) {
      const open = (opts.kv as () => Promise<KV>)();
      opened = open;
      // a failed open is tried again by the next call, not remembered
      open.catch(() => { opened = null; });
    }
    return opened;
  };

  /** The record now: its revision (null: never written or aged out) and holders (none after a delete). */
  const read = async (resource: string): Promise<{ revision: number | null; holders: Record<string, HolderEntry> }> => {
    const key = resourceLeaseKey(resource);
    let e: KvEntry | null;
    try {
      e = await (await bucket()).get(key);
    } catch (err) {
      throw failed(`cannot read the resource lease of ${resource}`, err);
    }
    if (!e) return { revision: null, holders: {} };
    if (e.operation !== 'PUT') return { revision: e.revision, holders: {} };
    const v = ValueSchema.safeParse(safeJson(e));
    if (!v.success) {
      // a record this code cannot read may be a newer runtime's: held, until max_age drops it
      logger.warn({ resource, revision: e.revision }, 'unreadable resource lease record');
      return { revision: e.revision, holders: { '(unreadable)': { mode: 'exclusive', expiresAt: Number.MAX_SAFE_INTEGER } } };
    }
    return { revision: e.revision, holders: v.data.holders };
  };

  /** Writes `holders` (none: deletes) with CAS on `expected`; false when another write moved the record first. */
  const write = async (resource: string, holders: Record<string, HolderEntry>, expected: number | null): Promise<boolean> => {
    const key = resourceLeaseKey(resource);
    const kv = await bucket();
    const writeId = randomUUID();
    try {
      if (Object.keys(holders).length === 0) {
        if (expected !== null) await kv.delete(key, { previousSeq: expected });
        return true;
      }
      const data = JSON.stringify({ v: 1, resource, holders, writeId });
      if (expected === null) await kv.create(key, data);
      else await kv.update(key, data, expected);
      return true;
    } catch (err) {
      if (isCasConflict(err)) return false;
      // the ack is lost, not necessarily the write: read back and look for our writeId
      const e = await kv.get(key).catch(() => undefined);
      if (e === undefined) throw failed(`cannot write the resource lease of ${resource}`, err);
      const mine = e?.operation === 'PUT' && (safeJson(e) as { writeId?: string } | null)?.writeId === writeId;
      if (mine) return true;
      if ((e?.revision ?? null) !== expected) return false;
      throw failed(`cannot write the resource lease of ${resource}`, err);
    }
  };

  /** Reads, decides and writes until the write lands or the decision needs no write. */
  const change = async <T>(resource: string, decide: (holders: Record<string, HolderEntry>) => { holders: Record<string, HolderEntry> | null; result: T }): Promise<T> => {
    for (let race = 0; race < MAX_RACES; race++) {
      const now = await read(resource);
      const d = decide(now.holders);
      if (d.holders === null) return d.result;
      if (await write(resource, d.holders, now.revision)) return d.result;
    }
    throw new BusError(RESOURCE_LEASE_CODES.failed, `the resource lease of ${resource} kept changing under ${MAX_RACES} tries`, { retryable: true });
  };

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

function safeJson(e: KvEntry): unknown {
  try {
    return e.json();
  } catch {
    return null;
  }
}

// 10071: the subject's last sequence is not the expected one; 10164 is its newer variant.
function isCasConflict(err: unknown): boolean {
  return err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
}

function failed(what: string, err: unknown): BusError {
  return new BusError(RESOURCE_LEASE_CODES.failed, `${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: true });
}
