import { afterReleaseJobSlot, afterTakeJobSlot, type JobSlotHolder, type JobSlotStore } from './job-slot-port.js';

/** Job places in this process's memory, with the KV store's rules: for jobs of one process and for tests. */
export function createMemoryJobSlots(): JobSlotStore {
  const records = new Map<string, Record<string, JobSlotHolder>>();
  return {
    async take(treeId, jobId, hostId, max, nowMs) {
      const holders = records.get(treeId) ?? {};
      const next = afterTakeJobSlot(holders, jobId, hostId, max, nowMs);
      if (next === null) return { taken: false, holders: { ...holders } };
      if (next !== 'unchanged') records.set(treeId, next);
      return { taken: true };
    },
    async release(treeId, jobId) {
      const next = afterReleaseJobSlot(records.get(treeId) ?? {}, jobId);
      if (next === 'unchanged') return;
      if (Object.keys(next).length === 0) records.delete(treeId);
      else records.set(treeId, next);
    },
    async holders(treeId) {
      return { ...(records.get(treeId) ?? {}) };
    },
  };
}
