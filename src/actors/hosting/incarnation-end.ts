import type { EventDraft } from '../../protocol/events.js';
import type { Projection } from '../../store/projection.js';
import type { AgentPorts } from '../agent/agent-ports.js';
import type { FaultRecord } from '../faults/fault-records.js';

// How the incarnations before this one ended, as the log shows it. One that lets go of an actor
// on purpose with work open (a drained host, a command leaving a turn that waits for a person)
// commits `actor/released` as its last event. One that leaves work open without it died, and
// the incarnation that recovers the actor says so with `actor/killed`, so timelines show it.

/**
 * The `actor/killed` notes a recovery commits before anything else: one for the log's last
 * incarnation unless it released the actor, then one for each later incarnation a fault record
 * says died before it wrote anything (killed during its own recovery). A record names the point;
 * without one the point is null: not known (a real crash, or a host with another data dir).
 * Records of incarnations older than the log's last are stale and ignored.
 */
export function killNotes(p: Projection, records: readonly FaultRecord[]): EventDraft[] {
  const last = p.epoch;
  const released = p.released !== undefined;
  const byEpoch = new Map<number, FaultRecord>();
  for (const r of records) {
    const epoch = r.epoch ?? last;
    // the released incarnation ended cleanly whatever happened to its process afterwards
    if (epoch < last || (released && epoch === last)) continue;
    byEpoch.set(epoch, r);
  }
  const deaths: Array<{ epoch: number; record: FaultRecord | undefined }> = [];
  if (!released) deaths.push({ epoch: last, record: byEpoch.get(last) });
  for (const [epoch, record] of [...byEpoch].sort((x, y) => x[0] - y[0])) if (epoch > last) deaths.push({ epoch, record });
  return deaths.map(({ epoch, record }) => ({
    type: 'actor/killed',
    data: {
      point: record?.point ?? null,
      detectedBy: record ? `fault record (${record.action})` : 'recovery found open work and no actor/released',
      epoch,
      lastSeq: p.seq,
    },
  }));
}

/**
 * Commits `actor/released` for an actor this incarnation stops on purpose with work open, once
 * it is stopped (it stages nothing more; a commit in flight goes first, the writer keeps them in
 * order). Best effort: a refused or unknown commit leaves the log as a crash would, and the next
 * incarnation then notes a kill whose point is not known.
 */
export async function commitRelease(
  actor: { actorId: string; ports: Pick<AgentPorts, 'log' | 'onCommit' | 'logger'> },
  reason: string,
): Promise<void> {
  try {
    const committed = await actor.ports.log.commit([{ type: 'actor/released', data: { reason } }]);
    actor.ports.onCommit?.(committed);
  } catch (err) {
    actor.ports.logger.warn({ err, actorId: actor.actorId }, 'actor/released not committed; the next incarnation will note a kill');
  }
}
