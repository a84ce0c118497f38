import { StorageType } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { JetStreamClient } from '@nats-io/jetstream';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { createHolderRecords, openOnce } from './holder-record.js';
import { BUCKETS } from './subjects.js';
import { afterReleaseSlot, afterTakeSlot, TREE_SLOT_CODES, type SlotHolder, type SlotTake, type TreeSlotStore } from './tree-slot-port.js';

// Tree places on KV `tree_slots`, one record per root: every change is a compare-and-set on the
// record's last revision, so of two parents on two hosts taking the last place at once exactly one
// lands and the other reads again and is refused. Not a log of the root: only the root's own
// incarnation may append to its log (fencing), and a child's parent is rarely the root. No TTL:
// a place lives as long as its child runs, which may be longer than any lease.

export { TREE_SLOT_CODES, type SlotHolder, type SlotTake, type TreeSlotStore } from './tree-slot-port.js';

/** Creates (or opens) the `tree_slots` bucket. */
export async function ensureTreeSlotBucket(kvm: Kvm): Promise<KV> {
  return kvm.create(BUCKETS.treeSlots, { history: 1, storage: StorageType.File });
}

/** Tree places over the `tree_slots` bucket, made or opened on first use (a host's supervisor is made before any tree exists). */
export function createKvTreeSlots(opts: { js: JetStreamClient; logger?: Logger }): TreeSlotStore {
  const logger = opts.logger ?? pino({ level: 'silent' });
  const { change } = createHolderRecords<SlotHolder>({
    bucket: openOnce(() => ensureTreeSlotBucket(new Kvm(opts.js))),
    holder: z.object({ tokens: z.array(z.string()), atMs: z.number() }),
    key: (rootId) => rootId,
    describe: (rootId) => `the places of tree ${rootId}`,
    code: TREE_SLOT_CODES.failed,
    unreadable: (rootId, revision) => {
      // a record this code cannot read is not taken for empty: that would let the tree grow past its limit
      logger.warn({ rootId, revision }, 'unreadable tree places record');
      throw new BusError(TREE_SLOT_CODES.failed, `the places record of tree ${rootId} is unreadable`, { retryable: true });
    },
  });

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
