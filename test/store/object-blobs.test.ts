// The Object Store blob store and the LMDB cache over it, on a real nats-server: what one host
// writes another host with an empty data dir reads (a delta chain, a chunked artifact), content is
// stored once however many hosts write it, a continuation is durable only once its base is, and
// the objects are the Object Store's own (the nats.js library reads ours, we read its).
import { rm } from 'node:fs/promises';
import { jetstream, JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogPublisher } from '../../src/bus/log-publisher.js';
import { BLOB_STREAM, blobChunkSubject, blobMetaSubject } from '../../src/bus/subjects.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { deltaKey } from '../../src/store/blob-delta-record.js';
import { createCachedBlobStore } from '../../src/store/cached-blobs.js';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import type { BlobPublish } from '../../src/store/object-blobs.js';
import { openBlobBus, type BlobBus } from '../helpers/blob-bus.js';
import { startRestartableNats, startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { until } from '../helpers/processes.js';

let nats: TestNats;
const buses: BlobBus[] = [];
const dirs: string[] = [];
const lmdbs: LmdbStore[] = [];
beforeAll(async () => {
  nats = await startTestNats();
}, 30_000);
afterAll(async () => {
  await Promise.all(buses.map((b) => b.close()));
  await Promise.all(lmdbs.map((l) => l.close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  await nats?.stop();
});

/** A host: its own connection and its own (empty) data dir, blobs cached in its LMDB. */
async function host(name: string) {
  const bus = await openBlobBus(nats.url);
  buses.push(bus);
  const dir = await tempDir(`blobs-${name}`);
  dirs.push(dir);
  const lmdb = openLmdbStore(dir);
  lmdbs.push(lmdb);
  const durable = bus.store({ maxChain: 4 });
  const cache = createLmdbBlobStore(lmdb, { batchMs: 5, maxChain: 4 });
  return { bus, lmdb, durable, cache, blobs: createCachedBlobStore({ durable, cache }) };
}

/** A turn's prepared requests: each body the last one's plus what the step added. */
function chainOfBodies(n: number, tag: string) {
  let open = `{"tag":"${tag}","messages":[{"role":"system","content":"héllo"}`;
  let prev: string | null = null;
  const out: Array<{ body: string; digest: string; delta?: { base: string; bytes: number; suffix: string } }> = [];
  for (let i = 0; i < n; i++) {
    const added = `,{"role":"tool","content":"${'x'.repeat(i * 10)}${i}"}`;
    const tail = `${added}],"n":${i}}`;
    const body = `${open}${tail}`;
    const digest = sha256Digest(body);
    out.push({ body, digest, ...(prev ? { delta: { base: prev, bytes: Buffer.byteLength(open), suffix: tail } } : {}) });
    prev = digest;
    open += added;
  }
  return out;
}

/** How many messages the bucket's stream holds on `subject` (a wildcard sums them). */
async function count(bus: BlobBus, subject: string): Promise<number> {
  const jsm = await jetstreamManager(bus.nc);
  const info = await jsm.streams.info(BLOB_STREAM, { subjects_filter: subject });
  return Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
}

/** Chunk subjects of the bucket no object's metadata names. */
async function orphanChunks(bus: BlobBus): Promise<string[]> {
  const jsm = await jetstreamManager(bus.nc);
  const subjects = async (filter: string) => Object.keys((await jsm.streams.info(BLOB_STREAM, { subjects_filter: filter })).state.subjects ?? {});
  const named = new Set<string>();
  for (const m of await subjects('$O.blobs.M.>')) {
    const meta = (await jsm.streams.getMessage(BLOB_STREAM, { last_by_subj: m }))!.json<{ nuid: string }>();
    named.add(blobChunkSubject(meta.nuid));
  }
  return (await subjects('$O.blobs.C.>')).filter((c) => !named.has(c));
}

describe('blobs in the Object Store', () => {
  it('a host with an empty data dir reads what another wrote: a delta chain and a chunked artifact, and caches them', async () => {
    const a = await host('a');
    const bodies = chainOfBodies(11, 'chain');
    for (const b of bodies) expect(await a.blobs.put(b.body, b.digest, b.delta)).toBe(b.digest);
    // 300 KiB of bytes no two chunks share: three chunks of 128 KiB at most
    const artifact = Buffer.alloc(300 * 1024);
    for (let i = 0; i < artifact.length; i++) artifact[i] = (i * 7 + (i >> 9)) & 0xff;
    const artifactDigest = await a.blobs.put(artifact);
    // every put resolved once acked: nothing more to wait for before another host reads
    // continuations were stored as what they add, every 4th whole again
    expect(await count(a.bus, blobMetaSubject(deltaKey(bodies[1]!.digest)))).toBe(1);
    expect(await count(a.bus, blobMetaSubject(bodies[1]!.digest))).toBe(0);
    expect(await count(a.bus, blobMetaSubject(bodies[4]!.digest))).toBe(1);

    const b = await host('b');
    expect(b.lmdb.blobs.doesExist(bodies.at(-1)!.digest)).toBe(false);
    for (const x of [...bodies].reverse()) expect(await b.blobs.getText(x.digest)).toBe(x.body);
    expect(Buffer.compare(Buffer.from((await b.blobs.get(artifactDigest))!), artifact)).toBe(0);
    expect(await b.blobs.has(artifactDigest)).toBe(true);

    // read once, held in b's LMDB: a store on b's data dir alone serves them now
    await b.blobs.flush();
    const local = createLmdbBlobStore(b.lmdb);
    for (const x of bodies) expect(await local.getText(x.digest)).toBe(x.body);
    expect(Buffer.compare(Buffer.from((await local.get(artifactDigest))!), artifact)).toBe(0);
  }, 60_000);

  it('stores content once however many hosts write it, at once or later', async () => {
    const a = await host('dedupe-a');
    const b = await host('dedupe-b');
    const small = `small ${Date.now()}`;
    const big = Buffer.alloc(200 * 1024, `big ${Date.now()}`);
    const digests = await Promise.all([a.durable.put(small), b.durable.put(small), a.durable.put(big), b.durable.put(big)]);
    expect(await a.durable.put(small)).toBe(digests[0]);
    expect(await createCachedBlobStore({ durable: b.bus.store(), cache: b.cache }).put(big)).toBe(digests[2]);
    for (const d of [digests[0]!, digests[2]!]) expect(await count(a.bus, blobMetaSubject(d))).toBe(1);
    // the chunks of the writes that lost the race are purged: every chunk left is one a metadata names
    await until('no chunks but named ones', async () => ((await orphanChunks(a.bus)).length === 0 ? true : null));
    expect(await b.durable.getText(digests[0]!)).toBe(small);
  }, 60_000);

  it('resolves a continuation only once its base is durable too', async () => {
    const bus = await openBlobBus(nats.url);
    buses.push(bus);
    const [first, second] = chainOfBodies(2, `held ${Date.now()}`);
    // the base's metadata is held back until the test lets it go
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const real = createLogPublisher(bus.nc, jetstream(bus.nc)).publish;
    const publish: BlobPublish = async (subject, payload, opts) => {
      if (subject === blobMetaSubject(first!.digest)) await released;
      return real(subject, payload, opts);
    };
    const blobs = bus.store({ publish });
    const base = blobs.put(first!.body, first!.digest);
    let contDone = false;
    const cont = blobs.put(second!.body, second!.digest, second!.delta).then((d) => {
      contDone = true;
      return d;
    });
    // the continuation's own object lands; its put still waits for the base
    await until('continuation object stored', async () => ((await count(bus, blobMetaSubject(deltaKey(second!.digest)))) === 1 ? true : null));
    await new Promise((r) => setTimeout(r, 100));
    expect(contDone).toBe(false);
    release();
    expect(await base).toBe(first!.digest);
    expect(await cont).toBe(second!.digest);
    expect(await bus.store().getText(second!.digest)).toBe(second!.body);
  }, 60_000);

  it('writes objects the Object Store library reads, and reads the ones it writes', async () => {
    const bus = await openBlobBus(nats.url);
    buses.push(bus);
    const blobs = bus.store();
    const big = Buffer.alloc(260 * 1024, `library ${Date.now()}`);
    const digest = await blobs.put(big);
    const os = await new Objm(bus.nc).open('blobs');
    const info = (await os.info(digest))!;
    expect(info).toMatchObject({ size: big.length, chunks: 3, deleted: false });
    expect(Buffer.compare(Buffer.from((await os.getBlob(digest))!), big)).toBe(0);

    const theirs = `written by the library ${Date.now()}`;
    await os.putBlob({ name: sha256Digest(theirs) }, Buffer.from(theirs));
    expect(await blobs.getText(sha256Digest(theirs))).toBe(theirs);
  }, 60_000);

  it('reads a broken or deleted object as missing, and a put stores it again', async () => {
    const bus = await openBlobBus(nats.url);
    buses.push(bus);
    const blobs = bus.store();
    const text = `broken ${Date.now()}`;
    const digest = await blobs.put(text);
    const jsm = await jetstreamManager(bus.nc);
    const meta = (await jsm.streams.getMessage(BLOB_STREAM, { last_by_subj: blobMetaSubject(digest) }))!.json<{ nuid: string }>();
    // its chunk gone, as after a write that died after its metadata
    await jsm.streams.purge(BLOB_STREAM, { filter: blobChunkSubject(meta.nuid) });
    const other = bus.store();
    expect(await other.get(digest)).toBeUndefined();
    expect(await other.put(text)).toBe(digest);
    expect(await bus.store().getText(digest)).toBe(text);

    const os = await new Objm(bus.nc).open('blobs');
    await os.delete(digest);
    const third = bus.store();
    expect(await third.get(digest)).toBeUndefined();
    expect(await third.has(digest)).toBe(false);
    expect(await third.put(text)).toBe(digest);
    expect(await bus.store().getText(digest)).toBe(text);
  }, 60_000);

  it('fails a put whose chunk was refused, reads that blob as missing, and stores it whole on the next put', async () => {
    const bus = await openBlobBus(nats.url);
    buses.push(bus);
    const real = createLogPublisher(bus.nc, jetstream(bus.nc)).publish;
    let refuse = true;
    const publish: BlobPublish = async (subject, payload, opts) => {
      if (refuse && subject.startsWith('$O.blobs.C.')) {
        throw new JetStreamApiError({ code: 500, err_code: 10047, description: 'insufficient resources' });
      }
      return real(subject, payload, opts);
    };
    const blobs = bus.store({ publish });
    const text = `refused once ${Date.now()}`;
    await expect(blobs.put(text)).rejects.toMatchObject({ code: 'store.blob_unwritten' });
    // its metadata landed without it: such an object reads as missing
    expect(await count(bus, blobMetaSubject(sha256Digest(text)))).toBe(1);
    expect(await bus.store().get(sha256Digest(text))).toBeUndefined();
    refuse = false;
    expect(await blobs.put(text)).toBe(sha256Digest(text));
    expect(await bus.store().getText(sha256Digest(text))).toBe(text);
  }, 60_000);

  it('reads a continuation whose base it cannot rebuild as missing', async () => {
    const a = await host('orphan');
    const [first, second] = chainOfBodies(2, `orphan ${Date.now()}`);
    await a.durable.put(first!.body, first!.digest);
    await a.durable.put(second!.body, second!.digest, second!.delta);
    const os = await new Objm(a.bus.nc).open('blobs');
    await os.delete(first!.digest);
    expect(await a.bus.store().get(second!.digest)).toBeUndefined();
    const b = await host('orphan-b');
    expect(await b.blobs.get(second!.digest)).toBeUndefined();
  }, 60_000);

  it('a put made while the server is down resolves once it is back, and the blob is whole', async () => {
    const server = await startRestartableNats();
    try {
      const bus = await openBlobBus(server.url);
      const blobs = bus.store({ maxChain: 4 });
      const [first, second] = chainOfBodies(2, `outage ${Date.now()}`);
      await blobs.put(first!.body, first!.digest);
      await server.kill();
      let done = false;
      const put = blobs.put(second!.body, second!.digest, second!.delta).then((d) => {
        done = true;
        return d;
      });
      const big = Buffer.alloc(300 * 1024, 'outage');
      const bigPut = blobs.put(big);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(done).toBe(false);
      await server.restart();
      expect(await put).toBe(second!.digest);
      const bigDigest = await bigPut;
      const other = await openBlobBus(server.url);
      const reader = other.store();
      expect(await reader.getText(second!.digest)).toBe(second!.body);
      expect(Buffer.compare(Buffer.from((await reader.get(bigDigest))!), big)).toBe(0);
      await other.close();
      await bus.close();
    } finally {
      await server.stop();
    }
  }, 90_000);
});
