import { StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { BusError } from '../protocol/errors.js';
import { BLOB_BUCKET, BLOB_STREAM } from './subjects.js';

/** Options of `ensureBlobBucket`. */
export interface BlobBucketOptions {
  /** Copies of the bucket's stream the servers keep (1; 3 on a cluster). Only a bucket made here takes it. */
  replicas?: number;
}

/** The blob bucket as opened: the library's handle and when its stream was made (which bucket this is). */
export interface BlobBucket {
  store: ObjectStore;
  /** The stream's creation time: a bucket made again (a new server, a deleted stream) has another. */
  created: string;
}

// One opening per JetStream client (a bus has one): every store and the upload of a process share it.
const opened = new WeakMap<JetStreamClient, Promise<BlobBucket>>();

/**
 * Opens the Object Store bucket of blobs (design §4), making it when it does not exist: file
 * storage, `replicas` copies. Opened once per JetStream client; a failed opening is tried again by the
 * next call.
 */
export function ensureBlobBucket(js: JetStreamClient, opts: BlobBucketOptions = {}): Promise<BlobBucket> {
  const known = opened.get(js);
  if (known) return known;
  const opening = (async (): Promise<BlobBucket> => {
    try {
      const store = await new Objm(js).create(BLOB_BUCKET, { storage: StorageType.File, replicas: opts.replicas ?? 1 });
      const status = await store.status();
      return { store, created: status.streamInfo.created };
    } catch (err) {
      throw new BusError('bus.blob_bucket_unavailable', `cannot open the blob bucket (stream ${BLOB_STREAM}): ${(err as Error).message}`, {
        cause: err,
        retryable: true,
        hint: 'the host login must be allowed the JetStream API and $O.blobs.>; check the server has JetStream storage left',
      });
    }
  })();
  opened.set(js, opening);
  opening.catch(() => {
    if (opened.get(js) === opening) opened.delete(js);
  });
  return opening;
}
