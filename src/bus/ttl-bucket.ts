import { StorageType } from '@nats-io/jetstream';
import type { Kvm, KV } from '@nats-io/kv';
import { nanos } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';

/**
 * Creates (or opens) a KV bucket whose keys live `ttlMs` unless rewritten: history 1 and bucket
 * max age = `ttlMs` (nats-server 2.9 has no per-key TTL, so a bucket-wide max age stands in for
 * it). An existing bucket with another TTL is updated: the deployment's TTL wins, and all hosts of
 * one deployment must use the same TTL or they will keep rewriting it.
 */
export async function ensureTtlBucket(
  kvm: Kvm, bucket: string, ttlMs: number, errorCode: string, logger: Logger = pino({ level: 'silent' }),
): Promise<KV> {
  // history 1: only the current value matters, and an old one must not outlive a rewrite.
  // Kvm.create opens the bucket unchanged when it exists, so the TTL (a bucket property fixed at
  // creation) is compared below.
  const kv = await kvm.create(bucket, { history: 1, storage: StorageType.File, ttl: ttlMs });
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
