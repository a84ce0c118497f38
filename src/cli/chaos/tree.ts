import { verifyLog, type Violation } from '../../verify/verify.js';
import type { ActorEvent } from '../../protocol/events.js';
import type { ChaosContext } from './child.js';

// A chaos scenario may be a tree (a script with agents by name: the root spawns children). One
// process hosting the tree counts a fault point over every agent it hosts, so the occurrences a
// kill is planned at are counted over every log of the tree, and after each run every log is
// checked, not the root's alone.

/** Every log under `rootId` (one read over the tree's subjects), by actor, each in seq order. */
export async function readTreeLogs(ctx: Pick<ChaosContext, 'reader'>, rootId: string): Promise<Map<string, ActorEvent[]>> {
  const logs = new Map<string, ActorEvent[]>();
  for await (const { actorId, event } of ctx.reader.readTree(rootId)) {
    let log = logs.get(actorId);
    if (!log) logs.set(actorId, (log = []));
    log.push(event);
  }
  return logs;
}

/** Every event of a tree, log after log: what a fault point's occurrences and the effect file are counted against. */
export function treeEvents(logs: ReadonlyMap<string, readonly ActorEvent[]>): ActorEvent[] {
  return [...logs.values()].flat();
}

/**
 * `verify`'s checks on every log of the tree but the root's (its caller checks that one), taken
 * as finished, each violation naming the agent whose log it is in; and what only the logs
 * together show. A scenario's root waits for its children, so when its turn has ended: no
 * child's turn is still open (`chaos.child_turn_open`), no child still owes its notice
 * (`chaos.notice_owed`), and every notice a child sent is in its parent's log
 * (`chaos.notice_lost`; taken twice, the parent's own checks say so).
 */
export function childViolations(logs: ReadonlyMap<string, readonly ActorEvent[]>, rootId: string): Violation[] {
  const found: Violation[] = [];
  for (const [actorId, log] of logs) {
    if (actorId === rootId) continue;
    for (const v of verifyLog([...log], { complete: true })) found.push({ ...v, message: `${actorId}: ${v.message}` });
    const turns = log.filter((e) => e.type === 'turn/start').length;
    const ends = log.filter((e) => e.type === 'turn/end');
    if (turns > ends.length) found.push({ code: 'chaos.child_turn_open', seq: null, message: `${actorId}: its turn is still open after its root's ended` });
    const last = ends.at(-1);
    const notified = log.filter((e) => e.type === 'subagent/notified');
    if (last?.type === 'turn/end' && last.data.noticeOwed === true && !notified.some((n) => n.seq > last.seq)) {
      found.push({ code: 'chaos.notice_owed', seq: last.seq, message: `${actorId}: its turn ended owing its parent a notice, and none was sent` });
    }
    for (const n of notified) {
      if (n.type !== 'subagent/notified') continue;
      const parent = logs.get(n.data.parentId) ?? [];
      if (!parent.some((e) => e.type === 'inbox/received' && e.data.messageId === n.data.messageId)) {
        found.push({ code: 'chaos.notice_lost', seq: n.seq, message: `${actorId}: its notice ${n.data.messageId} never reached the log of its parent ${n.data.parentId}` });
      }
    }
  }
  return found;
}
