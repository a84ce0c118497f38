import type { Kvm, KV, KvEntry } from '@nats-io/kv';
import { hostname } from 'node:os';
import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { DEFAULT_LEASE_TTL_MS } from './leases.js';
import { BUCKETS } from './subjects.js';
import { bucketKeys, ensureTtlBucket } from './ttl-bucket.js';

// Host presence on KV `hosts` (design §6, §7): each running `actorloop host` puts a record under
// its name every TTL/3 and deletes it when it drains, so a command can tell whether a live host
// exists and hand its work to it instead of hosting the agent itself. As for leases, nats-server
// 2.9 has no per-key TTL: the bucket's max age (the lease TTL) drops the record of a host that
// died without deleting it, and the value's `expiresAt` says the same on the reader's clock before
// the server sweeps it. A record is a hint, never a lock: leases decide who runs an agent.

/** Stable bus error codes raised by host presence. */
export const HOSTS_CODES = { failed: 'bus.hosts_failed' } as const;

const HostValueSchema = z.object({
  v: z.literal(1),
  name: z.string(),
  hostname: z.string(),
  pid: z.number().int(),
  startedAt: z.string(),
  leaseTtlMs: z.number().positive(),
  /** Milliseconds (the writer's clock) after which the record no longer says the host is alive. */
  expiresAt: z.number(),
});

/** A host as it announces itself. */
export type HostRecord = Omit<z.infer<typeof HostValueSchema>, 'v'>;

/** Who a host is, for its announcements. */
export type HostIdentity = Omit<HostRecord, 'expiresAt'>;

/** The `hosts` bucket: which hosts run, announced by themselves. */
export interface HostPresence {
  /** Puts (or refreshes) a host's record; it lasts `leaseTtlMs` unless put again. */
  announce(host: HostIdentity, nowMs: number): Promise<void>;
  /** Deletes a host's record (it drains): commands stop handing it work at once. */
  withdraw(name: string): Promise<void>;
  /** Hosts whose record is live at `nowMs`; a process of this machine that is gone is not. */
  live(nowMs: number): Promise<HostRecord[]>;
  /** A host's record while the bucket keeps it, live or not: was `name` a host at all? */
  known(name: string): Promise<HostRecord | null>;
}

/** Creates (or opens) the `hosts` bucket with max age = `ttlMs` (the lease TTL). */
export async function ensureHostsBucket(
  kvm: Kvm, ttlMs: number = DEFAULT_LEASE_TTL_MS, logger: Logger = pino({ level: 'silent' }), replicas = 1,
): Promise<KV> {
  return ensureTtlBucket(kvm, BUCKETS.hosts, ttlMs, HOSTS_CODES.failed, logger, replicas);
}

/**
 * The KV key of a host name: a name may hold characters a key may not (`hostname:pid`), so every
 * character outside `[A-Za-z0-9_-]` is written as `=` and its UTF-8 bytes in hex.
 */
export function hostKey(name: string): string {
  return [...Buffer.from(name, 'utf8')]
    .map((b) => (/[A-Za-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `=${b.toString(16).padStart(2, '0')}`))
    .join('');
}

/** True when `pid` on `host` names a process of this machine that no longer exists. */
export function localProcessGone(host: string, pid: number): boolean {
  if (host !== hostname() || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Host presence over an open `hosts` bucket. */
export function createKvHostPresence(kv: KV, logger: Logger = pino({ level: 'silent' })): HostPresence {
  const decode = (e: KvEntry): HostRecord | null => {
    if (e.operation !== 'PUT') return null;
    try {
      const { v: _v, ...record } = HostValueSchema.parse(e.json());
      return record;
    } catch (err) {
      // a newer host's record this code cannot read: not counted, never fatal
      logger.debug({ key: e.key, err }, 'unreadable host record');
      return null;
    }
  };
  return {
    async announce(host, nowMs) {
      const value = { v: 1, ...host, expiresAt: nowMs + host.leaseTtlMs };
      try {
        await kv.put(hostKey(host.name), JSON.stringify(value));
      } catch (err) {
        throw failed(`cannot announce host ${host.name}`, err);
      }
    },
    async withdraw(name) {
      try {
        await kv.delete(hostKey(name));
      } catch (err) {
        throw failed(`cannot withdraw host ${name}`, err);
      }
    },
    async known(name) {
      try {
        const e = await kv.get(hostKey(name));
        return e ? decode(e) : null;
      } catch (err) {
        throw failed(`cannot read host ${name}`, err);
      }
    },
    async live(nowMs) {
      try {
        const entries = await Promise.all((await bucketKeys(kv)).map((k) => kv.get(k)));
        return entries
          .map((e) => (e ? decode(e) : null))
          .filter((h): h is HostRecord => h !== null && h.expiresAt > nowMs && !localProcessGone(h.hostname, h.pid))
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      } catch (err) {
        throw failed('cannot list hosts', err);
      }
    },
  };
}

function failed(what: string, err: unknown): BusError {
  return new BusError(HOSTS_CODES.failed, `${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: true });
}
