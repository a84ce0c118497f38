import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { durable, type LmdbStore } from './lmdb-store.js';

/** A snapshot of one actor: its projection and machine state as of log `seq` (design §4). */
export const SnapshotSchema = z.object({
  schemaVersion: z.number().int().nonnegative(),
  actorId: z.string(),
  rootId: z.string(),
  seq: z.number().int().nonnegative(),
  streamSeq: z.number().int().nonnegative(),
  projection: z.unknown(),
  machines: z.unknown(),
  savedAt: z.string(),
});
/** A snapshot of one actor. */
export type Snapshot = z.infer<typeof SnapshotSchema>;

/** The snapshot port: the latest snapshot per actor. A cache of the log: losing it costs only time. */
export interface SnapshotStore {
  /** The latest snapshot, or undefined (also when the stored one is unreadable). */
  load(actorId: string): Promise<Snapshot | undefined>;
  /**
   * Replaces the actor's snapshot; resolves once it is on disk. The snapshot is encoded before
   * this returns, so the caller may go on changing the objects it names (the live projection).
   */
  save(snapshot: Snapshot): Promise<void>;
  /** Forgets the actor's snapshot. */
  delete(actorId: string): Promise<void>;
}

/** Snapshots in the LMDB `snapshots` sub-database. */
export function createLmdbSnapshots(store: LmdbStore, logger: Logger = pino({ level: 'silent' })): SnapshotStore {
  const db = store.snapshots;
  return {
    async load(actorId) {
      const raw = db.get(actorId);
      if (raw === undefined) return undefined;
      const parsed = SnapshotSchema.safeParse(raw);
      if (!parsed.success) {
        // a cache that cannot be read is a cache miss, not a failure: replay the log instead
        logger.warn({ actorId, issue: parsed.error.issues[0]?.message }, 'unreadable snapshot ignored');
        return undefined;
      }
      return parsed.data;
    },
    async save(snapshot) {
      // lmdb encodes the value inside `put`, before it returns: that is the copy the contract promises
      await durable(db.put(snapshot.actorId, snapshot), db);
    },
    async delete(actorId) {
      await durable(db.remove(actorId), db);
    },
  };
}
