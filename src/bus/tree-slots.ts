import { randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError, StorageType } from '@nats-io/jetstream';
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { JetStreamClient } from '@nats-io/jetstream';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { BUCKETS } from './subjects.js';
import { afterReleaseSlot, afterTakeSlot, TREE_SLOT_CODES, type SlotHolder, type SlotTake, type TreeSlotStore } from './tree-slot-port.js';

// Tree places on KV `tree_slots`, one record per root: every change is a compare-and-set on the
// record's last revision, so of two parents on two hosts taking the last place at once exactly one
// lands and the other reads again and is refused. Not a log of the root: only the root's own
// incarnation may append to its log (fencing), and a child's parent is rarely the root. No TTL:
// a place lives as long as its child runs, which may be longer than any lease.

export { TREE_SLOT_CODES, type SlotHolder, type SlotTake, type TreeSlotStore } from './tree-slot-port.js';

// `writeId` tells our own write from another's when an ack was lost and the record is read back.
const ValueSchema = z.object({
  v: z.literal(1),
  holders: z.record(z.string(), z.object({ tokens: z.array(z.string()), atMs: z.number() })),
  writeId: z.string(),
});

/** How often one change retries after losing a race for the record before it says so. */
const MAX_RACES = 50;

/** Creates (or opens) the `tree_slots` bucket. */
export async function ensureTreeSlotBucket(kvm: Kvm): Promise<KV> {
  return kvm.create(BUCKETS.treeSlots, { history: 1, storage: StorageType.File });
}

/** Tree places over the `tree_slots` bucket, made or opened on first use (a host's supervisor is made before any tree exists). */
export function createKvTreeSlots(opts: { js: JetStreamClient; logger?: Logger }): TreeSlotStore {
  const logger = opts.logger ?? pino({ level: 'silent' });
  let opened: Promise<KV> | null = null;
  const bucket = (): Promise<KV> => {
    if (!opened) {
      const open = ensureTreeSlotBucket(new Kvm(opts.js));
      opened = open;
      // a failed open is tried again by the next call, not remembered
      open.catch(() => { opened = null; });
    }
    return opened;
  };

  const read = async (rootId: string): Promise<{ revision: number | null; holders: Record<string, SlotHolder> }> => {
    let e: KvEntry | null;
    try {
      e = await (await bucket()).get(rootId);
    } catch (err) {
      throw failed(`cannot read the places of tree ${rootId}`, err);
    }
    if (!e) return { revision: null, holders: {} };
    if (e.operation !== 'PUT') return { revision: e.revision, holders: {} };
    const v = ValueSchema.safeParse(safeJson(e));
    if (!v.success) {
      // a record this code cannot read is not taken for empty: that would let the tree grow past its limit
      logger.warn({ rootId, revision: e.revision }, 'unreadable tree places record');
      throw failed(`the places record of tree ${rootId} is unreadable`, null);
    }
    return { revision: e.revision, holders: v.data.holders };
  };

  const write = async (rootId: string, holders: Record<string, SlotHolder>, expected: number | null): Promise<boolean> => {
    const kv = await bucket();
    const writeId = randomUUID();
    try {
      if (Object.keys(holders).length === 0) {
        if (expected !== null) await kv.delete(rootId, { previousSeq: expected });
        return true;
      }
      const data = JSON.stringify({ v: 1, holders, writeId });
      if (expected === null) await kv.create(rootId, data);
      else await kv.update(rootId, data, expected);
      return true;
    } catch (err) {
      if (isCasConflict(err)) return false;
      // the ack is lost, not necessarily the write: read back and look for our writeId
      const e = await kv.get(rootId).catch(() => undefined);
      if (e === undefined) throw failed(`cannot write the places of tree ${rootId}`, err);
      if (e?.operation === 'PUT' && (safeJson(e) as { writeId?: string } | null)?.writeId === writeId) return true;
      if ((e?.revision ?? null) !== expected) return false;
      throw failed(`cannot write the places of tree ${rootId}`, err);
    }
  };

  const change = async <T>(rootId: string, decide: (h: Record<string, SlotHolder>) => { holders: Record<string, SlotHolder> | null; result: T }): Promise<T> => {
    for (let race = 0; race < MAX_RACES; race++) {
      const now = await read(rootId);
      const d = decide(now.holders);
      if (d.holders === null) return d.result;
      if (await write(rootId, d.holders, now.revision)) return d.result;
    }
    throw new BusError(TREE_SLOT_CODES.failed, `the places of tree ${rootId} kept changing under ${MAX_RACES} tries`, { retryable: true });
  };

  return {
    take(rootId, childId, token, max, nowMs) {
      return change<SlotTake>(rootId, (holders) => {
        const next = afterTakeSlot(holders, childId, token, max, nowMs);
        if (next === null) return { holders: null, result: { taken: false as const, holders } };
        return { holders: next === 'unchanged' ? null : next, result: { taken: true as const } };
      });
    },
    release(rootId, childId, tokens) {
      return change(rootId, (holders) => {
        const next = afterReleaseSlot(holders, childId, tokens);
        return { holders: next === 'unchanged' ? null : next, result: undefined };
      });
    },
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

function failed(what: string, err: unknown): BusError {
  return new BusError(TREE_SLOT_CODES.failed, err === null ? what : `${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err, retryable: true });
}
