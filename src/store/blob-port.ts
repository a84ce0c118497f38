import { sha256Digest } from '../protocol/canonical-json.js';
import type { LmdbStore } from './lmdb-store.js';

/** Content-addressed blobs (prepared requests, artifacts, ...) named `sha256:<hex>` (design §4). */
export interface BlobStore {
  /**
   * Stores content and returns its digest once it is committed; storing existing content is a
   * no-op. The content is readable through this store at once, before the commit. `digest`, when
   * the caller already computed it from these very bytes (a prepared request), is not computed again.
   */
  put(content: string | Uint8Array, digest?: string): Promise<string>;
  /** The bytes of a blob, or undefined. */
  get(digest: string): Promise<Uint8Array | undefined>;
  /** A blob decoded as UTF-8, or undefined. */
  getText(digest: string): Promise<string | undefined>;
  /** True when the blob is stored (or waiting in the current batch). */
  has(digest: string): Promise<boolean>;
  /** Commits the writes waiting in the current batch. */
  flush(): Promise<void>;
}

/** Options of the LMDB blob store. */
export interface LmdbBlobOptions {
  /** Writes are grouped into one LMDB commit per window: a synced commit costs ~1 ms of disk. */
  batchMs?: number;
}

/**
 * Blobs in the LMDB `blobs` sub-database. Writes are grouped: every put of one window lands in
 * one synced LMDB transaction, so a busy host pays one fsync per window, not one per step.
 */
export function createLmdbBlobStore(store: LmdbStore, opts: LmdbBlobOptions = {}): BlobStore {
  const db = store.blobs;
  const batchMs = opts.batchMs ?? 20;
  // The open batch: writes waiting for the window to close, and the promise their puts return.
  let open: { writes: Map<string, Buffer>; done: Promise<void>; resolve(): void; reject(e: unknown): void } | null = null;
  let timer: NodeJS.Timeout | null = null;
  // Batches being committed, readable until they land.
  const landing = new Set<Map<string, Buffer>>();
  const inFlight = new Set<Promise<void>>();

  const close = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = null;
    const b = open;
    open = null;
    if (!b) return Promise.resolve();
    landing.add(b.writes);
    // ifNoExists: two hosts writing the same content race harmlessly.
    const writing = Promise.all(
      [...b.writes].map(([digest, bytes]) => db.ifNoExists(digest, () => void db.put(digest, bytes))),
    ).then(
      () => b.resolve(),
      (err: unknown) => b.reject(err),
    );
    inFlight.add(writing);
    void writing.finally(() => {
      inFlight.delete(writing);
      landing.delete(b.writes);
    });
    return b.done;
  };

  const waiting = (digest: string): Buffer | undefined => {
    const hit = open?.writes.get(digest);
    if (hit) return hit;
    for (const writes of landing) {
      const w = writes.get(digest);
      if (w) return w;
    }
    return undefined;
  };

  const get = async (digest: string): Promise<Uint8Array | undefined> => {
    const w = waiting(digest);
    if (w) return Buffer.from(w);
    // getBinary copies out of LMDB's memory map (getBinaryFast would not): the caller may keep it
    return db.getBinary(digest);
  };

  return {
    async put(content, known) {
      const digest = known ?? sha256Digest(content);
      if (open?.writes.has(digest)) return open.done.then(() => digest);
      if (waiting(digest) || db.doesExist(digest)) return digest;
      if (!open) {
        let resolve!: () => void;
        let reject!: (e: unknown) => void;
        const done = new Promise<void>((res, rej) => {
          resolve = res;
          reject = rej;
        });
        open = { writes: new Map(), done, resolve, reject };
        timer = setTimeout(() => void close().catch(() => {}), batchMs);
        timer.unref?.();
      }
      open.writes.set(digest, typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content));
      const done = open.done;
      return done.then(() => digest);
    },
    get,
    async getText(digest) {
      const v = await get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      return waiting(digest) !== undefined || db.doesExist(digest);
    },
    async flush() {
      await close().catch(() => {});
      await Promise.all(inFlight);
    },
  };
}
