import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import { createLmdbSnapshots } from '../../src/store/snapshots.js';
import { tempDir } from '../helpers/nats.js';

describe('LMDB store', () => {
  let dir: string;
  let store: LmdbStore;
  beforeAll(async () => {
    dir = await tempDir('lmdb');
    store = openLmdbStore(dir);
  });
  afterAll(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('opens one environment per path per process', async () => {
    const again = openLmdbStore(dir);
    expect(again.root).toBe(store.root);
    await again.close();
    // the first handle still works after another handle closed
    await createLmdbBlobStore(store).put('still open');
  });

  it('round-trips blobs by sha256 digest and dedupes', async () => {
    const blobs = createLmdbBlobStore(store);
    const text = 'héllo, blob';
    const digest = await blobs.put(text);
    expect(digest).toBe(sha256Digest(text));
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await blobs.put(text)).toBe(digest);
    expect(await blobs.put(new TextEncoder().encode(text))).toBe(digest);
    expect(await blobs.has(digest)).toBe(true);
    expect(await blobs.getText(digest)).toBe(text);
    expect(Buffer.from((await blobs.get(digest))!).toString('utf8')).toBe(text);

    const bytes = new Uint8Array([0, 1, 2, 255]);
    const d2 = await blobs.put(bytes);
    expect(Array.from((await blobs.get(d2))!)).toEqual([0, 1, 2, 255]);
    expect(await blobs.get(sha256Digest('absent'))).toBeUndefined();
    expect(await blobs.has(sha256Digest('absent'))).toBe(false);
  });

  it('takes a digest the caller already computed from the same bytes', async () => {
    const blobs = createLmdbBlobStore(store);
    const body = '{"model":"m","messages":[]}';
    expect(await blobs.put(body, sha256Digest(body))).toBe(sha256Digest(body));
    expect(await blobs.getText(sha256Digest(body))).toBe(body);
  });

  it('survives reopening: writes are on disk', async () => {
    const dir2 = await tempDir('lmdb2');
    try {
      const s1 = openLmdbStore(dir2);
      const digest = await createLmdbBlobStore(s1).put('durable');
      await createLmdbSnapshots(s1).save({
        schemaVersion: 2, actorId: 'agt_B', rootId: 'agt_B', seq: 1, streamSeq: 1, projection: null, machines: null, savedAt: 'now',
      });
      await s1.close();
      const s2 = openLmdbStore(dir2);
      expect(await createLmdbBlobStore(s2).getText(digest)).toBe('durable');
      expect((await createLmdbSnapshots(s2).load('agt_B'))?.schemaVersion).toBe(2);
      await s2.close();
    } finally {
      await rm(dir2, { recursive: true, force: true });
    }
  });
});
