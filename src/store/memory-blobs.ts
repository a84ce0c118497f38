import { sha256Digest } from '../protocol/canonical-json.js';
import type { BlobStore } from './blob-port.js';

/**
 * Blobs in this process's memory, content-addressed like the LMDB store: for embedders and tests
 * that run with no LMDB. Gone with the process, as the in-memory logs are.
 */
export function createMemoryBlobStore(): BlobStore & { size(): number } {
  const blobs = new Map<string, Uint8Array>();
  return {
    async put(content, digest) {
      const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
      const key = digest ?? sha256Digest(bytes);
      if (!blobs.has(key)) blobs.set(key, Uint8Array.from(bytes));
      return key;
    },
    async get(digest) {
      return blobs.get(digest);
    },
    async getText(digest) {
      const v = blobs.get(digest);
      return v === undefined ? undefined : Buffer.from(v).toString('utf8');
    },
    async has(digest) {
      return blobs.has(digest);
    },
    async flush() {},
    size: () => blobs.size,
  };
}
