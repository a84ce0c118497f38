import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { SNAPSHOT_BYTES_PER_EVENT, snapshotDue } from '../../src/actors/agent/commit-batch.js';
import { emptyProjection, foldEvent, PROJECTION_VERSION, type Projection } from '../../src/store/projection.js';
import { rehydrate } from '../../src/store/rehydrate.js';
import type { Snapshot } from '../../src/store/snapshots.js';
import { readLog, runTurn, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { message, only, ofType, replay, startTurn, waitForLog, actorTestWorld } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

const read = (n: number): ScriptResponse[] =>
  Array.from({ length: n }, (_, i) => ({ tool_calls: [{ id: `r${i}`, name: 'read_file', arguments: { path: 'src/a.txt' } }] }));

/** Waits until the (asynchronous) snapshot saves of an actor that no longer commits have landed. */
async function snapshotOf(rt: TestRuntime, actorId: string): Promise<Snapshot> {
  let last: Snapshot | undefined;
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const snap = await rt.snapshots.load(actorId);
    // settled: the same snapshot twice in a row
    if (snap && last && snap.seq === last.seq) return snap;
    last = snap;
  }
  throw new Error(`no snapshot of ${actorId} settled`);
}

/** Rehydrates as the supervisor does, to see which snapshot and tail it used. */
function rehydrateDirect(sup: Supervisor, rt: TestRuntime, rootId: string, actorId: string) {
  return rehydrate<Projection>({
    reader: sup.reader, snapshots: rt.snapshots, rootId, actorId, schemaVersion: PROJECTION_VERSION,
    initial: () => emptyProjection(actorId), restore: (p) => p as Projection, fold: foldEvent,
    logger: pino({ level: 'silent' }),
  });
}

function expectClean(log: ActorEvent[]): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
}

describe('snapshots', () => {
  it('rehydrates from snapshot + tail to the projection of a full replay, and without the snapshot too', async () => {
    const rt = await rts.open({ script: [...read(4), { content: 'read four times' }, { content: 'second answer' }] });
    const first = rt.supervisor({ snapshotEvery: 5 });
    const { actor: ran, ended } = await runTurn(first, 'read a.txt four times', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    await ran.idle();
    const log = await readLog(first, ran.rootId, ran.actorId);
    const snap = await snapshotOf(rt, ran.actorId);
    expect(snap).toMatchObject({ schemaVersion: PROJECTION_VERSION, actorId: ran.actorId, rootId: ran.rootId });
    expect(snap.seq).toBeGreaterThanOrEqual(5);
    expect(snap.seq).toBeLessThanOrEqual(log.length);
    // the snapshot's projection is the fold of the log up to its seq
    expect(snap.projection).toEqual(replay(ran.actorId, log.slice(0, snap.seq)));
    await first.stop();

    const full = replay(ran.actorId, log);
    const sup = rt.supervisor({ snapshotEvery: 5 });
    const direct = await rehydrateDirect(sup, rt, ran.rootId, ran.actorId);
    expect(direct.snapshotSeq).toBe(snap.seq);
    expect(direct.tail.map((e) => e.seq)).toEqual(log.slice(snap.seq).map((e) => e.seq));
    expect(direct.state).toEqual(full);

    const { actor, recovered } = await sup.hydrate(ran.actorId);
    expect(recovered).toBe(false);
    expect(actor.projection).toEqual(full);
    await sup.stop();

    await rt.snapshots.delete(ran.actorId);
    expect(await rt.snapshots.load(ran.actorId)).toBeUndefined();
    const bare = rt.supervisor({ snapshotEvery: 1000 });
    const again = await bare.hydrate(ran.actorId);
    expect(again.recovered).toBe(false);
    expect(again.actor.projection).toEqual(full);
    // nothing was written by rehydrating a quiet actor
    expect(await readLog(bare, ran.rootId, ran.actorId)).toHaveLength(log.length);

    // and the rehydrated agent takes its next turn from its inbox
    const next = again.actor.whenTurnEnds();
    await bare.send(message(ran.actorId, 'and again?'));
    expect(await next).toMatchObject({ outcome: 'completed', answer: 'second answer' });
    const after = await readLog(bare, ran.rootId, ran.actorId);
    expect(ofType(after, 'turn/end')).toHaveLength(2);
    expectClean(after);
  });

  it.each([
    ['from its snapshot', false],
    ['with its snapshot deleted', true],
  ])('recovers a turn dropped mid-way %s', async (_, deleteSnapshot) => {
    const rt = await rts.open({ script: [...read(4), { content: 'read four times' }] });
    const first = rt.supervisor({ snapshotEvery: 5, faults: createFaultInjector(parseFaultSpecs('after:tool/start@3=drop')) });
    const { actor: ran, ended } = await startTurn(first, 'read a.txt four times', turnRequest(world.ws));
    await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
    const snap = await snapshotOf(rt, ran.actorId);
    const before = await readLog(first, ran.rootId, ran.actorId);
    expect(snap.seq).toBeGreaterThan(0);
    if (deleteSnapshot) await rt.snapshots.delete(ran.actorId);

    const sup = rt.supervisor({ snapshotEvery: 5 });
    let done: Promise<TurnEnded> | null = null;
    const { actor, recovered } = await sup.hydrate(ran.actorId, (a) => {
      // rebuilt from what was stored, before any recovery event is staged
      expect(a.projection).toEqual(replay(ran.actorId, before));
      done = a.whenTurnEnds();
    });
    expect(recovered).toBe(true);
    expect(await done!).toMatchObject({ outcome: 'completed', answer: 'read four times' });
    const log = await waitForLog(sup, actor, (l) => l.some((e) => e.type === 'turn/end'));
    const usedSeq = deleteSnapshot ? 0 : snap.seq;
    expect(only(log, 'actor/rehydrated').data).toEqual({ snapshotSeq: usedSeq, tailEvents: before.length - usedSeq });
    expect(ofType(log, 'tool/start').map((s) => s.data.rerun)).toEqual([false, false, false, true, false]);
    expect(ofType(log, 'tool/result')).toHaveLength(4);
    expect(only(log, 'turn/end').data).toMatchObject({ steps: 5, toolCalls: 4 });
    expectClean(log);
    expect(actor.projection).toEqual(replay(ran.actorId, log));
  });

  it('is due every N events, and never sooner than one event per 2 KB of the last prepared request', () => {
    const sized = (bytes: number | null) => ({ lastPrepared: bytes === null ? null : { digest: 'sha256:x', bytes } });
    expect(snapshotDue(64, 0, 64, sized(null))).toBe(true);
    expect(snapshotDue(63, 0, 64, sized(null))).toBe(false);
    // a request of 100 KB: small items, however many, make a small snapshot
    expect(snapshotDue(164, 100, 64, sized(100 * 1024))).toBe(true);
    // a request of 1 MB: one snapshot per 512 events
    expect(snapshotDue(611, 100, 64, sized(1024 * 1024))).toBe(false);
    expect(snapshotDue(612, 100, 64, sized(1024 * 1024))).toBe(true);
  });

  it('spaces the snapshots of a long turn by its request\'s size, and rehydrates from the last one', async () => {
    // 3 KB a read: from the third step the request is past 4 events' worth of bytes
    await writeFile(join(world.ws, 'src', 'big.txt'), `${'x'.repeat(60)}\n`.repeat(50));
    const rt = await rts.open({
      script: [
        ...Array.from({ length: 14 }, (_, i) => ({ tool_calls: [{ id: `b${i}`, name: 'read_file', arguments: { path: 'src/big.txt' } }] })),
        { content: 'read fourteen times' },
      ],
    });
    const saved: Snapshot[] = [];
    // the actor saves in the background (a snapshot is a cache): the test waits for the writes
    const writes: Array<Promise<void>> = [];
    const recording = {
      load: (id: string) => rt.snapshots.load(id),
      delete: (id: string) => rt.snapshots.delete(id),
      save: (snap: Snapshot) => {
        saved.push(structuredClone(snap));
        const write = rt.snapshots.save(snap);
        writes.push(write);
        return write;
      },
    };
    const sup = rt.supervisor({ snapshotEvery: 4, extra: { snapshots: recording } });
    const { actor, ended } = await runTurn(sup, 'read a.txt fourteen times', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    await actor.idle();
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(saved.length).toBeGreaterThanOrEqual(3);
    let last = 0;
    let spacedBySize = 0;
    for (const snap of saved) {
      // the request grows past 4 events' worth of bytes early: from then on the spacing follows it
      const bytes = (snap.projection as Projection).lastPrepared?.bytes ?? 0;
      const wanted = Math.max(4, Math.ceil(bytes / SNAPSHOT_BYTES_PER_EVENT));
      expect(snap.seq - last).toBeGreaterThanOrEqual(wanted);
      if (wanted > 4) spacedBySize += 1;
      expect(snap.projection).toEqual(replay(actor.actorId, log.slice(0, snap.seq)));
      last = snap.seq;
    }
    expect(spacedBySize).toBeGreaterThanOrEqual(1);
    expect((saved.at(-1)!.projection as Projection).history.length).toBeGreaterThan(20);
    await sup.stop();
    await Promise.all(writes);
    const again = rt.supervisor({ snapshotEvery: 4 });
    const direct = await rehydrateDirect(again, rt, actor.rootId, actor.actorId);
    expect(direct.snapshotSeq).toBe(saved.at(-1)!.seq);
    expect(direct.state).toEqual(replay(actor.actorId, log));
    await again.stop();
  });
});
