import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type PubAck } from '@nats-io/jetstream';
import { nuid } from '@nats-io/nats-core';
import type { Logger } from 'pino';
import { BLOB_BUCKET, BLOB_STREAM, blobChunkSubject, blobMetaSubject } from '../bus/subjects.js';
import { transientBusError } from '../bus/log-publisher.js';
import { sha256Digest, sha256Hex } from '../protocol/canonical-json.js';
import { StoreError, STORE_CODES } from '../protocol/errors.js';
import { sleep } from '../protocol/sleep.js';
import { applyDelta, decodeDelta, deltaKey, encodeDelta, type DeltaRecord } from './blob-delta-record.js';
import type { BlobStore } from './blob-port.js';

/** The acked publish the store writes with (the bus's log publisher, or `js.publish`). */
export type BlobPublish = (
  subject: string,
  payload: Uint8Array | string,
  opts: { msgID?: string; expect?: { lastSubjectSequence: number }; timeout?: number },
) => Promise<PubAck>;

/** Options of the Object Store blob store. */
export interface ObjectBlobOptions {
  publish: BlobPublish;
  /** Reads objects back (stream message gets, answered by the stream's leader). */
  jsm: Pick<JetStreamManager, 'streams'>;
  /** Resolves once the bucket exists (`ensureBlobBucket`); awaited before the first write or read. */
  ready?: () => Promise<unknown>;
  /** Bytes per chunk of an object (default 128 KiB; at most the server's max_payload). */
  chunkBytes?: number;
  /** Longest chain of continuations before a blob is stored whole again (default 16). */
  maxChain?: number;
  /**
   * How long a write that met a timeout or an election is tried again, with the same message IDs
   * (default: until the connection closes, as a log commit is: the commit naming the blob waits).
   */
  writeRetryMs?: number;
  /** How long a read that met a timeout or an election is tried again (default 15 s). */
  readRetryMs?: number;
  logger?: Logger;
}

/** What one stored name holds: a whole blob, or a continuation of another. */
export type BlobRecord = { whole: Uint8Array } | { delta: DeltaRecord };

/** The Object Store blob store, with the record-level access the cache over it and the upload use. */
export interface ObjectBlobStore extends BlobStore {
  readonly shared: true;
  /** What is stored for `digest` (whole, else as a continuation), not checked; undefined when neither is. */
  record(digest: string): Promise<BlobRecord | undefined>;
  /** Stores a record as it is under `key` (a digest or `delta:<digest>`), unless an object of that name exists. */
  putRecord(key: string, record: Uint8Array): Promise<'written' | 'present'>;
  /** The metadata subjects of every object in the bucket (deleted ones included). */
  metaSubjects(): Promise<Set<string>>;
}

/** Stored metadata of an object, as the Object Store writes it (ADR-20), so `nats obj` reads ours. */
interface ObjectMeta {
  name: string;
  description: string;
  options: { max_chunk_size: number };
  bucket: string;
  nuid: string;
  size: number;
  chunks: number;
  mtime: string;
  digest: string;
  deleted: boolean;
}

// Reads follow a chain this long at most: a cycle of continuations reads as missing.
const MAX_HOPS = 64;
const BACKOFF_MS = [100, 200, 400, 800, 1_000];

const transient = transientBusError;

/** The Object Store's digest field for bytes whose SHA-256 is `hex`. */
function objectDigest(hex: string): string {
  return `SHA-256=${Buffer.from(hex, 'hex').toString('base64').replace(/\+/g, '-').replace(/\//g, '_')}`;
}

/** The hex of a `sha256:` digest. */
const hexOf = (digest: string): string => digest.slice('sha256:'.length);

/**
 * Blobs in the JetStream Object Store bucket `blobs` (design §4): the durable home every host
 * shares. An object is named by the blob's `sha256:` digest (a continuation by `delta:<digest>`,
 * the same record the LMDB store keeps), cut into chunks, and written in the Object Store's own
 * layout, so `nats obj get blobs <digest>` reads it.
 *
 * A put resolves once the object's chunks and metadata are acked: a commit that names the blob
 * may follow (until then this store serves the bytes from memory). Content is never written
 * twice: a put of a digest this store wrote (or is writing) waits for that write; a small
 * object's metadata is published only if none exists (`Nats-Expected-Last-Subject-Sequence: 0`),
 * together with its one chunk, so a new blob costs one round trip, and losing that race (another
 * host wrote the same content) only purges the chunk just sent; a large object is looked up
 * before its chunks are sent, and its chunks are checked to have landed in order (a retry could
 * reorder them), else sent again one by one. A continuation is written
 * only while its base's write is known to this store (so it resolves once the base is durable
 * too); every `maxChain`-th one is whole again. A read rebuilds the bytes and checks them against
 * the digest: a blob that cannot be rebuilt reads as missing.
 */
export function createObjectBlobStore(opts: ObjectBlobOptions): ObjectBlobStore {
  const { publish, jsm } = opts;
  const chunkBytes = opts.chunkBytes ?? 128 * 1024;
  const maxChain = opts.maxChain ?? 16;
  const writeRetryMs = opts.writeRetryMs ?? Infinity;
  const readRetryMs = opts.readRetryMs ?? 15_000;
  let ready: Promise<unknown> | null = null;
  const whenReady = (): Promise<unknown> => {
    if (!opts.ready) return Promise.resolve();
    const r = (ready ??= opts.ready());
    // a failed opening is tried again by the next call
    r.catch(() => {
      if (ready === r) ready = null;
    });
    return r;
  };
  // What this store wrote or is writing: the chain length (0: whole) and the write's promise.
  const written = new Map<string, { chain: number; done: Promise<void> }>();
  const inFlight = new Set<Promise<unknown>>();
  // The bytes of puts not yet acked: readable through this store at once, as the port promises.
  const unacked = new Map<string, Uint8Array>();

  /** `f`, tried again after transient failures until `forMs` has passed. */
  const retrying = async <T>(what: string, forMs: number, f: () => Promise<T>): Promise<T> => {
    const until = Date.now() + forMs;
    for (let i = 0; ; i++) {
      try {
        return await f();
      } catch (err) {
        if (!transient(err) || Date.now() >= until) throw err;
        const waitMs = BACKOFF_MS[Math.min(i, BACKOFF_MS.length - 1)]!;
        // one line per outage, not one per try
        if (i === 0) opts.logger?.warn({ err, waitMs }, `${what} failed (NATS unreachable?); trying again with the same IDs`);
        await sleep(waitMs);
      }
    }
  };

  const getMessage = (query: { last_by_subj: string } | { seq: number; next_by_subj: string }) =>
    retrying('blob read', readRetryMs, () => jsm.streams.getMessage(BLOB_STREAM, query as Parameters<JetStreamManager['streams']['getMessage']>[1]));

  /** The live metadata of the object `name`, with its stream sequence; undefined when there is none. */
  const readMeta = async (name: string): Promise<{ meta: ObjectMeta; seq: number } | undefined> => {
    const m = await getMessage({ last_by_subj: blobMetaSubject(name) });
    if (!m) return undefined;
    try {
      return { meta: m.json<ObjectMeta>(), seq: m.seq };
    } catch {
      return undefined;
    }
  };

  /** An object's bytes from its chunks; undefined when some are gone. */
  const readChunks = async (meta: ObjectMeta): Promise<Uint8Array | undefined> => {
    if (meta.size === 0) return new Uint8Array(0);
    const subject = blobChunkSubject(meta.nuid);
    if (meta.chunks === 1) {
      const m = await getMessage({ last_by_subj: subject });
      return m && m.data.length === meta.size ? Buffer.from(m.data) : undefined;
    }
    const parts: Uint8Array[] = [];
    let seq = 0;
    let size = 0;
    for (let i = 0; i < meta.chunks; i++) {
      const m = await getMessage({ seq, next_by_subj: subject });
      if (!m) return undefined;
      parts.push(m.data);
      size += m.data.length;
      seq = m.seq + 1;
    }
    return size === meta.size ? Buffer.concat(parts) : undefined;
  };

  const purgeChunks = (id: string): Promise<void> =>
    jsm.streams.purge(BLOB_STREAM, { filter: blobChunkSubject(id) }).then(() => {}, (err: unknown) =>
      opts.logger?.warn({ err, nuid: id }, 'chunks of a blob object not purged; they stay as unreferenced bytes'));

  /** Sends an object's chunks; true when they landed in order. */
  const sendChunks = async (id: string, parts: Uint8Array[], together: boolean): Promise<boolean> => {
    const subject = blobChunkSubject(id);
    const send = (p: Uint8Array, i: number) => retrying('blob chunk write', writeRetryMs, () => publish(subject, p, { msgID: `${id}.${i}` }));
    let acks: PubAck[];
    if (together) acks = await Promise.all(parts.map(send));
    else {
      acks = [];
      for (let i = 0; i < parts.length; i++) acks.push(await send(parts[i]!, i));
    }
    return acks.every((a, i) => i === 0 || a.seq > acks[i - 1]!.seq);
  };

  /** True when every chunk an object's metadata names is stored (a write that died after its metadata leaves some out). */
  const intact = async (meta: ObjectMeta): Promise<boolean> => {
    if (meta.size === 0) return true;
    const subject = blobChunkSubject(meta.nuid);
    const info = await retrying('blob lookup', readRetryMs, () => jsm.streams.info(BLOB_STREAM, { subjects_filter: subject }));
    return (info.state.subjects?.[subject] ?? 0) === meta.chunks;
  };

  /** The object `name` as stored, when it is whole and intact; else the sequence a new metadata must follow. */
  const existing = async (name: string): Promise<{ present: true } | { present: false; seq: number }> => {
    const found = await readMeta(name);
    if (!found) return { present: false, seq: 0 };
    if (!found.meta.deleted && (await intact(found.meta))) return { present: true };
    // a deleted object's metadata stays, and a broken one is replaced: the new one follows it
    return { present: false, seq: found.seq };
  };

  /**
   * Publishes an object's metadata unless an intact object of that name exists ('present'); a
   * deleted or broken one is replaced. The same message ID on every try: a retry of one that
   * landed is a duplicate, not a second object.
   */
  const publishMeta = async (name: string, meta: ObjectMeta, expectSeq: number): Promise<'written' | 'present'> => {
    const payload = JSON.stringify(meta);
    let expect = expectSeq;
    for (let race = 0; ; race++) {
      try {
        await retrying('blob write', writeRetryMs, () => publish(blobMetaSubject(name), payload, { msgID: `${meta.nuid}.meta`, expect: { lastSubjectSequence: expect } }));
        return 'written';
      } catch (err) {
        if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) || race >= 3) throw err;
        const found = await existing(name);
        if (found.present) return 'present';
        expect = found.seq;
      }
    }
  };

  const unwritten = (name: string, err: unknown): StoreError =>
    new StoreError(STORE_CODES.blobUnwritten, `blob ${name} was not written to the Object Store: ${(err as Error).message}`, {
      cause: err,
      retryable: true,
      hint: 'check that NATS is reachable and has JetStream storage left',
    });

  /**
   * Writes the object `name` unless an intact one exists; resolves once its chunks and metadata
   * are acked. An object of one chunk sends both at once (a reader finds the chunk by the
   * metadata's nuid, so their order does not matter; if the chunk fails, the put fails, the
   * object reads as missing, and the next put replaces it). A larger one is looked for first,
   * and its metadata follows its chunks. Chunks whose metadata was refused (or never sent) are purged.
   */
  const writeObject = async (name: string, bytes: Uint8Array, hex: string): Promise<'written' | 'present'> => {
    await whenReady();
    const parts: Uint8Array[] = [];
    for (let off = 0; off < bytes.length; off += chunkBytes) parts.push(bytes.subarray(off, off + chunkBytes));
    const metaFor = (id: string): ObjectMeta => ({
      name, description: '', options: { max_chunk_size: chunkBytes }, bucket: BLOB_BUCKET, nuid: id,
      size: bytes.length, chunks: parts.length, mtime: new Date().toISOString(), digest: objectDigest(hex), deleted: false,
    });
    if (parts.length <= 1) {
      const id = nuid.next();
      const [chunk, meta] = await Promise.allSettled([sendChunks(id, parts, true), publishMeta(name, metaFor(id), 0)]);
      if (meta.status === 'fulfilled' && meta.value === 'present') {
        // another writer stored the same content first: ours is not needed
        void purgeChunks(id);
        return 'present';
      }
      if (meta.status === 'rejected') {
        if (meta.reason instanceof JetStreamApiError) void purgeChunks(id);
        throw unwritten(name, meta.reason);
      }
      if (chunk.status === 'rejected') throw unwritten(name, chunk.reason);
      return 'written';
    }
    const found = await existing(name);
    if (found.present) return 'present';
    let id = nuid.next();
    // once the metadata may have landed, its chunks are never purged: it would name nothing
    let metaSent = false;
    try {
      if (!(await sendChunks(id, parts, true))) {
        await purgeChunks(id);
        id = nuid.next();
        if (!(await sendChunks(id, parts, false))) throw new Error('chunks sent one by one still landed out of order');
      }
      metaSent = true;
      const r = await publishMeta(name, metaFor(id), found.seq);
      if (r === 'present') void purgeChunks(id);
      return r;
    } catch (err) {
      if (!metaSent || err instanceof JetStreamApiError) void purgeChunks(id);
      throw unwritten(name, err);
    }
  };

  const track = <T>(p: Promise<T>): Promise<T> => {
    inFlight.add(p);
    void p.then(() => inFlight.delete(p), () => inFlight.delete(p));
    return p;
  };

  const remember = (digest: string, chain: number, done: Promise<void>): void => {
    if (written.size >= 4096) written.clear();
    const entry = { chain, done };
    written.set(digest, entry);
    // not stored after all: a later put of the same content must write it again
    done.catch(() => {
      if (written.get(digest) === entry) written.delete(digest);
    });
  };

  const record = async (digest: string): Promise<BlobRecord | undefined> => {
    await whenReady();
    const [whole, cont] = await Promise.all([readMeta(digest), readMeta(deltaKey(digest))]);
    if (whole && !whole.meta.deleted) {
      const bytes = await readChunks(whole.meta);
      if (bytes) return { whole: bytes };
    }
    if (!cont || cont.meta.deleted) return undefined;
    const bytes = await readChunks(cont.meta);
    const delta = bytes ? decodeDelta(bytes) : undefined;
    return delta ? { delta } : undefined;
  };

  /** The bytes of `digest`, rebuilt from its continuations and checked at every step. */
  const rebuild = async (digest: string, hops: number): Promise<Uint8Array | undefined> => {
    const r = await record(digest);
    if (!r) return undefined;
    let bytes: Uint8Array | undefined;
    if ('whole' in r) bytes = r.whole;
    else {
      const base = hops < MAX_HOPS ? await rebuild(r.delta.header.base, hops + 1) : undefined;
      bytes = base ? applyDelta(base, r.delta) : undefined;
    }
    return bytes && sha256Digest(bytes) === digest ? bytes : undefined;
  };

  const get = async (digest: string): Promise<Uint8Array | undefined> => {
    const waiting = unacked.get(digest);
    return waiting ? Buffer.from(waiting) : rebuild(digest, 0);
  };

  return {
    shared: true,
    put(content, known, delta) {
      // copied now: the caller may reuse its buffer once this returns
      const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
      const digest = known ?? sha256Digest(bytes);
      const seen = written.get(digest);
      if (seen) return seen.done.then(() => digest);
      const base = delta ? written.get(delta.base) : undefined;
      let done: Promise<void>;
      let chain = 0;
      if (delta && base && base.chain + 1 < maxChain) {
        chain = base.chain + 1;
        const rec = encodeDelta({ base: delta.base, bytes: delta.bytes, chain }, delta.suffix);
        // durable once its base is too; a base that was not written after all makes it whole
        done = Promise.all([writeObject(deltaKey(digest), rec, sha256Hex(rec)), base.done])
          .then(() => {}, () => writeObject(digest, bytes, hexOf(digest)).then(() => {}));
      } else {
        done = writeObject(digest, bytes, hexOf(digest)).then(() => {});
      }
      remember(digest, chain, done);
      unacked.set(digest, bytes);
      void done.then(() => unacked.delete(digest), () => unacked.delete(digest));
      return track(done).then(() => digest);
    },
    get,
    async getText(digest) {
      const v = await get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      if (written.has(digest)) return true;
      await whenReady();
      const [whole, cont] = await Promise.all([readMeta(digest), readMeta(deltaKey(digest))]);
      return (whole !== undefined && !whole.meta.deleted) || (cont !== undefined && !cont.meta.deleted);
    },
    async flush() {
      await Promise.allSettled([...inFlight]);
    },
    record,
    putRecord(key, rec) {
      const hex = key.startsWith('sha256:') ? hexOf(key) : sha256Hex(rec);
      return track(writeObject(key, Buffer.from(rec), hex));
    },
    async metaSubjects() {
      await whenReady();
      const info = await retrying('blob listing', readRetryMs, () => jsm.streams.info(BLOB_STREAM, { subjects_filter: `${blobMetaSubject('')}>` }));
      return new Set(Object.keys(info.state.subjects ?? {}));
    },
  };
}
