import { performance } from 'node:perf_hooks';
import { sha256Digest } from '../protocol/canonical-json.js';
import type { BlobDelta } from '../protocol/blob-delta.js';
import { applyDelta, decodeDelta, deltaKey, digestOfDeltaKey, encodeDelta } from './blob-delta-record.js';
import type { LmdbStore } from './lmdb-store.js';

export { deltaKey } from './blob-delta-record.js';

/** Content-addressed blobs (prepared requests, artifacts, ...) named `sha256:<hex>` (design §4). */
export interface BlobStore {
  /**
   * Stores content and returns its digest once it is committed; storing existing content is a
   * no-op. The content is readable through this store at once, before the commit. `digest`, when
   * the caller already computed it from these very bytes (a prepared request), is not computed again.
   * With `delta` (which must describe these very bytes) the store may keep only the suffix.
   */
  put(content: string | Uint8Array, digest?: string, delta?: BlobDelta): Promise<string>;
  /** The bytes of a blob, or undefined. */
  get(digest: string): Promise<Uint8Array | undefined>;
  /** A blob decoded as UTF-8, or undefined. */
  getText(digest: string): Promise<string | undefined>;
  /** True when the blob is stored (or waiting in the current batch). */
  has(digest: string): Promise<boolean>;
  /** Commits the writes waiting in the current batch. */
  flush(): Promise<void>;
  /**
   * True when other hosts read this store (the Object Store): a blob a commit names must be
   * written before that commit, even one the log could rebuild (a prepared request). A store
   * only this host reads may let such a blob land after the commit.
   */
  readonly shared?: boolean;
}

/** Options of the LMDB blob store. */
export interface LmdbBlobOptions {
  /**
   * Batches start landing at most once per window (default 20 ms): a synced commit waits for the
   * disk. A put after a quiet spell longer than the window lands at the end of the event loop's turn.
   */
  batchMs?: number;
  /** The clock the window is measured on, ms (default `performance.now`). */
  now?: () => number;
  /** Longest chain of continuations before a blob is stored whole again (default 16). */
  maxChain?: number;
}

/**
 * Blobs in the LMDB `blobs` sub-database. Writes are grouped: one batch lands at a time, at most
 * one starts per window, and every put made meanwhile joins the next, so a busy host pays one
 * synced commit per window, not one per step. A host whose agents wait on their models is not
 * woken for its blobs (each wake-up of an idle node process costs CPU): a put after a quiet spell lands at the end of the event loop's turn, with no timer,
 * and a put never reads LMDB to learn whether its blob is stored (a read arms lmdb's
 * read-transaction reset timer): the batch writes each key only if it is absent.
 *
 * A put with a `delta` whose base is stored keeps only the suffix, under `delta:<digest>`: a
 * turn's prepared requests each repeat the whole history before it, so storing every body whole
 * wrote (and first copied into a buffer) bytes quadratic in the turn's length, and a long
 * turn's late steps paid for it in CPU. Every `maxChain`-th
 * continuation is stored whole, so a read follows at most that many records. A read rebuilds
 * the bytes and checks them against the digest; a blob that cannot be rebuilt reads as missing.
 */
export function createLmdbBlobStore(store: LmdbStore, opts: LmdbBlobOptions = {}): BlobStore {
  const db = store.blobs;
  const batchMs = opts.batchMs ?? 20;
  // when the last batch started landing (the store's creation counts as one)
  const now = opts.now ?? (() => performance.now());
  let lastClose = now();
  const maxChain = opts.maxChain ?? 16;
  // The open batch: writes waiting for the window to close, and the promise their puts return.
  let open: { writes: Map<string, Buffer>; done: Promise<void>; resolve(): void; reject(e: unknown): void } | null = null;
  // Cancels the open batch's armed close (a timer or an immediate); null when none is armed.
  let cancelClose: (() => void) | null = null;
  // Batches being committed, readable until they land.
  const landing = new Set<Map<string, Buffer>>();
  const inFlight = new Set<Promise<void>>();
  // The chain length of blobs this store wrote lately (0: whole), so a continuation need not read its base.
  const chains = new Map<string, number>();

  /**
   * Arms the open batch's close: at the end of the window that started with the last batch, or at
   * the end of this turn of the event loop when that window is over; while a batch is landing,
   * once it has landed.
   */
  const schedule = (): void => {
    if (cancelClose || !open || inFlight.size > 0) return;
    const wait = lastClose + batchMs - now();
    const fire = (): void => void close().catch(() => {});
    if (wait > 0) {
      const timer = setTimeout(fire, wait);
      timer.unref?.();
      cancelClose = () => clearTimeout(timer);
    } else {
      const immediate = setImmediate(fire);
      cancelClose = () => clearImmediate(immediate);
    }
  };

  const close = (): Promise<void> => {
    cancelClose?.();
    cancelClose = null;
    const b = open;
    open = null;
    if (!b) return Promise.resolve();
    lastClose = now();
    if (store.closed) {
      // LMDB throws out of a later event-loop turn (no promise to catch) for a write queued on a closed environment
      for (const key of b.writes.keys()) chains.delete(digestOfDeltaKey(key) ?? key);
      b.reject(new Error('blob not stored: its LMDB store was closed first (the runtime stopped while it was written)'));
      return b.done;
    }
    landing.add(b.writes);
    // ifNoExists: two hosts writing the same content race harmlessly.
    const writing = Promise.all(
      [...b.writes].map(([key, bytes]) => db.ifNoExists(key, () => void db.put(key, bytes))),
    ).then(
      () => b.resolve(),
      (err: unknown) => {
        // not stored after all: a later put of the same content must write it again
        for (const key of b.writes.keys()) chains.delete(digestOfDeltaKey(key) ?? key);
        b.reject(err);
      },
    );
    inFlight.add(writing);
    void writing.finally(() => {
      inFlight.delete(writing);
      landing.delete(b.writes);
      schedule();
    });
    return b.done;
  };

  const waiting = (key: string): Buffer | undefined => {
    const hit = open?.writes.get(key);
    if (hit) return hit;
    for (const writes of landing) {
      const w = writes.get(key);
      if (w) return w;
    }
    return undefined;
  };

  /** The stored record under `key`, waiting or committed (a copy of committed bytes). */
  const record = (key: string): Uint8Array | undefined => waiting(key) ?? db.getBinary(key);

  const stored = (digest: string): boolean =>
    waiting(digest) !== undefined || waiting(deltaKey(digest)) !== undefined || db.doesExist(digest) || db.doesExist(deltaKey(digest));

  /** How many continuations lead from `digest` to a whole blob; undefined when it is not stored. */
  const chainOf = (digest: string): number | undefined => {
    const known = chains.get(digest);
    if (known !== undefined) return known;
    if (waiting(digest) || db.doesExist(digest)) return 0;
    const d = record(deltaKey(digest));
    return d ? decodeDelta(d)?.header.chain : undefined;
  };

  const remember = (digest: string, chain: number): void => {
    if (chains.size >= 4096) chains.clear();
    chains.set(digest, chain);
  };

  /** The bytes of a blob, rebuilt from its continuations when it was stored as one; not checked. */
  const rebuild = (digest: string, hops: number): Buffer | undefined => {
    const whole = record(digest);
    if (whole) return Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength);
    const d = record(deltaKey(digest));
    const parsed = d && hops <= maxChain ? decodeDelta(d) : undefined;
    if (!parsed) return undefined;
    const base = rebuild(parsed.header.base, hops + 1);
    return base ? applyDelta(base, parsed) : undefined;
  };

  const get = async (digest: string): Promise<Uint8Array | undefined> => {
    const w = waiting(digest);
    if (w) return Buffer.from(w);
    // getBinary copies out of LMDB's memory map (getBinaryFast would not): the caller may keep it
    const whole = db.getBinary(digest);
    if (whole) return whole;
    const bytes = rebuild(digest, 0);
    // a continuation is trusted only once its bytes are the digest's
    return bytes && sha256Digest(bytes) === digest ? bytes : undefined;
  };

  const enqueue = (key: string, bytes: Buffer): Promise<void> => {
    if (!open) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const done = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      open = { writes: new Map(), done, resolve, reject };
      schedule();
    }
    open.writes.set(key, bytes);
    return open.done;
  };

  return {
    async put(content, known, delta) {
      const digest = known ?? sha256Digest(content);
      if (open?.writes.has(digest) || open?.writes.has(deltaKey(digest))) return open.done.then(() => digest);
      // written lately by this store (or landing): nothing to do; else the batch writes it only if absent
      if (chains.has(digest) || waiting(digest) !== undefined || waiting(deltaKey(digest)) !== undefined) return digest;
      const baseChain = delta ? chainOf(delta.base) : undefined;
      if (delta && baseChain !== undefined && baseChain + 1 < maxChain) {
        remember(digest, baseChain + 1);
        return enqueue(deltaKey(digest), encodeDelta({ base: delta.base, bytes: delta.bytes, chain: baseChain + 1 }, delta.suffix))
          .then(() => digest);
      }
      remember(digest, 0);
      return enqueue(digest, typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content)).then(() => digest);
    },
    get,
    async getText(digest) {
      const v = await get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      return stored(digest);
    },
    async flush() {
      await close().catch(() => {});
      await Promise.all(inFlight);
    },
  };
}
