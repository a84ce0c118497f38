import { sha256Digest } from '../protocol/canonical-json.js';
import { durable, type LmdbStore } from './lmdb-store.js';

/** Content-addressed blobs (prepared requests, artifacts, ...) named `sha256:<hex>` (design §4). */
export interface BlobStore {
  /** Stores content and returns its digest; storing existing content is a no-op. Durable on resolve. */
  put(content: string | Uint8Array): Promise<string>;
  /** The bytes of a blob, or undefined. */
  get(digest: string): Promise<Uint8Array | undefined>;
  /** A blob decoded as UTF-8, or undefined. */
  getText(digest: string): Promise<string | undefined>;
  /** True when the blob is stored. */
  has(digest: string): Promise<boolean>;
}

/** Blobs in the LMDB `blobs` sub-database. */
export function createLmdbBlobStore(store: LmdbStore): BlobStore {
  const db = store.blobs;
  const get = async (digest: string): Promise<Uint8Array | undefined> => {
    // getBinary copies out of LMDB's memory map (getBinaryFast would not): the caller may keep it
    return db.getBinary(digest);
  };
  return {
    async put(content) {
      const digest = sha256Digest(content);
      if (db.doesExist(digest)) return digest;
      const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
      // ifNoExists: two writers of the same content race harmlessly
      await durable(db.ifNoExists(digest, () => { db.put(digest, bytes); }), db);
      return digest;
    },
    get,
    async getText(digest) {
      const v = await get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      return db.doesExist(digest);
    },
  };
}
