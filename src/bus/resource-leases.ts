import { randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Kvm, KV, KvEntry } from '@nats-io/kv';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { BUCKETS } from './subjects.js';
import { ensureTtlBucket } from './ttl-bucket.js';
import {
  DEFAULT_RESOURCE_LEASE_TTL_MS, RESOURCE_LEASE_CODES, resourceLeaseKey, type ResourceLease, type ResourceLeaseStore,
} from './resource-lease-port.js';

// Resource leases on KV `resource_leases`, as the actor leases of leases.ts are done on
// nats-server 2.9: no per-key TTL, so the bucket's max age is the lease TTL (a key its holder
// stopped renewing vanishes) and the value's `expiresAt` is compared with the caller's clock
// (max_age is swept lazily). Every write is a compare-and-set on the key's last revision, so of
// calls racing for a free or lapsed resource exactly one lands.

export { DEFAULT_RESOURCE_LEASE_TTL_MS, RESOURCE_LEASE_CODES, type ResourceLease, type ResourceLeaseStore } from './resource-lease-port.js';

// `writeId` tells our own write from another's when an ack was lost and the key is read back.
const ValueSchema = z.object({ v: z.literal(1), resource: z.string(), holder: z.string(), expiresAt: z.number(), writeId: z.string() });
type Value = z.infer<typeof ValueSchema>;

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

  interface Current { revision: number; value: Value | undefined; put: boolean }
  const read = async (key: string): Promise<Current | null> => {
    let e: KvEntry | null;
    try {
      e = await (await bucket()).get(key);
    } catch (err) {
      throw failed(`cannot read the resource lease ${key}`, err);
    }
    if (!e) return null;
    if (e.operation !== 'PUT') return { revision: e.revision, value: undefined, put: false };
    try {
      return { revision: e.revision, value: ValueSchema.parse(e.json()), put: true };
    } catch (err) {
      logger.warn({ key, revision: e.revision, err }, 'unreadable resource lease value');
      return { revision: e.revision, value: undefined, put: true };
    }
  };

  /** Writes with CAS on `expected` (null: no revision yet); null when another write moved it. */
  const write = async (resource: string, holder: string, nowMs: number, expected: number | null): Promise<ResourceLease | null> => {
    const key = resourceLeaseKey(resource);
    const value: Value = { v: 1, resource, holder, expiresAt: nowMs + ttlMs, writeId: randomUUID() };
    const data = JSON.stringify(value);
    const kv = await bucket();
    try {
      const revision = expected === null ? await kv.create(key, data) : await kv.update(key, data, expected);
      return { resource, holder, revision, expiresAt: value.expiresAt };
    } catch (err) {
      if (isCasConflict(err)) return null;
      // the ack is lost, not necessarily the write: read back and look for our writeId
      const now = await read(key).catch(() => undefined);
      if (now === undefined) throw failed(`cannot write the resource lease of ${resource}`, err);
      if (now?.value?.writeId === value.writeId) return { resource, holder, revision: now.revision, expiresAt: value.expiresAt };
      if ((now?.revision ?? null) !== expected) return null;
      throw failed(`cannot write the resource lease of ${resource}`, err);
    }
  };

  return {
    ttlMs,
    async take(resource, holder, nowMs) {
      const current = await read(resourceLeaseKey(resource));
      if (!current) return write(resource, holder, nowMs, null);
      if (!current.put) return write(resource, holder, nowMs, current.revision);
      const held = current.value;
      // a value this code cannot read may be a newer runtime's: it waits for max_age
      if (!held) return null;
      if (held.expiresAt > nowMs && held.holder !== holder) return null;
      return write(resource, holder, nowMs, current.revision);
    },
    async renew(lease, nowMs) {
      return write(lease.resource, lease.holder, nowMs, lease.revision);
    },
    async release(lease) {
      try {
        // CAS: never delete a lease another call has taken since
        await (await bucket()).delete(resourceLeaseKey(lease.resource), { previousSeq: lease.revision });
      } catch (err) {
        if (isCasConflict(err)) return;
        // not released: it lapses after the TTL
        throw failed(`cannot release the resource lease of ${lease.resource}`, err);
      }
    },
    async holderOf(resource, nowMs) {
      const current = await read(resourceLeaseKey(resource));
      return current?.value && current.value.expiresAt > nowMs ? current.value.holder : null;
    },
  };
}

// 10071: the subject's last sequence is not the expected one; 10164 is its newer variant.
function isCasConflict(err: unknown): boolean {
  return err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
}

function failed(what: string, err: unknown): BusError {
  return new BusError(RESOURCE_LEASE_CODES.failed, `${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: true });
}
