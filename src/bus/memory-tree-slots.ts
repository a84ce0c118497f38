import { afterReleaseSlot, afterTakeSlot, type SlotHolder, type TreeSlotStore } from './tree-slot-port.js';

/** Tree places in this process's memory, with the KV store's rules: for agents of one process and for tests. */
export function createMemoryTreeSlots(): TreeSlotStore {
  const records = new Map<string, Record<string, SlotHolder>>();
  return {
    async take(rootId, childId, token, max, nowMs) {
      const holders = records.get(rootId) ?? {};
      const next = afterTakeSlot(holders, childId, token, max, nowMs);
      if (next === null) return { taken: false, holders };
      if (next !== 'unchanged') records.set(rootId, next);
      return { taken: true };
    },
    async release(rootId, childId, tokens) {
      const next = afterReleaseSlot(records.get(rootId) ?? {}, childId, tokens);
      if (next === 'unchanged') return;
      if (Object.keys(next).length === 0) records.delete(rootId);
      else records.set(rootId, next);
    },
  };
}
