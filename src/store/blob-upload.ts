import type { Logger } from 'pino';
import { z } from 'zod';
import { blobMetaSubject } from '../bus/subjects.js';
import type { LmdbStore } from './lmdb-store.js';
import type { ObjectBlobStore } from './object-blobs.js';

/** Options of `uploadLmdbBlobs`. */
export interface BlobUploadOptions {
  lmdb: LmdbStore;
  durable: Pick<ObjectBlobStore, 'putRecord' | 'metaSubjects'>;
  /** Which bucket this is (its stream's creation time, `BlobBucket.created`): the marker names it. */
  bucket: string;
  logger: Logger;
  /** Stops the upload between records; it is not marked done and runs again on the next open. */
  signal?: AbortSignal;
  /** Records written at once (default 8). */
  concurrency?: number;
}

/** What an upload did. */
export interface BlobUploadResult {
  /** True when the marker said this bucket already has every blob of this LMDB. */
  skipped: boolean;
  /** Records written to the bucket. */
  uploaded: number;
  /** Records the bucket already held. */
  present: number;
}

/** Where the upload's marker lives in the LMDB `index` database. */
export const BLOB_UPLOAD_MARKER = 'blobs:uploaded';

const MarkerSchema = z.object({ v: z.literal(1), bucket: z.string(), records: z.number().int().nonnegative(), at: z.string() });

/**
 * Uploads what an LMDB blob store holds (whole blobs and `delta:` records, as they are) to the
 * Object Store bucket, once: data dirs written before blobs lived on the bus keep their logs
 * readable from any host. A marker in LMDB names the bucket it was done for, so later opens skip
 * it at the cost of one local read, and a bucket made again (another server) gets everything
 * again. An interrupted upload writes no marker and starts over on the next open, skipping what
 * the bucket holds; two processes running it at once each write what they find missing, and the
 * bucket keeps one object per name.
 */
export async function uploadLmdbBlobs(opts: BlobUploadOptions): Promise<BlobUploadResult> {
  const { lmdb, durable, logger } = opts;
  const marker = MarkerSchema.safeParse(lmdb.index.get(BLOB_UPLOAD_MARKER));
  if (marker.success && marker.data.bucket === opts.bucket) return { skipped: true, uploaded: 0, present: 0 };
  const inBucket = await durable.metaSubjects();
  const keys: string[] = [];
  for (const key of lmdb.blobs.getKeys()) {
    if (typeof key === 'string' && (key.startsWith('sha256:') || key.startsWith('delta:'))) keys.push(key);
  }
  let uploaded = 0;
  let present = 0;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < keys.length && !opts.signal?.aborted) {
      const key = keys[next++]!;
      if (inBucket.has(blobMetaSubject(key))) {
        present++;
        continue;
      }
      // a copy: the record is sent after this read's transaction is gone
      const bytes = lmdb.blobs.getBinary(key);
      if (!bytes) continue;
      if ((await durable.putRecord(key, bytes)) === 'written') uploaded++;
      else present++;
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 8 }, worker));
  if (opts.signal?.aborted) return { skipped: false, uploaded, present };
  await lmdb.index.put(BLOB_UPLOAD_MARKER, { v: 1, bucket: opts.bucket, records: keys.length, at: new Date().toISOString() });
  const line = `uploaded ${uploaded} blob record${uploaded === 1 ? '' : 's'} of this data dir's LMDB to the Object Store (${present} were there already)`;
  if (uploaded > 0) logger.info({ uploaded, present }, line);
  else logger.debug({ uploaded, present }, line);
  return { skipped: false, uploaded, present };
}
