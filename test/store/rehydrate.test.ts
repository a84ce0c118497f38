import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import type { Bus } from '../../src/bus/connection.js';
import { commitMsgId, logSubject } from '../../src/bus/subjects.js';
import { draft, EVENT_VERSION, type ActorEvent, type EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createJetStreamLog, createLogReader } from '../../src/store/jetstream-log.js';
import { openLmdbStore, type LmdbStore } from '../../src/store/lmdb-store.js';
import type { LogReader } from '../../src/store/log-port.js';
import { rehydrate, type RehydrateOptions } from '../../src/store/rehydrate.js';
import { createLmdbSnapshots, type SnapshotStore } from '../../src/store/snapshots.js';
import { tempDir } from '../helpers/nats.js';
import { useTestBus } from '../helpers/test-bus.js';

/** A simple fold: counts per type, the last seq, and the order of seqs seen. */
interface Counts { types: Record<string, number>; lastSeq: number; seqs: number[] }
const initial = (): Counts => ({ types: {}, lastSeq: 0, seqs: [] });
const fold = (s: Counts, e: ActorEvent): Counts => ({
  types: { ...s.types, [e.type]: (s.types[e.type] ?? 0) + 1 },
  lastSeq: e.seq,
  seqs: [...s.seqs, e.seq],
});
const SCHEMA = 1;

const say = (content: string): EventDraft => draft('user/message', { messageId: newId('message'), content });
const stop = (): EventDraft => draft('actor/stopped', { reason: 'r' });

describe('rehydrate', () => {
  // a real server: the gap test writes the stream directly, as no log writer would
  const nats = useTestBus();
  let bus: Bus;
  let reader: LogReader;
  let dir: string;
  let lmdb: LmdbStore;
  let snapshots: SnapshotStore;
  const root = newId('agent');

  beforeAll(async () => {
    bus = nats.bus;
    reader = createLogReader({ js: bus.js, jsm: bus.jsm });
    dir = await tempDir('rehydrate');
    lmdb = openLmdbStore(dir);
    snapshots = createLmdbSnapshots(lmdb);
  });
  afterAll(async () => {
    await lmdb?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const opts = (actorId: string, over: Partial<RehydrateOptions<Counts>> = {}): RehydrateOptions<Counts> => ({
    reader, snapshots, rootId: root, actorId, schemaVersion: SCHEMA, initial,
    restore: (p) => structuredClone(p) as Counts, fold, ...over,
  });

  /** Commits 3 commits (seqs 1-2, 3-5, 6-7) and returns the writer. */
  async function seed(actorId: string) {
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 0 });
    const positions = [];
    await log.commit([say('a'), say('b')]);
    positions.push(log.position());
    await log.commit([say('c'), stop(), say('d')]);
    positions.push(log.position());
    await log.commit([say('e'), stop()]);
    positions.push(log.position());
    return { log, positions };
  }

  it('snapshot + tail equals a full replay', async () => {
    const actor = newId('agent');
    const { log, positions } = await seed(actor);
    const full = await rehydrate(opts(actor));
    expect(full.snapshotSeq).toBe(0);
    expect(full.machines).toBeNull();
    expect(full.tail.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(full.state).toEqual({ types: { 'user/message': 5, 'actor/stopped': 2 }, lastSeq: 7, seqs: [1, 2, 3, 4, 5, 6, 7] });
    expect(full.position).toEqual(log.position());

    // a snapshot at a commit boundary (seq 5)
    let snapState = initial();
    for (const e of full.tail.slice(0, 5)) snapState = fold(snapState, e);
    await snapshots.save({
      schemaVersion: SCHEMA, actorId: actor, rootId: root, seq: 5, streamSeq: positions[1]!.streamSeq,
      projection: snapState, machines: { m: 'snap' }, savedAt: new Date().toISOString(),
    });
    const fromSnap = await rehydrate(opts(actor));
    expect(fromSnap.snapshotSeq).toBe(5);
    expect(fromSnap.machines).toEqual({ m: 'snap' });
    expect(fromSnap.tail.map((e) => e.seq)).toEqual([6, 7]);
    expect(fromSnap.state).toEqual(full.state);
    expect(fromSnap.position).toEqual(full.position);

    // a snapshot in the middle of a commit (seq 4 of the commit holding 3-5)
    let mid = initial();
    for (const e of full.tail.slice(0, 4)) mid = fold(mid, e);
    await snapshots.save({
      schemaVersion: SCHEMA, actorId: actor, rootId: root, seq: 4, streamSeq: positions[1]!.streamSeq,
      projection: mid, machines: null, savedAt: new Date().toISOString(),
    });
    const fromMid = await rehydrate(opts(actor));
    expect(fromMid.tail.map((e) => e.seq)).toEqual([5, 6, 7]);
    expect(fromMid.state).toEqual(full.state);

    // a snapshot at the end: no tail, position from the log end
    await snapshots.save({
      schemaVersion: SCHEMA, actorId: actor, rootId: root, seq: 7, streamSeq: positions[2]!.streamSeq,
      projection: full.state, machines: null, savedAt: new Date().toISOString(),
    });
    const atEnd = await rehydrate(opts(actor));
    expect(atEnd.tail).toEqual([]);
    expect(atEnd.state).toEqual(full.state);
    expect(atEnd.position).toEqual(full.position);
  });

  it('ignores a snapshot ahead of the log, or of another schema version', async () => {
    const actor = newId('agent');
    await seed(actor);
    const full = await rehydrate(opts(actor));
    const bogus = { types: { bogus: 1 }, lastSeq: 99, seqs: [99] };
    await snapshots.save({
      schemaVersion: SCHEMA, actorId: actor, rootId: root, seq: 99, streamSeq: 9_999,
      projection: bogus, machines: { ahead: true }, savedAt: new Date().toISOString(),
    });
    const r1 = await rehydrate(opts(actor));
    expect(r1.snapshotSeq).toBe(0);
    expect(r1.machines).toBeNull();
    expect(r1.state).toEqual(full.state);

    await snapshots.save({
      schemaVersion: SCHEMA + 1, actorId: actor, rootId: root, seq: 3, streamSeq: 1,
      projection: bogus, machines: null, savedAt: new Date().toISOString(),
    });
    const r2 = await rehydrate(opts(actor));
    expect(r2.snapshotSeq).toBe(0);
    expect(r2.state).toEqual(full.state);
  });

  it('rehydrates an empty log to the initial state', async () => {
    const r = await rehydrate(opts(newId('agent')));
    expect(r).toEqual({ state: initial(), machines: null, position: { seq: 0, streamSeq: 0 }, snapshotSeq: 0, tail: [] });
  });

  it('refuses a gap, naming the expected and found seq', async () => {
    const actor = newId('agent');
    const subject = logSubject(root, actor);
    const ev = (seq: number) => ({
      v: EVENT_VERSION, seq, id: newId('event'), at: new Date().toISOString(), epoch: 0, actor,
      type: 'actor/stopped', data: { reason: `e${seq}` },
    });
    // written by hand: the writer can never produce this
    const a = await bus.js.publish(subject, JSON.stringify({ events: [ev(1), ev(2)] }), { msgID: commitMsgId(actor, 1) });
    await bus.js.publish(subject, JSON.stringify({ events: [ev(4)] }), {
      msgID: commitMsgId(actor, 4), expect: { lastSubjectSequence: a.seq },
    });
    await expect(rehydrate(opts(actor))).rejects.toMatchObject({
      code: 'store.gap', message: expect.stringMatching(/expected seq 3, found 4/),
    });
    // also from a snapshot before the gap
    await snapshots.save({
      schemaVersion: SCHEMA, actorId: actor, rootId: root, seq: 1, streamSeq: a.seq,
      projection: initial(), machines: null, savedAt: new Date().toISOString(),
    });
    await expect(rehydrate(opts(actor))).rejects.toMatchObject({ code: 'store.gap' });
  });
});
