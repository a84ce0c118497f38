import { rm } from 'node:fs/promises';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';
import { tempDir } from '../helpers/nats.js';
import { blobContract } from './blobs.contract.js';

blobContract('memory', async () => ({ blobs: createMemoryBlobStore(), close: async () => {} }));

blobContract('LMDB', async () => {
  const dir = await tempDir('blobs-contract');
  const store = openLmdbStore(dir);
  const blobs = createLmdbBlobStore(store, { batchMs: 5, maxChain: 4 });
  return {
    blobs,
    async close() {
      await blobs.flush();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
