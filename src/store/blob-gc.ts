import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { parseLogSubject, STREAMS } from '../bus/subjects.js';
import { StoreError, STORE_CODES } from '../protocol/errors.js';
import type { ActorEvent } from '../protocol/events.js';
import { blobRefs } from './blob-refs.js';
import { decodeCommit } from './commit-codec.js';

// Blob retention (docs/durability.md, "Blob retention"): a blob is kept while a retained log
// names it, with the base chain of a continuation, or while it is younger than the grace period
// (a blob is written before the commit that names it, so a young one may belong to a commit in
// flight). Everything else in the bucket is removed. The logs are read whole and must all parse:
// a commit that does not parse might name anything, so gc then removes nothing.

/** One object of the blob bucket as gc sees it. */
export interface BucketObject {
  name: string;
  size: number;
  /** When it was written (ISO 8601, the writer's clock). */
  mtime: string;
  deleted?: boolean;
}

/** What gc needs of the JetStream Object Store bucket of blobs (an `ObjectStore` of `@nats-io/obj` is one). */
export interface BlobBucket {
  list(): Promise<BucketObject[]>;
  info(name: string): Promise<BucketObject | null>;
  getBlob(name: string): Promise<Uint8Array | null>;
  delete(name: string): Promise<unknown>;
}

/**
 * Reads every commit of every retained log after stream seq `afterSeq`, to the end as of the
 * call, handing each commit's events to `visit`; resolves with the last stream seq read.
 */
export type LogScan = (afterSeq: number, visit: (events: ActorEvent[]) => void) => Promise<number>;

/** Options of `collectBlobGarbage`. */
export interface BlobGcOptions {
  /** Objects written less than this long ago are kept, named or not. */
  graceMs: number;
  /** List what would go; remove nothing. */
  dryRun: boolean;
  /** The clock, ms since epoch (default `Date.now`). */
  now?: () => number;
}

/** What a collection found and did. */
export interface BlobGcReport {
  /** Objects removed (with `dryRun`: that would be), oldest first. */
  removed: BucketObject[];
  removedBytes: number;
  /** Objects kept because a log names them (or a continuation they are the base of). */
  keptNamed: number;
  /** Objects kept only because they are younger than the grace period. */
  keptYoung: number;
  /** Digests a log names that the bucket holds neither whole nor as a continuation, sorted. */
  missing: string[];
  /** Commits and events read. */
  commits: number;
  events: number;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const DELTA_PREFIX = 'delta:';

/** The digest an object of the bucket stores (whole or as a continuation), or null for a name gc does not own. */
function digestOf(name: string): string | null {
  const d = name.startsWith(DELTA_PREFIX) ? name.slice(DELTA_PREFIX.length) : name;
  return DIGEST.test(d) ? d : null;
}

/** The base a continuation's record names (its first line is the JSON header `{base, bytes, chain}`). */
function deltaBase(record: Uint8Array): string | null {
  const nl = record.indexOf(10);
  if (nl < 0) return null;
  try {
    const header = JSON.parse(Buffer.from(record.buffer, record.byteOffset, nl).toString('utf8')) as { base?: unknown };
    return typeof header.base === 'string' ? header.base : null;
  } catch {
    return null;
  }
}

/**
 * Removes from the blob bucket every object no retained log names and that is older than the
 * grace period. Order matters: the bucket is listed before the logs are read, so an object
 * written after the listing is never a candidate; the logs' tail is read again just before the
 * removals, so a commit that landed meanwhile still keeps what it names; and each object is
 * looked at again before it goes, so one written again since the listing stays.
 */
export async function collectBlobGarbage(bucket: BlobBucket, scan: LogScan, opts: BlobGcOptions): Promise<BlobGcReport> {
  const now = opts.now ?? Date.now;
  const listed = (await bucket.list()).filter((o) => !o.deleted && digestOf(o.name) !== null);
  const byName = new Map(listed.map((o) => [o.name, o]));
  const cutoff = now() - opts.graceMs;
  const young = (o: BucketObject): boolean => !(Date.parse(o.mtime) < cutoff);

  const named = new Set<string>();
  let commits = 0;
  let events = 0;
  const visit = (commit: ActorEvent[]): void => {
    commits += 1;
    for (const e of commit) {
      events += 1;
      for (const d of blobRefs(e)) named.add(d);
    }
  };
  const end = await scan(0, visit);

  // what a digest needs: itself, whole or as a continuation, and the chain of bases behind one
  const bases = new Map<string, string | null>();
  const baseOf = async (deltaName: string): Promise<string | null> => {
    if (!bases.has(deltaName)) {
      const record = await bucket.getBlob(deltaName);
      bases.set(deltaName, record ? deltaBase(record) : null);
    }
    return bases.get(deltaName)!;
  };
  /** Adds to `into` the names `digest` needs: itself (whole or as a continuation) and the bases behind it. */
  const follow = async (digest: string, into: Set<string>): Promise<void> => {
    for (let d: string | null = digest; d !== null && !into.has(d);) {
      into.add(d);
      into.add(DELTA_PREFIX + d);
      const delta = byName.get(DELTA_PREFIX + d);
      d = delta ? await baseOf(delta.name) : null;
    }
  };
  /** True when the bucket can rebuild `digest`: it holds it whole, or a continuation whose bases it can rebuild. */
  const complete = async (digest: string): Promise<boolean> => {
    for (let d: string | null = digest, hops = 0; d !== null && hops <= 64; hops++) {
      if (byName.has(d)) return true;
      const delta = byName.get(DELTA_PREFIX + d);
      d = delta ? await baseOf(delta.name) : null;
    }
    return false;
  };
  const keptByLogs = new Set<string>();
  const kept = new Set<string>();
  const missing = new Set<string>();
  const gather = async (): Promise<void> => {
    for (const d of named) {
      await follow(d, keptByLogs);
      if (!missing.has(d) && !(await complete(d))) missing.add(d);
    }
    for (const n of keptByLogs) kept.add(n);
    // a young object may be named by a commit in flight: the bases it needs stay with it
    for (const o of listed) if (young(o)) await follow(digestOf(o.name)!, kept);
  };
  await gather();
  // commits that landed while the bucket was looked at keep what they name too
  const before = named.size;
  await scan(end, visit);
  if (named.size > before) await gather();

  const candidates = listed
    .filter((o) => !kept.has(o.name))
    .sort((a, b) => Date.parse(a.mtime) - Date.parse(b.mtime) || a.name.localeCompare(b.name));
  const removed: BucketObject[] = [];
  for (const o of candidates) {
    if (!opts.dryRun) {
      // written again since the listing (its content came back): it is young now, and stays
      const current = await bucket.info(o.name);
      if (!current || current.deleted || current.mtime !== o.mtime) continue;
      await bucket.delete(o.name).catch((err: unknown) => {
        throw new StoreError(STORE_CODES.blobGcFailed,
          `could not remove blob ${o.name} from the blob bucket: ${(err as Error).message}; ${removed.length} removed before it`,
          { cause: err, retryable: true, hint: 'run actorloop gc again; what is kept does not change' });
      });
    }
    removed.push(o);
  }
  const keptNamed = listed.filter((o) => keptByLogs.has(o.name)).length;
  return {
    removed,
    removedBytes: removed.reduce((n, o) => n + o.size, 0),
    keptNamed,
    keptYoung: listed.length - candidates.length - keptNamed,
    missing: [...missing].sort(),
    commits,
    events,
  };
}

/** A `LogScan` over the LOGS stream: every subject, in stream order, through an ordered consumer. */
export function jetStreamLogScan(js: JetStreamClient, jsm: JetStreamManager): LogScan {
  return async (afterSeq, visit) => {
    const { state } = await jsm.streams.info(STREAMS.logs);
    const last = state.last_seq;
    if (last <= afterSeq || state.messages === 0) return Math.max(afterSeq, last);
    const consumer = await js.consumers.get(STREAMS.logs, {
      filter_subjects: 'log.>',
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: afterSeq + 1,
    });
    const messages = await consumer.consume({ max_messages: 256 });
    try {
      for await (const m of messages) {
        const place = parseLogSubject(m.subject);
        if (!place) {
          throw new StoreError(STORE_CODES.invalidEvent, `LOGS holds a message on ${m.subject} (stream seq ${m.seq}), which is no actor's log`);
        }
        try {
          visit(decodeCommit(m.data, m.seq, place.actorId));
        } catch (err) {
          throw new StoreError(STORE_CODES.invalidEvent,
            `the commit at stream seq ${m.seq} of LOGS (${m.subject}) does not parse, so what it names is not known: ${(err as Error).message}`,
            { cause: err });
        }
        // the end fixed above; or nothing left (the last message was removed after the look)
        if (m.seq >= last || m.info.pending === 0) break;
      }
    } finally {
      messages.stop();
      await consumer.delete().catch(() => {});
    }
    return last;
  };
}
