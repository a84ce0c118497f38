import { describe, expect, it } from 'vitest';
import type { Snapshot, SnapshotStore } from '../../src/store/snapshots.js';

/** A store for one test, and what the contract may do to it beyond the port. */
export interface SnapshotSubject {
  snapshots: SnapshotStore;
  /** The store as a new process opens it, after every handle of this one closed: what a resolved `save` promised to keep. */
  reopen(): Promise<SnapshotStore>;
  /** Writes a value that is not a snapshot under `actorId`, as a damaged or foreign record would be. */
  corrupt(actorId: string): Promise<void>;
  close(): Promise<void>;
}

/** A snapshot of `actorId` at `seq`, with nested projection and machine state to round-trip. */
function snapshotOf(actorId: string, seq: number, extra: Partial<Snapshot> = {}): Snapshot {
  return {
    schemaVersion: 3,
    actorId,
    rootId: 'agt_root',
    seq,
    streamSeq: seq * 10,
    projection: { history: [{ role: 'user', content: `héllo ${seq}` }], counts: { 'tool/call': seq }, open: null, flags: [true, false] },
    machines: { agent: { value: { running: 'step' }, context: { step: seq } }, calls: {} },
    savedAt: '2025-01-01T00:00:00.000Z',
    ...extra,
  };
}

/**
 * What every `SnapshotStore` must do: one snapshot per actor, the last saved replacing the one
 * before whatever its seq (the store keeps, `rehydrate` judges), each actor's apart from every
 * other's, the snapshot encoded before `save` returns (the caller goes on changing the live
 * projection), a delete that forgets only that actor, nothing saved or a stored value that is
 * not a snapshot read as a miss, and a resolved save kept across a reopen.
 */
export function snapshotContract(name: string, open: () => Promise<SnapshotSubject>): void {
  describe(`SnapshotStore contract: ${name}`, () => {
    const withStore = async (f: (s: SnapshotSubject) => Promise<void>): Promise<void> => {
      const s = await open();
      try {
        await f(s);
      } finally {
        await s.close();
      }
    };

    it('reads an actor it never saved as a miss', () => withStore(async ({ snapshots }) => {
      expect(await snapshots.load('agt_never')).toBeUndefined();
    }));

    it('loads what it saved, field for field', () => withStore(async ({ snapshots }) => {
      const snap = snapshotOf('agt_A', 7);
      await snapshots.save(snap);
      expect(await snapshots.load('agt_A')).toEqual(snapshotOf('agt_A', 7));
    }));

    it('keeps the latest save per actor, whatever its seq', () => withStore(async ({ snapshots }) => {
      await snapshots.save(snapshotOf('agt_A', 7));
      await snapshots.save(snapshotOf('agt_A', 9));
      expect(await snapshots.load('agt_A')).toEqual(snapshotOf('agt_A', 9));
      // an older seq saved last still replaces: which snapshot is usable is rehydrate's to judge
      await snapshots.save(snapshotOf('agt_A', 4, { schemaVersion: 2 }));
      expect(await snapshots.load('agt_A')).toEqual(snapshotOf('agt_A', 4, { schemaVersion: 2 }));
    }));

    it('keeps each actor apart: a save or delete of one leaves the others as they were', () => withStore(async ({ snapshots }) => {
      await snapshots.save(snapshotOf('agt_A', 3));
      await snapshots.save(snapshotOf('agt_B', 5, { rootId: 'agt_A' }));
      await snapshots.save(snapshotOf('agt_A', 6));
      expect(await snapshots.load('agt_B')).toEqual(snapshotOf('agt_B', 5, { rootId: 'agt_A' }));
      await snapshots.delete('agt_A');
      expect(await snapshots.load('agt_A')).toBeUndefined();
      expect(await snapshots.load('agt_B')).toEqual(snapshotOf('agt_B', 5, { rootId: 'agt_A' }));
    }));

    it('forgets a deleted actor, takes a delete of one it never had, and saves again after', () => withStore(async ({ snapshots }) => {
      await snapshots.delete('agt_never');
      await snapshots.save(snapshotOf('agt_A', 2));
      await snapshots.delete('agt_A');
      expect(await snapshots.load('agt_A')).toBeUndefined();
      await snapshots.save(snapshotOf('agt_A', 8));
      expect(await snapshots.load('agt_A')).toEqual(snapshotOf('agt_A', 8));
    }));

    it('encodes a snapshot before save returns: the caller may change the live objects at once', () => withStore(async ({ snapshots }) => {
      const snap = snapshotOf('agt_live', 3);
      const projection = snap.projection as { history: Array<{ role: string; content: string }>; counts: Record<string, number> };
      const saving = snapshots.save(snap);
      projection.history.push({ role: 'assistant', content: 'later' });
      projection.counts['tool/call'] = 99;
      snap.seq = 4;
      await saving;
      expect(await snapshots.load('agt_live')).toEqual(snapshotOf('agt_live', 3));
    }));

    it('reads a stored value that is not a snapshot as a miss, and a later save replaces it', () => withStore(async (s) => {
      await s.corrupt('agt_C');
      expect(await s.snapshots.load('agt_C')).toBeUndefined();
      await s.snapshots.save(snapshotOf('agt_C', 1));
      expect(await s.snapshots.load('agt_C')).toEqual(snapshotOf('agt_C', 1));
    }));

    it('keeps a resolved save and a resolved delete across a reopen', () => withStore(async (s) => {
      await s.snapshots.save(snapshotOf('agt_A', 5));
      await s.snapshots.save(snapshotOf('agt_B', 6));
      await s.snapshots.delete('agt_B');
      const again = await s.reopen();
      expect(await again.load('agt_A')).toEqual(snapshotOf('agt_A', 5));
      expect(await again.load('agt_B')).toBeUndefined();
    }));
  });
}
