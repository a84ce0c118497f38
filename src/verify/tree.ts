import type { ActorEvent } from '../protocol/events.js';
import { isJobLog, verifyJobLog, verifyLog } from './verify.js';
import { checkJobOwners, jobRunningReasons, treeJobs } from './tree-jobs.js';
import type { TreeReport, TreeViolation, Violation } from './violations.js';

export { TREE_VIOLATION_CODES, type TreeViolation, type TreeViolationCode } from './violations.js';
import { actorFacts, lastTurn, runningReasons, type ActorFacts } from './tree-facts.js';
import { checkCarves, checkPermissions, checkTreeBudget } from './tree-limits.js';
import { checkWidth, type TreeOrder } from './tree-width.js';
import type { TreeLimits } from '../protocol/turn-settings.js';

/** What `verifyTree` found: each log's own violations, the tree's, and whether the tree still runs. */
export interface TreeVerdict {
  rootId: string;
  /** Why the tree is still running (empty: settled); the checks that need an end were skipped. */
  running: string[];
  actors: Array<{ actorId: string; events: number; violations: Violation[] }>;
  tree: TreeViolation[];
}

/** Options of `verifyTree`. */
export interface VerifyTreeOptions {
  /**
   * No writer will append to any log of the tree again. Absent: inferred from the logs (nothing
   * open, owed, in flight or waiting to be taken in); a tree that looks settled is checked as
   * complete, one that still runs is reported as running.
   */
  complete?: boolean;
  /** Where each event is in the tree's stream order (its commit's stream sequence); absent: commit times order the logs. */
  order?: TreeOrder;
  /** The tree's limits besides those its root's turns recorded (the config's): the stricter are checked. */
  limits?: Partial<TreeLimits>;
}

/** Whether the verdict holds no violation at all. */
export function treeOk(v: TreeVerdict): boolean {
  return v.tree.length === 0 && v.actors.every((a) => a.violations.length === 0);
}

/**
 * Checks a tree's logs (every actor under `rootId`, by actor ID): each log against `verifyLog`,
 * then what links them. Every spawn request has one child whose first task is that request, and
 * every child one request; every spawn ends in the notice of the child's last turn, an interrupt
 * that cancelled it, or a detach; every notice and report enters its parent's history exactly
 * once; permissions only narrow down the tree; the tree spends within its root's budget; every
 * child's budget is carved out of its parent's; no more children run at once than the tree allows.
 * A job's log (`isJobLog`) is checked as a job's (`verifyJobLog`), and its owner must be an agent of
 * the tree that started it. Pure.
 */
export function verifyTree(logs: Map<string, ActorEvent[]>, rootId: string, opts: VerifyTreeOptions = {}): TreeVerdict {
  const tree: TreeViolation[] = [];
  const report: TreeReport = (code, actorId, seq, message) => tree.push({ code, actorId, seq, message });
  const facts = new Map<string, ActorFacts>();
  // a job's log is no agent's: checked by the job checks, linked to the tree by its owner alone
  const jobLogs = new Map<string, ActorEvent[]>();
  const agentLogs = new Map<string, ActorEvent[]>();
  for (const [id, events] of logs) {
    if (isJobLog(events)) jobLogs.set(id, events);
    else {
      agentLogs.set(id, events);
      facts.set(id, actorFacts(id, events));
    }
  }
  const jobs = treeJobs(jobLogs);
  const parentOf = new Map<string, string>();
  for (const f of facts.values()) for (const r of f.requests) if (!parentOf.has(r.data.childId)) parentOf.set(r.data.childId, f.actorId);
  const running = opts.complete === true ? [] : [...runningReasons(facts, parentOf), ...jobRunningReasons(jobs)];
  const complete = opts.complete ?? running.length === 0;
  const actors = [...logs].map(([actorId, events]) => ({
    actorId, events: events.length, violations: jobLogs.has(actorId) ? verifyJobLog(events, { complete }) : verifyLog(events, { complete }),
  }));
  if (!facts.has(rootId)) report('tree.root_missing', rootId, null, `the tree has no log of its root ${rootId}`);
  checkLinks(facts, rootId, complete, report);
  if (complete) checkSpawnEnds(facts, report);
  checkInclusion(facts, parentOf, complete, report);
  checkJobOwners(jobs, agentLogs, complete, report);
  checkPermissions(facts, report);
  checkTreeBudget(facts, rootId, report);
  checkCarves(facts, report);
  const width = treeWidthLimit(facts.get(rootId), opts.limits);
  if (width !== null) checkWidth(facts, width, opts.order, complete, report);
  // grouped by actor in the order the logs came, each actor's ordered by seq like verifyLog's
  const order = new Map([...logs.keys()].map((id, i) => [id, i]));
  tree.sort((a, b) => (order.get(a.actorId) ?? -1) - (order.get(b.actorId) ?? -1) || (a.seq ?? Infinity) - (b.seq ?? Infinity));
  return { rootId, running: opts.complete === true ? [] : running, actors, tree };
}

/** The tree's width limit: the stricter of what its root's turns recorded and what the caller gives; null when neither says. */
function treeWidthLimit(root: ActorFacts | undefined, given: Partial<TreeLimits> | undefined): number | null {
  const all = [given?.maxChildrenPerTree, ...[...(root?.turns.values() ?? [])].map((t) => t.start.data.settings.treeLimits?.maxChildrenPerTree)]
    .filter((n): n is number => n !== undefined);
  return all.length === 0 ? null : Math.min(...all);
}

/** One child per request: the request's child holds that task first and no other, no child is asked for twice, every spawned child has a log. */
function checkLinks(facts: Map<string, ActorFacts>, rootId: string, complete: boolean, report: TreeReport): void {
  const requestedBy = new Map<string, { parent: string; seq: number }>();
  for (const parent of facts.values()) {
    for (const r of parent.requests) {
      const first = requestedBy.get(r.data.childId);
      if (first) {
        report('tree.child_requested_twice', parent.actorId, r.seq, `request ${r.data.requestId} names ${r.data.childId}, already asked for at seq ${first.seq} of ${first.parent}`);
        continue;
      }
      requestedBy.set(r.data.childId, { parent: parent.actorId, seq: r.seq });
      const child = facts.get(r.data.childId);
      if (!child) continue;
      const task = child.tasks[0];
      if (!task) report('tree.task_missing', child.actorId, null, `${child.actorId} was asked for by request ${r.data.requestId} but received no task`);
      else if (task.data.messageId !== r.data.requestId) {
        report('tree.task_mismatch', child.actorId, task.seq, `the first task of ${child.actorId} is ${task.data.messageId}, not the request ${r.data.requestId} that asked for it`);
      }
    }
    for (const s of parent.spawned) {
      if (complete && !facts.has(s.data.childId)) {
        report('tree.child_missing', parent.actorId, s.seq, `${s.data.childId} was spawned but the tree holds no log of it`);
      }
    }
  }
  for (const f of facts.values()) {
    for (const extra of f.tasks.slice(1)) {
      report('tree.task_twice', f.actorId, extra.seq, `${f.actorId} received a second task ${extra.data.messageId}: a child is one request's`);
    }
    if (f.actorId !== rootId && !requestedBy.has(f.actorId)) {
      report('tree.child_unrequested', f.actorId, null, `${f.actorId} is in the tree, but no spawn request of it names it`);
    }
  }
}

/** Every spawned child's work ended where its parent sees it: the notice of its last turn, its cancellation by an interrupt, or a detach. */
function checkSpawnEnds(facts: Map<string, ActorFacts>, report: TreeReport): void {
  for (const parent of facts.values()) {
    for (const s of parent.spawned) {
      const childId = s.data.childId;
      const child = facts.get(childId);
      if (!child || parent.detached.has(childId)) continue;
      const last = lastTurn(child);
      const noticed = last !== undefined && [...parent.fromChildren.values()].some((m) => m.from === childId && m.kind === 'subagent_completed' && m.turn === last.start.turn);
      const cancelled = parent.interrupts.has(childId) && last?.end?.data.outcome === 'cancelled';
      if (!noticed && !cancelled) {
        report('tree.spawn_unended', parent.actorId, s.seq,
          `${childId} was spawned, but its parent received no notice of its last turn${last ? ` ${last.start.turn}` : ' (it has none)'}, cancelled it with no interrupt, and did not detach it`);
      }
    }
  }
}

/** A child's notice or report reaches its parent and enters its history once: by the wait that took it or by one request, never both, never twice. */
function checkInclusion(facts: Map<string, ActorFacts>, parentOf: Map<string, string>, complete: boolean, report: TreeReport): void {
  for (const f of facts.values()) {
    const parent = facts.get(parentOf.get(f.actorId) ?? '');
    if (complete && parent) {
      for (const s of f.sentUp) {
        if (!parent.fromChildren.has(s.messageId)) report('tree.notice_unreceived', f.actorId, s.seq, `${s.messageId} was sent to ${parent.actorId}, which never received it`);
      }
    }
    for (const m of f.fromChildren.values()) {
      if (m.includedAt.length > 1) {
        const [first, again] = m.includedAt;
        report('tree.notice_included_twice', f.actorId, again!.seq, `${m.kind} ${m.messageId} from ${m.from} is included by ${again!.by}, already by ${first!.by} at seq ${first!.seq}`);
      } else if (complete && m.includedAt.length === 0 && !m.cancelled) {
        report('tree.notice_unincluded', f.actorId, m.seq, `${m.kind} ${m.messageId} from ${m.from} was received and never entered the history of ${f.actorId}`);
      }
    }
  }
}
