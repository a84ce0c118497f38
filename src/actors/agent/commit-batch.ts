import type { ActorEvent } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';

/** What a recovery closed, and where its `recovery/continuation` goes in the staged batch. */
export interface RecoveryNote {
  insertAt: number;
  closed: string[];
  /** The turn that was open when recovery began. */
  turn: string | undefined;
}

/**
 * Inserts `recovery/continuation` after the last closing event of a recovery: it lists what was
 * closed and follows it, so a reader of the log sees the crash's loose ends tied before work goes on.
 */
export function withContinuation(batch: ActorEvent[], r: RecoveryNote): ActorEvent[] {
  const note = {
    ...batch[0]!,
    // the time of the last closing event: the log's times stay in order
    at: (batch[r.insertAt - 1] ?? batch[0]!).at,
    type: 'recovery/continuation',
    data: { closed: r.closed, resume: r.turn !== undefined ? 'step' : 'none' },
    // the turn that was open when recovery began, even if this batch ends it and starts another
    turn: r.turn,
    step: undefined,
    attempt: undefined,
    call: undefined,
  } as ActorEvent;
  return [...batch.slice(0, r.insertAt), note, ...batch.slice(r.insertAt)];
}

/** Work that may begin only once the event at `seq` is committed (a tool after its `tool/start`). */
export interface Launch {
  seq: number;
  run(): void;
  /** Called instead of `run` when the event will never be committed by this incarnation. */
  drop(): void;
}

/** A caller waiting for the event at `seq` to be committed (or for the actor to fail). */
export interface CommitWaiter {
  seq: number;
  resolve(): void;
  reject(err: unknown): void;
}

/** Bytes of the last prepared request a snapshot may cost per event since the one before it. */
export const SNAPSHOT_BYTES_PER_EVENT = 2048;

/**
 * Whether a snapshot is due at `seq`: `every` events after the last one, and no sooner than one
 * event per `SNAPSHOT_BYTES_PER_EVENT` bytes of the last prepared request (which holds the whole
 * history, as the snapshot does). A snapshot writes the whole projection, so with a fixed interval
 * a long turn's snapshots grew quadratic in its length; spaced by its size they stay linear in the
 * log. Spaced by the history's item count instead, a log of 10,000 events in short turns left tails
 * of thousands of events, and rehydrating it cost several times what a short log did: small items make
 * a small snapshot, which may come often.
 */
export function snapshotDue(seq: number, lastSnapshotSeq: number, every: number, projection: Pick<Projection, 'lastPrepared'>): boolean {
  const bytes = projection.lastPrepared?.bytes ?? 0;
  return seq - lastSnapshotSeq >= Math.max(every, Math.ceil(bytes / SNAPSHOT_BYTES_PER_EVENT));
}
