import { pino } from 'pino';
import { openBus } from '../../src/bus/connection.js';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import { actorOfInboxConsumer, STREAMS } from '../../src/bus/subjects.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { createLogReader } from '../../src/store/jetstream-log.js';

/** What a tree left on the bus: every log under its root, its directory entries, the actors with an inbox consumer. */
export interface TreeState {
  rootId: string;
  /** Each actor's log, by actor ID, in seq order. */
  logs: Map<string, ActorEvent[]>;
  /** Directory entries whose root is the tree's. */
  entries: DirectoryEntry[];
  /** Actors of the tree that have an inbox consumer (`inbox_<actorId>`). */
  consumers: string[];
}

/** Reads a tree's logs (one read over `log.<rootId>.>`), directory entries and inbox consumers. */
export async function readTreeState(natsUrl: string, dataDir: string, rootId: string): Promise<TreeState> {
  const bus = await openBus({ natsUrl, dataDir, logger: pino({ level: 'silent' }) });
  try {
    const reader = createLogReader({ js: bus.js, jsm: bus.jsm });
    const logs = new Map<string, ActorEvent[]>();
    for await (const { actorId, event } of reader.readTree(rootId)) {
      let log = logs.get(actorId);
      if (!log) logs.set(actorId, (log = []));
      log.push(event);
    }
    const entries = (await bus.directory.list()).filter((e) => e.rootId === rootId);
    const ids = new Set(entries.map((e) => e.actorId));
    const consumers: string[] = [];
    for await (const c of bus.jsm.consumers.list(STREAMS.inbox)) {
      const actor = actorOfInboxConsumer(c.name);
      if (actor !== null && ids.has(actor)) consumers.push(actor);
    }
    return { rootId, logs, entries, consumers };
  } finally {
    await bus.close();
  }
}

function ofType<T extends ActorEvent['type']>(log: readonly ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/**
 * What is wrong with a finished tree, across its logs (empty: nothing): every log passes `verify`
 * as finished; each spawn request has one child — one `subagent/spawned`, one log holding one
 * `subagent_task` under the request's ID, one directory entry, one inbox consumer — and no log,
 * entry or consumer belongs to a child nobody requested; every completion notice a child says it
 * sent reached its parent once (one `inbox/received`) and was included once (a `subagent/completed`
 * or a prepared request naming it); no message a parent received is included twice.
 */
export function treeViolations(t: TreeState): string[] {
  const out: string[] = [];
  for (const [id, log] of t.logs) {
    const v = verifyLog(log, { complete: true });
    if (v.length > 0) out.push(`${id}: ${formatViolations(v)}`);
  }
  if (!t.logs.has(t.rootId)) out.push(`the root ${t.rootId} has no log`);
  const requested = new Map<string, { parentId: string; requestId: string }>();
  for (const [parentId, log] of t.logs) {
    for (const r of ofType(log, 'subagent/spawn_requested')) {
      if (requested.has(r.data.childId)) out.push(`${r.data.childId} is requested twice`);
      requested.set(r.data.childId, { parentId, requestId: r.data.requestId });
      const spawned = ofType(log, 'subagent/spawned').filter((s) => s.data.requestId === r.data.requestId);
      if (spawned.length !== 1) out.push(`${parentId}: request ${r.data.requestId} has ${spawned.length} subagent/spawned`);
    }
  }
  for (const [childId, { parentId, requestId }] of requested) {
    const log = t.logs.get(childId);
    if (!log) {
      out.push(`${childId} (of ${parentId}) has no log`);
      continue;
    }
    const tasks = ofType(log, 'inbox/received').filter((e) => e.data.kind === 'subagent_task');
    if (tasks.length !== 1 || tasks[0]!.data.messageId !== requestId) out.push(`${childId}: ${tasks.length} subagent_task received (want one, ${requestId})`);
    const entries = t.entries.filter((e) => e.actorId === childId);
    if (entries.length !== 1 || entries[0]!.parentId !== parentId) out.push(`${childId}: ${entries.length} directory entries under ${parentId}`);
    if (t.consumers.filter((c) => c === childId).length !== 1) out.push(`${childId}: no inbox consumer`);
  }
  const children = (ids: Iterable<string>) => [...ids].filter((id) => id !== t.rootId && !requested.has(id));
  for (const id of children(t.logs.keys())) out.push(`${id} has a log but no parent requested it`);
  for (const id of children(t.entries.map((e) => e.actorId))) out.push(`${id} has a directory entry but no parent requested it`);
  for (const id of children(t.consumers)) out.push(`${id} has an inbox consumer but no parent requested it`);
  for (const [parentId, log] of t.logs) {
    const included = new Map<string, number>();
    const include = (id: string): void => void included.set(id, (included.get(id) ?? 0) + 1);
    for (const e of ofType(log, 'subagent/completed')) include(e.data.messageId);
    for (const e of ofType(log, 'request/prepared')) for (const id of e.data.messageIds ?? []) include(id);
    for (const [id, n] of included) if (n > 1) out.push(`${parentId}: message ${id} included ${n} times`);
    for (const [childId, c] of requested) {
      if (c.parentId !== parentId) continue;
      for (const n of ofType(t.logs.get(childId) ?? [], 'subagent/notified')) {
        const received = ofType(log, 'inbox/received').filter((e) => e.data.messageId === n.data.messageId).length;
        if (received !== 1) out.push(`${parentId}: notice ${n.data.messageId} of ${childId} received ${received} times`);
        if ((included.get(n.data.messageId) ?? 0) !== 1) out.push(`${parentId}: notice ${n.data.messageId} of ${childId} included ${included.get(n.data.messageId) ?? 0} times`);
      }
    }
  }
  return out;
}
