import { pino, type Logger } from 'pino';
import { StoreError, STORE_CODES } from '../protocol/errors.js';
import type { ActorEvent } from '../protocol/events.js';
import type { LogPosition, LogReader } from './log-port.js';
import type { Snapshot, SnapshotStore } from './snapshots.js';

/** Options of `rehydrate`: where to read, and how to build the state. */
export interface RehydrateOptions<S> {
  reader: LogReader;
  snapshots: SnapshotStore;
  rootId: string;
  actorId: string;
  /** Snapshots of any other version are ignored (full replay). */
  schemaVersion: number;
  initial(): S;
  restore(projection: unknown): S;
  fold(state: S, e: ActorEvent): S;
  logger?: Logger;
}

/** A rehydrated actor: its state, machine snapshot, log position and the events after the snapshot. */
export interface Rehydrated<S> {
  state: S;
  /** The snapshot's machine state, or null on full replay. */
  machines: unknown | null;
  /** The end of the log as read: the fence of the next commit. */
  position: LogPosition;
  /** Seq of the snapshot used (0 on full replay). */
  snapshotSeq: number;
  /** Events after the snapshot, in order; the caller replays them through its machines. */
  tail: ActorEvent[];
}

/**
 * Latest usable snapshot + the log tail after it (design §4). Refuses a gap in the log; a
 * snapshot of another schema version, another root, or ahead of the log is ignored.
 */
export async function rehydrate<S>(opts: RehydrateOptions<S>): Promise<Rehydrated<S>> {
  const { reader, rootId, actorId } = opts;
  const logger = (opts.logger ?? pino({ level: 'silent' })).child({ actorId });
  const end = await reader.end(rootId, actorId);
  const snap = usable(await opts.snapshots.load(actorId), opts.schemaVersion, rootId, end, logger);

  const read = async (hint: number | undefined) => {
    const out: { event: ActorEvent; streamSeq: number }[] = [];
    const afterSeq = snap?.seq ?? 0;
    if (end.seq <= afterSeq) return out; // nothing after the snapshot: no consumer needed
    const o = hint === undefined ? { afterSeq, end } : { afterSeq, fromStreamSeq: hint, end };
    for await (const stored of reader.read(rootId, actorId, o)) out.push(stored);
    return out;
  };
  // Start at the snapshot's own commit: a commit can straddle the snapshot's seq.
  let tail = await read(snap?.streamSeq);
  if (snap && firstGap(tail, snap.seq, end.seq)) {
    // the stream-seq hint may be wrong (log recreated): read again from the beginning
    logger.warn({ snapshotSeq: snap.seq }, 'log tail does not follow the snapshot at its stream seq; rereading');
    tail = await read(undefined);
  }
  const gap = firstGap(tail, snap?.seq ?? 0, end.seq);
  if (gap) {
    throw new StoreError(STORE_CODES.gap,
      `log of ${actorId} has a gap: expected seq ${gap.expected}, found ${gap.found}`,
      { hint: 'the log is damaged; verify it and restore the stream from a backup' });
  }

  let state = snap ? opts.restore(snap.projection) : opts.initial();
  for (const { event } of tail) state = opts.fold(state, event);
  const last = tail[tail.length - 1];
  const position = last ? { seq: last.event.seq, streamSeq: last.streamSeq } : end;
  logger.debug({ snapshotSeq: snap?.seq ?? 0, tail: tail.length, position }, 'rehydrated');
  return {
    state,
    machines: snap ? (snap.machines ?? null) : null,
    position,
    snapshotSeq: snap?.seq ?? 0,
    tail: tail.map((t) => t.event),
  };
}

function usable(
  snap: Snapshot | undefined, schemaVersion: number, rootId: string, end: LogPosition, logger: Logger,
): Snapshot | undefined {
  if (!snap) return undefined;
  if (snap.schemaVersion !== schemaVersion) {
    logger.info({ found: snap.schemaVersion, want: schemaVersion }, 'snapshot of another schema version ignored');
    return undefined;
  }
  if (snap.rootId !== rootId) {
    logger.warn({ found: snap.rootId, want: rootId }, 'snapshot of another root ignored');
    return undefined;
  }
  if (snap.seq > end.seq) {
    // a snapshot newer than the log describes events that are not there: never trust it
    logger.warn({ snapshotSeq: snap.seq, logSeq: end.seq }, 'snapshot ahead of the log ignored; replaying in full');
    return undefined;
  }
  if (snap.seq === end.seq && snap.seq > 0 && snap.streamSeq !== end.streamSeq) {
    logger.warn({ snapshotSeq: snap.seq, streamSeq: snap.streamSeq, logStreamSeq: end.streamSeq },
      'snapshot does not match the log end; replaying in full');
    return undefined;
  }
  return snap;
}

/** The first place the tail is not exactly from+1, from+2, ... through at least `endSeq`. */
function firstGap(
  tail: { event: ActorEvent }[], from: number, endSeq: number,
): { expected: number; found: number | string } | undefined {
  let expected = from + 1;
  for (const { event } of tail) {
    if (event.seq !== expected) return { expected, found: event.seq };
    expected++;
  }
  // the log ended (as read before) at endSeq: a shorter tail lost events
  if (expected <= endSeq) return { expected, found: 'end of log' };
  return undefined;
}
