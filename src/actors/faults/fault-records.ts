import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

// A fault kills its process at once, so it cannot say where in the log. It leaves a record
// instead, and the incarnation that recovers the actor reads it to name the point in the
// `actor/killed` it commits. Records are kept per data dir: a host with another data dir finds
// none, and its note says the point is not known.

/** What one fault left behind: the point that fired, how, and the incarnation it hit. */
export const FaultRecordSchema = z.object({
  actorId: z.string(),
  point: z.string(),
  action: z.enum(['kill', 'drop']),
  /** Epoch of the incarnation the fault hit; null when the point did not know it. */
  epoch: z.number().int().nonnegative().nullable(),
  pid: z.number().int(),
  at: z.string(),
});
/** One fault record. */
export type FaultRecord = z.infer<typeof FaultRecordSchema>;

/** Where faults leave their records and recovery reads them. */
export interface FaultRecords {
  /** Adds a record; synchronous, since a SIGKILL follows at once. */
  add(record: FaultRecord): void;
  /** The records of one actor, oldest first. */
  list(actorId: string): FaultRecord[];
  /** Forgets an actor's records (its recovery committed what they said). */
  clear(actorId: string): void;
}

/** Records kept in memory: enough for a drop, which the same process recovers. */
export function createMemoryFaultRecords(): FaultRecords {
  const byActor = new Map<string, FaultRecord[]>();
  return {
    add: (r) => void byActor.set(r.actorId, [...(byActor.get(r.actorId) ?? []), r]),
    list: (actorId) => [...(byActor.get(actorId) ?? [])],
    clear: (actorId) => void byActor.delete(actorId),
  };
}

const ACTOR_FILE = /^[A-Za-z0-9_-]+$/;

/**
 * Records as one small JSON file per actor under `dir` (the data dir's `faults/`), written with a
 * rename so a reader never sees half a file. Unreadable files read as no records: they only ever
 * name a point, and the note then says it is not known.
 */
export function createFileFaultRecords(dir: string): FaultRecords {
  const file = (actorId: string): string | null => (ACTOR_FILE.test(actorId) ? join(dir, `${actorId}.json`) : null);
  const list = (actorId: string): FaultRecord[] => {
    const f = file(actorId);
    if (!f) return [];
    try {
      return z.array(FaultRecordSchema).parse(JSON.parse(readFileSync(f, 'utf8')));
    } catch {
      return [];
    }
  };
  return {
    add(r) {
      const f = file(r.actorId);
      if (!f) return;
      mkdirSync(dir, { recursive: true });
      const tmp = `${f}.${process.pid}.tmp`;
      // the page cache survives the SIGKILL that follows: no fsync needed for a process kill
      writeFileSync(tmp, JSON.stringify([...list(r.actorId), r]));
      renameSync(tmp, f);
    },
    list,
    clear(actorId) {
      const f = file(actorId);
      if (f) rmSync(f, { force: true });
    },
  };
}
