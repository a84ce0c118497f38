import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { tempDir } from '../helpers/nats.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('LMDB blob store, grouped writes', () => {
  it('serves a blob at once, commits it with its batch, and keeps it across a reopen', async () => {
    const dir = await tempDir('blobs');
    dirs.push(dir);
    const store = openLmdbStore(dir);
    const blobs = createLmdbBlobStore(store, { batchMs: 10_000 });
    const put = blobs.put('{"a":1}');
    // readable before the batch commits: an attempt may re-read its own request at once
    expect(await blobs.getText(sha256Digest('{"a":1}'))).toBe('{"a":1}');
    expect(await blobs.has(sha256Digest('{"a":1}'))).toBe(true);
    expect(store.blobs.doesExist(sha256Digest('{"a":1}'))).toBe(false);
    await blobs.flush();
    expect(await put).toBe(sha256Digest('{"a":1}'));
    expect(store.blobs.doesExist(sha256Digest('{"a":1}'))).toBe(true);
    await store.close();
    const again = openLmdbStore(dir);
    expect(await createLmdbBlobStore(again).getText(sha256Digest('{"a":1}'))).toBe('{"a":1}');
    await again.close();
  });

  it('commits every put of one window in one batch, and stores equal content once', async () => {
    const dir = await tempDir('blobs');
    dirs.push(dir);
    const store = openLmdbStore(dir);
    const blobs = createLmdbBlobStore(store, { batchMs: 5 });
    const digests = await Promise.all(['x', 'y', 'x', new Uint8Array([0, 255, 7])].map((c) => blobs.put(c)));
    expect(digests[0]).toBe(digests[2]);
    expect(new Set(digests).size).toBe(3);
    for (const d of digests) expect(store.blobs.doesExist(d)).toBe(true);
    expect(Buffer.from((await blobs.get(digests[3]!))!)).toEqual(Buffer.from([0, 255, 7]));
    expect(await blobs.put('x')).toBe(digests[0]);
    expect(await blobs.get(sha256Digest('never stored'))).toBeUndefined();
    await store.close();
  });
});
