import { followAgent } from '../client/follower.js';
import type { DirectoryEntry } from '../bus/directory.js';
import type { InspectionReport } from '../protocol/inspection.js';
import type { LogReader } from '../store/log-port.js';
import { emptyProjection } from '../store/projection.js';
import type { InspectionSource } from './gateway-ports.js';
import { activeOfReport, activeStates } from './machine-states.js';

/** What `followMachines` sends: `machines.state` once, then `machines.transition` for each report. */
export type MachinesNotify = (method: 'machines.state' | 'machines.transition', params: Record<string, unknown>) => void;

/**
 * One actor of a `machines.subscribe` until `signal` aborts: the hosts are asked for its live
 * inspection first (so nothing they report after the log was read is missed), then the log is
 * folded to now and its active states sent as `machines.state`, then every report is relayed as
 * `machines.transition`, those that came during the read first. Without an inspection source
 * (no bus to ask) only the log's state is sent.
 */
export async function followMachines(o: {
  reader: Pick<LogReader, 'read' | 'follow'>;
  inspection: InspectionSource | undefined;
  entry: Pick<DirectoryEntry, 'rootId' | 'actorId'>;
  subscription: string;
  signal: AbortSignal;
  notify: MachinesNotify;
}): Promise<void> {
  const { entry, subscription } = o;
  let held: InspectionReport[] | null = [];
  // a report says state names, call IDs and a host's name, never a value: nothing in it to redact
  const relay = (r: InspectionReport): void => o.notify('machines.transition', {
    subscription, actor: entry.actorId, eventType: r.event, active: activeOfReport(r.machines), at: r.at, host: r.host,
  });
  o.inspection?.follow({ rootId: entry.rootId, actorId: entry.actorId }, o.signal, (r) => (held ? held.push(r) : relay(r)));
  let last: { streamSeq: number; eventType: string; active: Record<string, string> } | null = null;
  for await (const e of followAgent({ reader: o.reader, rootId: entry.rootId, actorId: entry.actorId })) {
    last = { streamSeq: e.streamSeq, eventType: e.event.type, active: activeStates(e.projection) };
  }
  if (o.signal.aborted) return;
  o.notify('machines.state', {
    subscription, actor: entry.actorId, streamSeq: last?.streamSeq ?? 0, eventType: last?.eventType ?? null,
    active: last?.active ?? activeStates(emptyProjection(entry.actorId)),
  });
  const during = held;
  held = null;
  for (const r of during) relay(r);
  await new Promise<void>((resolve) => {
    if (o.signal.aborted) resolve();
    else o.signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
