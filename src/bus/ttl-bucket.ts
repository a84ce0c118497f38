import { StorageType } from '@nats-io/jetstream';
import { Bucket, type Kvm, type KV } from '@nats-io/kv';
import { nanos } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';

/**
 * Creates (or opens) a KV bucket whose keys live `ttlMs` unless rewritten: history 1 and bucket
 * max age = `ttlMs` (nats-server 2.9 has no per-key TTL, so a bucket-wide max age stands in for
 * it). An existing bucket with another TTL is updated: the deployment's TTL wins, and all hosts of
 * one deployment must use the same TTL or they will keep rewriting it. A new bucket gets `replicas` copies.
 */
export async function ensureTtlBucket(
  kvm: Kvm, bucket: string, ttlMs: number, errorCode: string, logger: Logger = pino({ level: 'silent' }), replicas = 1,
): Promise<KV> {
  // history 1: only the current value matters, and an old one must not outlive a rewrite.
  // Kvm.create opens the bucket unchanged when it exists, so the TTL (a bucket property fixed at
  // creation) is compared below. `replicas` counts only when the bucket is made (`ensureStreams` scales).
  const kv = await kvm.create(bucket, { history: 1, storage: StorageType.File, ttl: ttlMs, replicas });
  const status = await kv.status();
  const config = status.streamInfo.config;
  if (config.max_age === nanos(ttlMs) && config.max_msgs_per_subject === 1) return kv;
  logger.info({ bucket, from: status.ttl, to: ttlMs }, 'bucket TTL differs; updating');
  try {
    const jsm = await kvm.js.jetstreamManager();
    // the server refuses a duplicate window longer than max_age, so shrink it along with the TTL
    const duplicateWindow = Math.min(config.duplicate_window, nanos(ttlMs));
    await jsm.streams.update(config.name, {
      ...config, max_age: nanos(ttlMs), max_msgs_per_subject: 1, duplicate_window: duplicateWindow,
    });
  } catch (err) {
    throw new BusError(errorCode, `cannot update the ${bucket} bucket TTL: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err, retryable: true });
  }
  return kv;
}

/**
 * The keys of a bucket, from one stream-info request with a subjects filter (a key whose last
 * write is a delete is listed too: reading it says so). Not `kv.keys()`: its ordered consumer ends
 * once it has seen as many messages as were pending, and in a bucket whose keys are rewritten
 * every few hundred milliseconds (lease renewals, host announcements) it kept receiving the
 * rewrites and never ended (nats.js 3.4, nats-server 2.9.10: measured, about one call in a hundred).
 */
export async function bucketKeys(kv: KV): Promise<string[]> {
  if (!(kv instanceof Bucket)) {
    const keys: string[] = [];
    for await (const k of await kv.keys()) keys.push(k);
    return keys;
  }
  const prefix = `${kv.prefix}.`;
  const info = await kv.jsm.streams.info(kv.stream, { subjects_filter: `${prefix}>` });
  return Object.keys(info.state.subjects ?? {}).map((s) => s.slice(prefix.length));
}
