import { rm } from 'node:fs/promises';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import { createLmdbSnapshots } from '../../src/store/snapshots.js';
import { tempDir } from '../helpers/nats.js';
import { snapshotContract } from './snapshots.contract.js';

// LMDB is the one snapshot store: with no LMDB the runtime keeps none (replays the log), so there is
// no in-memory store to hold to the same contract.
snapshotContract('LMDB', async () => {
  const dir = await tempDir('snapshots-contract');
  let store: LmdbStore = openLmdbStore(dir);
  return {
    snapshots: createLmdbSnapshots(store),
    async reopen() {
      await store.close();
      store = openLmdbStore(dir);
      return createLmdbSnapshots(store);
    },
    async corrupt(actorId) {
      await store.snapshots.put(actorId, { not: 'a snapshot', seq: 'seven' });
    },
    async close() {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
