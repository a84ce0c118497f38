import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { tempDir } from '../helpers/nats.js';

const dirs: string[] = [];
/** A temp dir for one test's LMDB, removed after it. */
async function blobsDir(): Promise<string> {
  const dir = await tempDir('blobs');
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('LMDB blob store, grouped writes', () => {
  it('serves a blob at once, commits it with its batch, and keeps it across a reopen', async () => {
    const dir = await blobsDir();
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

  it('refuses a put made after its store closed, with a rejection instead of an uncaught LMDB error', async () => {
    const dir = await blobsDir();
    const store = openLmdbStore(dir);
    const blobs = createLmdbBlobStore(store, { batchMs: 0 });
    await blobs.put('before');
    await store.close();
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      await expect(blobs.put('after the close')).rejects.toThrow(/LMDB store was closed/);
      // LMDB's own failure would come a turn later, from an immediate
      await new Promise((r) => setTimeout(r, 20));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
    // not remembered as stored: a store opened again writes it
    const again = openLmdbStore(dir);
    const reopened = createLmdbBlobStore(again);
    expect(await reopened.has(sha256Digest('after the close'))).toBe(false);
    expect(await reopened.getText(sha256Digest('before'))).toBe('before');
    await again.close();
  });

  it('commits every put of one window in one batch, and stores equal content once', async () => {
    const dir = await blobsDir();
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

  it('lands a put after a quiet spell at the end of the loop\'s turn, and one within the window when the window ends', async () => {
    const dir = await blobsDir();
    const store = openLmdbStore(dir);
    let clock = 0;
    const blobs = createLmdbBlobStore(store, { batchMs: 60_000, now: () => clock });
    // a minute after the last batch (the store's opening) started landing: no window to wait for
    clock = 61_000;
    const quiet = blobs.put('after a quiet spell');
    const landed = await Promise.race([quiet.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))]);
    expect(landed).toBe(true);
    expect(store.blobs.doesExist(sha256Digest('after a quiet spell'))).toBe(true);
    // right after it: this one waits for the window (a minute on the fake clock), so only a flush lands it
    clock += 10;
    const busy = blobs.put('within the window');
    await new Promise((r) => setTimeout(r, 50));
    expect(store.blobs.doesExist(sha256Digest('within the window'))).toBe(false);
    await blobs.flush();
    expect(await busy).toBe(sha256Digest('within the window'));
    expect(store.blobs.doesExist(sha256Digest('within the window'))).toBe(true);
    await store.close();
  });

  it('answers a put of content an earlier store wrote (it does not look first) and keeps one record of it', async () => {
    const dir = await blobsDir();
    const first = openLmdbStore(dir);
    const digest = await createLmdbBlobStore(first, { batchMs: 1 }).put('written once');
    await first.close();
    const second = openLmdbStore(dir);
    const blobs = createLmdbBlobStore(second, { batchMs: 1 });
    expect(await blobs.put('written once')).toBe(digest);
    await blobs.flush();
    expect(await blobs.getText(digest)).toBe('written once');
    expect([...second.blobs.getKeys()]).toEqual([digest]);
    await second.close();
  });

  describe('continuations (a turn\'s growing request bodies)', () => {
    /** Bodies like a turn's: each one the last up to its array's end, then new items and a tail. */
    function bodiesOf(steps: number): Array<{ body: string; digest: string; delta?: { base: string; bytes: number; suffix: string } }> {
      const out: Array<{ body: string; digest: string; delta?: { base: string; bytes: number; suffix: string } }> = [];
      let open = '{"model":"m","messages":[{"role":"system","content":"héllo"}';
      for (let i = 0; i < steps; i++) {
        const added = `,{"role":"tool","content":"${'é'.repeat(i % 7)}${'x'.repeat(200)} ${i}"}`;
        const close = `],"n":${i}}`;
        const prev = out.at(-1);
        const body = open + added + close;
        out.push({
          body, digest: sha256Digest(body),
          ...(prev ? { delta: { base: prev.digest, bytes: Buffer.byteLength(open), suffix: added + close } } : {}),
        });
        open += added;
      }
      return out;
    }

    it('stores each continuation as what it adds, whole again every maxChain-th, and reads every one back exactly', async () => {
      const dir = await blobsDir();
      const store = openLmdbStore(dir);
      const blobs = createLmdbBlobStore(store, { batchMs: 1, maxChain: 8 });
      const chain = bodiesOf(40);
      for (const b of chain) expect(await blobs.put(b.body, b.digest, b.delta)).toBe(b.digest);
      await blobs.flush();
      const whole = chain.filter((b) => store.blobs.doesExist(b.digest)).length;
      const continued = chain.filter((b) => store.blobs.doesExist(`delta:${b.digest}`)).length;
      // the first, then one in every 8
      expect(whole).toBe(5);
      expect(continued).toBe(35);
      let stored = 0;
      for (const { key, value } of store.blobs.getRange()) if (String(key).includes('sha256:')) stored += value.length;
      const sum = chain.reduce((n, b) => n + Buffer.byteLength(b.body), 0);
      expect(stored).toBeLessThan(sum / 3);
      // read back through a store that wrote none of them (a reopen), committed and rebuilt
      await store.close();
      const again = openLmdbStore(dir);
      const reader = createLmdbBlobStore(again);
      for (const b of chain) {
        expect(await reader.getText(b.digest)).toBe(b.body);
        expect(await reader.has(b.digest)).toBe(true);
      }
      // a continuation of a continuation written by that store: it learns the chain from the record
      const next = bodiesOf(41).at(-1)!;
      expect(await reader.put(next.body, next.digest, next.delta)).toBe(next.digest);
      expect(await reader.getText(next.digest)).toBe(next.body);
      await reader.flush();
      expect(again.blobs.doesExist(`delta:${next.digest}`)).toBe(true);
      await again.close();
    });

    it('stores a body whole when its base is not stored, and reads a continuation that does not rebuild its digest as missing', async () => {
      const dir = await blobsDir();
      const store = openLmdbStore(dir);
      const blobs = createLmdbBlobStore(store, { batchMs: 1 });
      const [, second] = bodiesOf(2);
      // its base was never stored: kept whole
      await blobs.put(second!.body, second!.digest, second!.delta);
      await blobs.flush();
      expect(store.blobs.doesExist(second!.digest)).toBe(true);
      // a continuation whose suffix is not what its digest says
      const base = 'prefix-and-rest';
      await blobs.put(base);
      const claimed = sha256Digest('prefix-and-more');
      await blobs.put('prefix-and-more', claimed, { base: sha256Digest(base), bytes: 7, suffix: 'and-less' });
      await blobs.flush();
      expect(store.blobs.doesExist(`delta:${claimed}`)).toBe(true);
      expect(await blobs.get(claimed)).toBeUndefined();
      await store.close();
    });
  });
});
