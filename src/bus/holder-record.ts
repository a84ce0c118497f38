import { randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';

// A KV record of holders, changed only by compare-and-set on its last revision: a change that
// loses a race reads again and decides again, so of two incompatible changes exactly one lands.
// Resource leases and tree places are both such records; what differs is the holder's shape, the
// key, and what an unreadable record means.

/** How often one change retries after losing a race for the record before it says so. */
const MAX_RACES = 50;

/** The record as read: its revision (null: never written or aged out) and its holders (none after a delete). */
export interface HolderRead<H> {
  revision: number | null;
  holders: Record<string, H>;
}

/** A decision over the holders read: new holders to write (null: nothing to write) and the change's result. */
export interface HolderDecision<H, T> {
  holders: Record<string, H> | null;
  result: T;
}

/** Options of `createHolderRecords`. */
export interface HolderRecordsOptions<H> {
  /** The bucket, opened on first use. */
  bucket: () => Promise<KV>;
  /** The schema of one holder. */
  holder: z.ZodType<H>;
  /** The KV key of a record's name. */
  key: (name: string) => string;
  /** Fields written beside the holders (e.g. the name itself). */
  fields?: (name: string) => Record<string, unknown>;
  /** What the record is, for errors: "the places of tree X". */
  describe: (name: string) => string;
  /** The error code of a failed read or write. */
  code: string;
  /** What a record this code cannot read stands for (its holders), or throw. */
  unreadable: (name: string, revision: number) => Record<string, H>;
}

/** Reads and compare-and-set changes of holder records. */
export interface HolderRecords<H> {
  read(name: string): Promise<HolderRead<H>>;
  /** Reads, decides and writes until the write lands or the decision needs no write. */
  change<T>(name: string, decide: (holders: Record<string, H>) => HolderDecision<H, T>): Promise<T>;
}

/** Holder records over one KV bucket. */
export function createHolderRecords<H>(opts: HolderRecordsOptions<H>): HolderRecords<H> {
  // `writeId` tells our own write from another's when an ack was lost and the record is read back.
  const valueSchema = z.object({ v: z.literal(1), holders: z.record(z.string(), opts.holder), writeId: z.string() });
  const failed = (what: string, err: unknown): BusError =>
    new BusError(opts.code, err === null ? what : `${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: true });

  const read = async (name: string): Promise<HolderRead<H>> => {
    let e: KvEntry | null;
    try {
      e = await (await opts.bucket()).get(opts.key(name));
    } catch (err) {
      throw failed(`cannot read ${opts.describe(name)}`, err);
    }
    if (!e) return { revision: null, holders: {} };
    if (e.operation !== 'PUT') return { revision: e.revision, holders: {} };
    const v = valueSchema.safeParse(safeJson(e));
    if (!v.success) return { revision: e.revision, holders: opts.unreadable(name, e.revision) };
    return { revision: e.revision, holders: v.data.holders as Record<string, H> };
  };

  /** Writes `holders` (none: deletes) with CAS on `expected`; false when another write moved the record first. */
  const write = async (name: string, holders: Record<string, H>, expected: number | null): Promise<boolean> => {
    const key = opts.key(name);
    const kv = await opts.bucket();
    const writeId = randomUUID();
    try {
      if (Object.keys(holders).length === 0) {
        if (expected !== null) await kv.delete(key, { previousSeq: expected });
        return true;
      }
      const data = JSON.stringify({ v: 1, ...opts.fields?.(name), holders, writeId });
      if (expected === null) await kv.create(key, data);
      else await kv.update(key, data, expected);
      return true;
    } catch (err) {
      if (isCasConflict(err)) return false;
      // the ack is lost, not necessarily the write: read back and look for our writeId
      const e = await kv.get(key).catch(() => undefined);
      if (e === undefined) throw failed(`cannot write ${opts.describe(name)}`, err);
      if (e?.operation === 'PUT' && (safeJson(e) as { writeId?: string } | null)?.writeId === writeId) return true;
      if ((e?.revision ?? null) !== expected) return false;
      throw failed(`cannot write ${opts.describe(name)}`, err);
    }
  };

  return {
    read,
    async change(name, decide) {
      for (let race = 0; race < MAX_RACES; race++) {
        const now = await read(name);
        const d = decide(now.holders);
        if (d.holders === null) return d.result;
        if (await write(name, d.holders, now.revision)) return d.result;
      }
      throw new BusError(opts.code, `${opts.describe(name)} kept changing under ${MAX_RACES} tries`, { retryable: true });
    },
  };
}

/** Opens a bucket once, on first use; a failed open is tried again by the next call, not remembered. */
export function openOnce(open: () => Promise<KV>): () => Promise<KV> {
  let opened: Promise<KV> | null = null;
  return () => {
    if (!opened) {
      const o = open();
      opened = o;
      o.catch(() => { opened = null; });
    }
    return opened;
  };
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
