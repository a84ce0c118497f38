import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { ensureBlobBucket, type BlobBucket } from '../../src/bus/blob-bucket.js';
import { createLogPublisher } from '../../src/bus/log-publisher.js';
import { createObjectBlobStore, type ObjectBlobOptions, type ObjectBlobStore } from '../../src/store/object-blobs.js';

/** A connection to a test server with the blob bucket open, as a host's bus has it. */
export interface BlobBus {
  nc: NatsConnection;
  bucket: BlobBucket;
  /** An Object Store blob store on this connection (the bus's log publisher writes it, as in a host). */
  store(opts?: Partial<ObjectBlobOptions>): ObjectBlobStore;
  close(): Promise<void>;
}

/** Connects to `url` and opens (or makes) the blob bucket. */
export async function openBlobBus(url: string, login: { user: string; pass: string } | Record<string, never> = {}): Promise<BlobBus> {
  // reconnecting as a host's bus does: a restarted server is found again at once
  const nc = await connect({ servers: url, ...login, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const bucket = await ensureBlobBucket(js);
  const publish = createLogPublisher(nc, js).publish;
  return {
    nc,
    bucket,
    store: (opts = {}) => createObjectBlobStore({ publish, jsm, ...opts }),
    close: () => nc.close(),
  };
}
