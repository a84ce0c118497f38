import { describe, expect, it } from 'vitest';
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { ensureStreams } from '../../src/bus/streams.js';
import { BUCKETS, STREAMS } from '../../src/bus/subjects.js';
import { useTestBus } from '../helpers/test-bus.js';

describe('ensureStreams', () => {
  const t = useTestBus();

  it('creates the streams with the settings of design §6', async () => {
    const logs = (await t.bus.jsm.streams.info(STREAMS.logs)).config;
    expect(logs.subjects).toEqual(['log.>']);
    expect(logs.storage).toBe(StorageType.File);
    expect(logs.retention).toBe(RetentionPolicy.Limits);
    expect(logs.max_age).toBe(0);
    expect(logs.deny_delete).toBe(true);
    expect(logs.deny_purge).toBe(true);
    expect(logs.duplicate_window).toBe(nanos(120_000));

    const inbox = (await t.bus.jsm.streams.info(STREAMS.inbox)).config;
    expect(inbox.subjects).toEqual(['inbox.>']);
    expect(inbox.storage).toBe(StorageType.File);
    expect(inbox.retention).toBe(RetentionPolicy.Limits);
    expect(inbox.discard).toBe(DiscardPolicy.New);
    expect(inbox.duplicate_window).toBe(nanos(600_000));

    const kv = (await t.bus.jsm.streams.info(`KV_${BUCKETS.actors}`)).config;
    expect(kv.max_msgs_per_subject).toBe(1);
    expect(kv.storage).toBe(StorageType.File);
  });

  it('is idempotent, and restores settings that drifted', async () => {
    const before = await t.bus.jsm.streams.info(STREAMS.inbox);
    await ensureStreams(t.bus.jsm);
    await ensureStreams(t.bus.jsm);
    const after = await t.bus.jsm.streams.info(STREAMS.inbox);
    expect(after.created).toBe(before.created);
    expect(after.config).toEqual(before.config);

    await t.bus.jsm.streams.update(STREAMS.inbox, { ...after.config, duplicate_window: nanos(60_000) });
    await ensureStreams(t.bus.jsm);
    expect((await t.bus.jsm.streams.info(STREAMS.inbox)).config.duplicate_window).toBe(nanos(600_000));
  });
});
