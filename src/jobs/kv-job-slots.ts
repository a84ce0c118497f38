import { StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { createHolderRecords, openOnce } from '../bus/holder-record.js';
import { BusError } from '../protocol/errors.js';
import { BUCKETS } from '../bus/subjects.js';
import { afterReleaseJobSlot, afterTakeJobSlot, JOB_SLOT_CODES, type JobSlotHolder, type JobSlotStore, type JobSlotTake } from './job-slot-port.js';

// Job places on KV `job_slots`, one record per tree, changed only by compare-and-set on its last
// revision (`createHolderRecords`, as the tree's child places are): of two hosts taking the last
// place at once exactly one lands, and the other reads again and is refused. No TTL: a place lives
// as long as its job runs, which may be longer than any lease; a dead host's places are given back
// by the jobs' next holder, which ends them (`holders` says which are whose).

/** The bucket's name (`BUCKETS.jobSlots`): `ensureStreams` makes it with the deployment's replicas; a bus it did not make gets it on first use. */
export const JOB_SLOTS_BUCKET = BUCKETS.jobSlots;

/** Creates (or opens) the `job_slots` bucket. */
export async function ensureJobSlotBucket(kvm: Kvm): Promise<KV> {
  return kvm.create(JOB_SLOTS_BUCKET, { history: 1, storage: StorageType.File });
}

/** Job places over the `job_slots` bucket, made or opened on first use. */
export function createKvJobSlots(opts: { js: JetStreamClient; logger?: Logger }): JobSlotStore {
  const logger = opts.logger ?? pino({ level: 'silent' });
  const records = createHolderRecords<JobSlotHolder>({
    bucket: openOnce(() => ensureJobSlotBucket(new Kvm(opts.js))),
    holder: z.object({ hostId: z.string(), atMs: z.number() }),
    key: (treeId) => treeId,
    describe: (treeId) => `the job places of tree ${treeId}`,
    code: JOB_SLOT_CODES.failed,
    unreadable: (treeId, revision) => {
      // a record this code cannot read is not taken for empty: that would let the tree run more jobs than allowed
      logger.warn({ treeId, revision }, 'unreadable job places record');
      throw new BusError(JOB_SLOT_CODES.failed, `the job places record of tree ${treeId} is unreadable`, { retryable: true });
    },
  });

  return {
    take(treeId, jobId, hostId, max, nowMs) {
      return records.change<JobSlotTake>(treeId, (holders) => {
        const next = afterTakeJobSlot(holders, jobId, hostId, max, nowMs);
        if (next === null) return { holders: null, result: { taken: false as const, holders } };
        return { holders: next === 'unchanged' ? null : next, result: { taken: true as const } };
      });
    },
    release(treeId, jobId) {
      return records.change(treeId, (holders) => {
        const next = afterReleaseJobSlot(holders, jobId);
        return { holders: next === 'unchanged' ? null : next, result: undefined };
      });
    },
    async holders(treeId) {
      return (await records.read(treeId)).holders;
    },
  };
}
