import type { ActorEvent } from '../protocol/events.js';
import type { ActorFacts } from './tree-facts.js';
import type { TreeReport } from './violations.js';

// The tree's width (design §6b: `max_children_per_tree` counts the children running at once): a
// child runs from its spawn request (or a follow-up sent to it) to the end of the turn that took
// it. Its place in the tree is taken before the request is committed and given back after that
// end is, so these lifetimes overlap no more than the places allowed.

/** Where an event is in the tree's one order: actor ID → seq → position. */
export type TreeOrder = Map<string, Map<number, number>>;

interface Lifetime {
  childId: string;
  parentId: string;
  seq: number;
  start: number;
  end: number;
}

/**
 * Children running at once never pass `max`. Positions come from `order` (the stream order of
 * the tree's commits: one server's order, which no clock skew between hosts bends) or, without
 * it, from the events' commit times. A lifetime with no end yet runs on, unless the tree is
 * complete (then it ends at its child's last event).
 */
export function checkWidth(facts: Map<string, ActorFacts>, max: number, order: TreeOrder | undefined, complete: boolean, report: TreeReport): void {
  const pos = (actorId: string, e: ActorEvent): number => order?.get(actorId)?.get(e.seq) ?? Date.parse(e.at);
  const lifetimes: Lifetime[] = [];
  for (const parent of facts.values()) {
    const spans = new Map<string, Lifetime[]>();
    const add = (childId: string, seq: number, start: number, end: number) => {
      const list = spans.get(childId) ?? [];
      list.push({ childId, parentId: parent.actorId, seq, start, end });
      spans.set(childId, list);
    };
    for (const r of parent.requests) {
      const child = facts.get(r.data.childId);
      const first = child?.turnOrder[0];
      const start = pos(parent.actorId, r);
      add(r.data.childId, r.seq, start, endOf(child, first === undefined ? undefined : child!.turns.get(first)?.end, start, complete, pos));
    }
    for (const e of parent.events) {
      if (e.type !== 'subagent/message_sent' || e.data.kind !== 'follow_up') continue;
      const child = facts.get(e.data.childId);
      const turn = child ? [...child.turns.values()].find((t) => t.start.data.messageIds.includes(e.data.messageId)) : undefined;
      const start = pos(parent.actorId, e);
      add(e.data.childId, e.seq, start, endOf(child, turn?.end, start, complete, pos, complete && turn === undefined));
    }
    // a child's lifetimes that overlap (a follow-up queued while its turn runs) are one place
    for (const list of spans.values()) {
      list.sort((a, b) => a.start - b.start);
      let cur: Lifetime | null = null;
      for (const l of list) {
        if (cur && l.start <= cur.end) cur.end = Math.max(cur.end, l.end);
        else {
          if (cur) lifetimes.push(cur);
          cur = { ...l };
        }
      }
      if (cur) lifetimes.push(cur);
    }
  }
  // a sweep: ends before starts at one position (a place given back is free to take)
  const points = lifetimes.flatMap((l) => [{ at: l.start, d: 1, l }, { at: l.end, d: -1, l }]);
  points.sort((a, b) => a.at - b.at || a.d - b.d);
  const running = new Set<Lifetime>();
  for (const p of points) {
    if (p.d < 0) {
      running.delete(p.l);
      continue;
    }
    running.add(p.l);
    if (running.size > max) {
      report('tree.too_wide', p.l.parentId, p.l.seq,
        `${running.size} subagents of the tree run at once when ${p.l.childId} starts (${[...running].map((l) => l.childId).join(', ')}), past max_children_per_tree = ${max}`);
    }
  }
}

/**
 * Where a lifetime ends: at its turn's end; with none yet, never while the tree runs; in a
 * complete tree, at its child's last event (a turn that started and never ended), or where it
 * started (`untaken`: the work was never taken up).
 */
function endOf(
  child: ActorFacts | undefined, end: ActorEvent | undefined, start: number, complete: boolean,
  pos: (actorId: string, e: ActorEvent) => number, untakenComplete = false,
): number {
  if (child && end) return pos(child.actorId, end);
  if (untakenComplete) return start;
  if (!complete) return Infinity;
  const last = child?.events.at(-1);
  return child && last ? Math.max(start, pos(child.actorId, last)) : start;
}
