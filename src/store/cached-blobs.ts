import type { Logger } from 'pino';
import { sha256Digest } from '../protocol/canonical-json.js';
import { applyDelta } from './blob-delta-record.js';
import type { BlobStore } from './blob-port.js';
import type { ObjectBlobStore } from './object-blobs.js';

/** The parts of the layered store. */
export interface CachedBlobOptions {
  /** Where blobs live for good, shared by every host: the Object Store. */
  durable: Pick<ObjectBlobStore, 'put' | 'has' | 'flush' | 'record'>;
  /** This host's copy: the LMDB store. */
  cache: BlobStore;
  logger?: Logger;
}

// Reads follow a chain this long at most: a cycle of continuations reads as missing.
const MAX_HOPS = 64;

/**
 * Blobs in the durable store with a read-through cache in front (design §4): the Object Store
 * every host shares, and this host's LMDB. A put writes both and resolves once the durable write
 * is acked, so a commit that names the blob may follow; the cache's write is not waited for (its
 * batch window stays off the step's path), yet serves the blob at once from its open batch. A
 * read takes the cache's copy, else rebuilds the blob from the durable store, checks it against
 * its digest, and fills the cache: a continuation's base is read through the cache too, so a
 * host that holds the base reads only what the continuation adds.
 */
export function createCachedBlobStore(opts: CachedBlobOptions): BlobStore & { readonly shared: true } {
  const { durable, cache, logger } = opts;

  const fill = (bytes: string | Uint8Array, digest: string, delta?: Parameters<BlobStore['put']>[2]): void => {
    cache.put(bytes, digest, delta).catch((err: unknown) => logger?.warn({ err, digest }, 'blob not copied into the LMDB cache'));
  };

  const read = async (digest: string, hops: number): Promise<Uint8Array | undefined> => {
    const hit = await cache.get(digest);
    if (hit) return hit;
    const r = await durable.record(digest);
    if (!r) return undefined;
    if ('whole' in r) {
      if (sha256Digest(r.whole) !== digest) return undefined;
      fill(r.whole, digest);
      return r.whole;
    }
    const { header, suffix } = r.delta;
    const base = hops < MAX_HOPS ? await read(header.base, hops + 1) : undefined;
    const bytes = base ? applyDelta(base, r.delta) : undefined;
    if (!bytes || sha256Digest(bytes) !== digest) return undefined;
    fill(bytes, digest, { base: header.base, bytes: header.bytes, suffix });
    return bytes;
  };

  const get = (digest: string): Promise<Uint8Array | undefined> => read(digest, 0);

  return {
    shared: true,
    put(content, known, delta) {
      const digest = known ?? sha256Digest(content);
      fill(content, digest, delta);
      return durable.put(content, digest, delta);
    },
    get,
    async getText(digest) {
      const v = await get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      return (await cache.has(digest)) || durable.has(digest);
    },
    async flush() {
      await Promise.all([cache.flush(), durable.flush()]);
    },
  };
}
