import { rm } from 'node:fs/promises';
import { afterAll, beforeAll } from 'vitest';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { createCachedBlobStore } from '../../src/store/cached-blobs.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';
import { openBlobBus, type BlobBus } from '../helpers/blob-bus.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { blobContract, type BlobSubject } from './blobs.contract.js';

blobContract('memory', async () => ({ blobs: createMemoryBlobStore(), close: async () => {} }));

/** An LMDB blob store in a fresh temp data dir. */
async function lmdbSubject(): Promise<BlobSubject & { lmdb: ReturnType<typeof createLmdbBlobStore> }> {
  const dir = await tempDir('blobs-contract');
  const store = openLmdbStore(dir);
  const blobs = createLmdbBlobStore(store, { batchMs: 5, maxChain: 4 });
  return {
    blobs,
    lmdb: blobs,
    async close() {
      await blobs.flush();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

blobContract('LMDB', lmdbSubject);

// One server for the stores on the bus: content-addressed, they share its bucket harmlessly.
let nats: TestNats;
let bus: BlobBus;
beforeAll(async () => {
  nats = await startTestNats();
  bus = await openBlobBus(nats.url);
}, 30_000);
afterAll(async () => {
  await bus?.close();
  await nats?.stop();
});

blobContract('Object Store', async () => {
  const blobs = bus.store({ maxChain: 4 });
  return { blobs, close: () => blobs.flush() };
});

blobContract('LMDB cache over the Object Store', async () => {
  const local = await lmdbSubject();
  const durable = bus.store({ maxChain: 4 });
  const blobs = createCachedBlobStore({ durable, cache: local.lmdb });
  return {
    blobs,
    async close() {
      await blobs.flush();
      await local.close();
    },
  };
});
