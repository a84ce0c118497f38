import type { Msg, NatsConnection } from '@nats-io/nats-core';
import type { Logger } from 'pino';
import { InspectionReportSchema, WatchRequestSchema, WATCH_EVERY_MS, type InspectionReport, type WatchRequest } from '../protocol/inspection.js';
import { inspectSubject, parseWatchSubject, watchSubject } from './subjects.js';

// The live inspection feed on core NATS (src/protocol/inspection.ts): watchers ask on
// `watch.<actorId>`, hosts answer on `inspect.<rootId>.<actorId>`. Nothing here is persisted or
// acknowledged: a report nobody hears is lost, as a transition on a screen nobody looks at is.

/** Something to close. */
export interface Closable {
  close(): void;
}

function jsonOf(msg: Msg): unknown {
  try {
    return msg.json();
  } catch {
    return null;
  }
}

/**
 * A host's one subscription to every watch request (`watch.*`): `onWatch` with the actor watched
 * and whether the watcher is new. A request that is not one (a bad payload) is dropped.
 */
export function listenForWatches(nc: NatsConnection, onWatch: (actorId: string, hello: boolean) => void, logger: Logger): Closable {
  const sub = nc.subscribe(watchSubject('*'), {
    callback: (err, msg) => {
      if (err) return void logger.debug({ err }, 'watch requests ended');
      const actorId = parseWatchSubject(msg.subject);
      const req = WatchRequestSchema.safeParse(jsonOf(msg));
      if (actorId === null || !req.success) return;
      onWatch(actorId, req.data.hello === true);
    },
  });
  return { close: () => void sub.unsubscribe() };
}

/** What `followInspection` follows. */
export interface InspectionTarget {
  rootId: string;
  actorId: string;
}

/**
 * Follows one actor's live inspection until `signal` aborts: subscribes to its reports, then asks
 * the hosts for them at once (a hello, so the host running it reports its states now) and again
 * every `everyMs`. Reports that do not parse, or are of another actor, are dropped.
 */
export function followInspection(
  nc: NatsConnection,
  target: InspectionTarget,
  o: { signal: AbortSignal; onReport: (r: InspectionReport) => void; logger: Logger; everyMs?: number },
): void {
  if (o.signal.aborted) return;
  const sub = nc.subscribe(inspectSubject(target.rootId, target.actorId), {
    callback: (err, msg) => {
      if (err) return void o.logger.debug({ err, actorId: target.actorId }, 'inspection reports ended');
      const report = InspectionReportSchema.safeParse(jsonOf(msg));
      if (!report.success || report.data.actorId !== target.actorId) return;
      o.onReport(report.data);
    },
  });
  const ask = (hello: boolean): void => {
    if (nc.isClosed() || nc.isDraining()) return;
    const req: WatchRequest = hello ? { v: 1, hello: true } : { v: 1 };
    try {
      nc.publish(watchSubject(target.actorId), JSON.stringify(req));
    } catch (err) {
      o.logger.debug({ err }, 'watch request not sent');
    }
  };
  // subscribed before asking: the server takes this connection's SUB before its PUB
  ask(true);
  const timer = setInterval(() => ask(false), o.everyMs ?? WATCH_EVERY_MS);
  o.signal.addEventListener('abort', () => {
    clearInterval(timer);
    if (!nc.isClosed()) sub.unsubscribe();
  }, { once: true });
}
