// Data dirs written before blobs lived on the bus: their LMDB blobs (whole ones and continuation
// records) are uploaded once, so a host with another data dir reads them; the marker makes a
// later open a no-op, an interrupted upload is finished by the next, and two at once are harmless.
import { rm } from 'node:fs/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { pino } from 'pino';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { BLOB_STREAM } from '../../src/bus/subjects.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { BLOB_UPLOAD_MARKER, uploadLmdbBlobs } from '../../src/store/blob-upload.js';
import { createCachedBlobStore } from '../../src/store/cached-blobs.js';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import { openBlobBus, type BlobBus } from '../helpers/blob-bus.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

const logger = pino({ level: 'silent' });
let nats: TestNats | null = null;
const buses: BlobBus[] = [];
const lmdbs: LmdbStore[] = [];
const dirs: string[] = [];

// a server of its own for each test: what the bucket holds is what the test uploaded
beforeEach(async () => {
  await Promise.all(buses.splice(0).map((b) => b.close()));
  await nats?.stop();
  nats = await startTestNats();
}, 30_000);
afterAll(async () => {
  await Promise.all(buses.map((b) => b.close()));
  await Promise.all(lmdbs.map((l) => l.close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  await nats?.stop();
});

async function bus(): Promise<BlobBus> {
  const b = await openBlobBus(nats!.url);
  buses.push(b);
  return b;
}

async function dataDir(name: string): Promise<LmdbStore> {
  const dir = await tempDir(`upload-${name}`);
  dirs.push(dir);
  const lmdb = openLmdbStore(dir);
  lmdbs.push(lmdb);
  return lmdb;
}

/** An old data dir: blobs written by the LMDB store alone, a chain of continuations among them. */
async function oldDataDir(name: string, n = 12): Promise<{ lmdb: LmdbStore; blobs: Map<string, string> }> {
  const lmdb = await dataDir(name);
  const store = createLmdbBlobStore(lmdb, { batchMs: 1, maxChain: 4 });
  const blobs = new Map<string, string>();
  let open = `{"old":"${name}","messages":[`;
  let prev: string | null = null;
  for (let i = 0; i < n; i++) {
    const added = `{"role":"tool","content":"${i}"},`;
    const tail = `${added}"end"]}`;
    const body = `${open}${tail}`;
    const digest = sha256Digest(body);
    await store.put(body, digest, prev ? { base: prev, bytes: Buffer.byteLength(open), suffix: tail } : undefined);
    blobs.set(digest, body);
    prev = digest;
    open += added;
  }
  const artifact = `artifact of ${name}\n`.repeat(20_000);
  blobs.set(await store.put(artifact), artifact);
  await store.flush();
  return { lmdb, blobs };
}

/** Messages in the bucket's stream. */
async function stored(b: BlobBus): Promise<number> {
  return Number((await (await jetstreamManager(b.nc)).streams.info(BLOB_STREAM)).state.messages);
}

describe('the upload of an old data dir\'s blobs', () => {
  it('makes them readable from another data dir, marks the data dir, and does nothing on the next open', async () => {
    const old = await oldDataDir('a');
    const records = [...old.lmdb.blobs.getKeys()].length;
    // continuations are records of their own: fewer whole blobs than blobs
    expect([...old.lmdb.blobs.getKeys()].filter((k) => String(k).startsWith('delta:')).length).toBeGreaterThan(0);
    const b = await bus();
    const durable = b.store();
    const first = await uploadLmdbBlobs({ lmdb: old.lmdb, durable, bucket: b.bucket.created, logger });
    expect(first).toEqual({ skipped: false, uploaded: records, present: 0 });
    expect(old.lmdb.index.get(BLOB_UPLOAD_MARKER)).toMatchObject({ v: 1, bucket: b.bucket.created, records });

    const elsewhere = createCachedBlobStore({ durable: (await bus()).store(), cache: createLmdbBlobStore(await dataDir('b')) });
    for (const [digest, body] of old.blobs) expect(await elsewhere.getText(digest)).toBe(body);

    const before = await stored(b);
    expect(await uploadLmdbBlobs({ lmdb: old.lmdb, durable, bucket: b.bucket.created, logger })).toEqual({ skipped: true, uploaded: 0, present: 0 });
    expect(await stored(b)).toBe(before);
  }, 60_000);

  it('is finished by the next run when it was interrupted, and runs again for a bucket made anew', async () => {
    const old = await oldDataDir('c');
    const records = [...old.lmdb.blobs.getKeys()].length;
    const b = await bus();
    const stop = new AbortController();
    let writes = 0;
    const real = b.store();
    // stopped after three records are written, as a process killed mid-way
    const durable = {
      metaSubjects: () => real.metaSubjects(),
      async putRecord(key: string, rec: Uint8Array) {
        const r = await real.putRecord(key, rec);
        if (++writes === 3) stop.abort();
        return r;
      },
    };
    const cut = await uploadLmdbBlobs({ lmdb: old.lmdb, durable, bucket: b.bucket.created, logger, signal: stop.signal, concurrency: 1 });
    expect(cut).toEqual({ skipped: false, uploaded: 3, present: 0 });
    expect(old.lmdb.index.get(BLOB_UPLOAD_MARKER)).toBeUndefined();
    const rest = await uploadLmdbBlobs({ lmdb: old.lmdb, durable: real, bucket: b.bucket.created, logger });
    expect(rest).toEqual({ skipped: false, uploaded: records - 3, present: 3 });

    // the marker names the bucket: another one (a new server) gets everything again
    const again = await uploadLmdbBlobs({ lmdb: old.lmdb, durable: real, bucket: 'another bucket', logger });
    expect(again).toEqual({ skipped: false, uploaded: 0, present: records });
  }, 60_000);

  it('is harmless when two processes run it at once: each record is stored once', async () => {
    const old = await oldDataDir('d');
    const records = [...old.lmdb.blobs.getKeys()].length;
    const [b1, b2] = [await bus(), await bus()];
    const [r1, r2] = await Promise.all([
      uploadLmdbBlobs({ lmdb: old.lmdb, durable: b1.store(), bucket: b1.bucket.created, logger }),
      uploadLmdbBlobs({ lmdb: old.lmdb, durable: b2.store(), bucket: b2.bucket.created, logger }),
    ]);
    expect(r1.uploaded + r2.uploaded).toBe(records);
    expect(r1.uploaded + r1.present).toBe(records);
    const jsm = await jetstreamManager(b1.nc);
    const metas = (await jsm.streams.info(BLOB_STREAM, { subjects_filter: '$O.blobs.M.>' })).state.subjects ?? {};
    expect(Object.keys(metas)).toHaveLength(records);
    expect(Object.values(metas).every((n) => n === 1)).toBe(true);
    const elsewhere = b2.store();
    for (const [digest, body] of old.blobs) expect(await elsewhere.getText(digest)).toBe(body);
  }, 60_000);
});
