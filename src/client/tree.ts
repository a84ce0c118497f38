import type { ActorEvent } from '../protocol/events.js';
import { addCost } from '../protocol/history.js';
import type { LogReader } from '../store/log-port.js';
import { emptyProjection, foldEvent, type Projection } from '../store/projection.js';
import { createJobState, foldJobEvent, type JobState } from '../store/job-projection.js';
import { isJobEnd, type JobPhase, type JobReason } from '../protocol/job-events.js';
import { followTree, type TreeClientEvent } from './follower.js';
import { jobTreeStatus } from './job-view.js';
import { agentStatus, isBusy, type TreeStatus } from './status.js';
import type { ClientTransport, TransportEvent } from './transport.js';

// A run seen whole (design §6b, §11): every agent under one root, each folded from its own log
// with the projection every reader uses, put together into one tree. Nothing here is guessed
// from time or silence: names, parents and depths come from the spawn records and the children's
// tasks; statuses from each log as `agentStatus` reads it. A job (a log that starts with
// `job/created`) hangs under the agent that owns it, its status its phase's.

/** The name the tree gives its top agent (the scripted model's `agents.main` too). */
export const ROOT_NAME = 'main';

/** What one agent of a tree is doing (`agentStatus`). */
export type { TreeStatus } from './status.js';

/** One agent of a tree, as its log and its parent's say. */
export interface TreeAgent {
  actorId: string;
  /** `main` for the root; a child's spawn name. */
  name: string;
  parentId: string | null;
  /** 0 for the root; a child's depth from its spawn. */
  depth: number;
  status: TreeStatus;
  /** While `waiting`: what for, and the approvals or questions it waits on. */
  waitingFor: { kind: 'approval' | 'question'; ids: string[]; options?: Record<string, string[]> } | null;
  /** Index of the open step (null: none open). */
  step: number | null;
  /** The tool of the open step running now (the first started and not ended), null: none. */
  tool: string | null;
  /** Tokens of every attempt of the agent, input and output. */
  tokens: number;
  /** True when any of them was counted by actorloop, not reported by the provider. */
  estimated: boolean;
  /** USD of every attempt; null once any had no known price. */
  costUsd: number | null;
  /** Its children, in the order it spawned them. */
  children: string[];
  /** Set for a background job (a `start_job`'s): what its own log says of it. */
  job?: TreeJob;
}

/** What a tree shows of a job beside its status. */
export interface TreeJob {
  phase: JobPhase;
  reason: JobReason | null;
  attempts: number;
  /** Its exit code once it ended as a process did (null: running, killed by a signal, or no process). */
  exitCode: number | null;
  /** Its owner's inbox has its terminal notice. */
  notified: boolean;
}

/** A tree as a client shows it: its agents root first, each followed by its subtree, and the sums. */
export interface TreeView {
  rootId: string;
  agents: TreeAgent[];
  /** The sums; `agents` counts the agents alone (jobs are rows, not agents), the tokens and costs are of every row. */
  total: { agents: number; tokens: number; estimated: boolean; costUsd: number | null };
  /** No agent runs, starts, recovers or waits, and no child owes its parent a notice: nothing more happens unasked. */
  settled: boolean;
}

/** What the fold keeps of one actor beside its projection. */
interface ActorFacts {
  projection: Projection;
  costUsd: number | null;
  lastType: ActorEvent['type'] | null;
}

/** What a parent's `subagent/spawn_requested` says of a child. */
interface SpawnFacts {
  parentId: string;
  name: string;
  depth: number;
}

/**
 * The tree fold: takes each event of a tree (as `followTree` yields it, with its actor's
 * projection folded already) and gives the tree's view on demand. Costs are summed from the
 * attempts it is given, so it must be given the run from its first commit.
 */
export class TreeFold {
  private readonly actors = new Map<string, ActorFacts>();
  private readonly spawns = new Map<string, SpawnFacts>();
  /** Children in spawn order, by parent. */
  private readonly childOrder = new Map<string, string[]>();
  /** Jobs by job ID, folded from their own logs. */
  private readonly jobs = new Map<string, JobState>();

  constructor(readonly rootId: string) {}

  /** Takes one event of the tree in. */
  apply(e: Pick<TreeClientEvent, 'actorId' | 'event' | 'projection'>): void {
    let a = this.actors.get(e.actorId);
    if (!a) {
      a = { projection: e.projection, costUsd: 0, lastType: null };
      this.actors.set(e.actorId, a);
    }
    a.projection = e.projection;
    a.lastType = e.event.type;
    const ev = e.event;
    if (ev.type === 'attempt/end') a.costUsd = addCost(a.costUsd, ev.data.costUsd ?? null);
    const job = this.jobs.get(e.actorId);
    if (job) {
      if (ev.seq > job.seq) foldJobEvent(job, ev);
    } else if (ev.type === 'job/created') this.jobs.set(e.actorId, createJobState(ev));
    if (ev.type === 'subagent/spawn_requested' && !this.spawns.has(ev.data.childId)) {
      this.spawns.set(ev.data.childId, { parentId: e.actorId, name: ev.data.name, depth: ev.data.depth });
      const order = this.childOrder.get(e.actorId) ?? [];
      order.push(ev.data.childId);
      this.childOrder.set(e.actorId, order);
    }
  }

  /** The tree as the events so far say. */
  view(): TreeView {
    const ids = new Set<string>([this.rootId, ...this.actors.keys(), ...this.spawns.keys()]);
    const agents = new Map<string, TreeAgent>();
    for (const id of ids) agents.set(id, this.agent(id));
    // a job sits one level under its owner (whose depth its log does not know)
    for (const a of agents.values()) if (a.job && a.parentId !== null) a.depth = (agents.get(a.parentId)?.depth ?? 0) + 1;
    // a child whose parent's log was not read (a cursor past the spawn) hangs off its task's parent
    for (const a of agents.values()) {
      if (a.parentId === null) continue;
      const parent = agents.get(a.parentId);
      if (parent && !parent.children.includes(a.actorId)) parent.children.push(a.actorId);
    }
    const seen = new Set<string>();
    const ordered: TreeAgent[] = [];
    const visit = (id: string): void => {
      const a = agents.get(id);
      if (!a || seen.has(id)) return;
      seen.add(id);
      ordered.push(a);
      for (const c of a.children) visit(c);
    };
    visit(this.rootId);
    // nothing links them to the root (yet): shown rather than hidden
    for (const a of agents.values()) if (!seen.has(a.actorId)) ordered.push(a);
    let tokens = 0;
    let costUsd: number | null = 0;
    let estimated = false;
    for (const a of ordered) {
      tokens += a.tokens;
      costUsd = addCost(costUsd, a.costUsd);
      estimated ||= a.estimated;
    }
    const busy = (a: TreeAgent): boolean =>
      isBusy(a.status) || this.actors.get(a.actorId)?.projection.noticeOwed !== undefined || (a.job !== undefined && !a.job.notified);
    return {
      rootId: this.rootId,
      agents: ordered,
      total: { agents: ordered.filter((a) => a.job === undefined).length, tokens, estimated, costUsd },
      settled: !ordered.some(busy),
    };
  }

  private agent(id: string): TreeAgent {
    const job = this.jobs.get(id);
    if (job) return jobRow(job, id === this.rootId);
    const facts = this.actors.get(id);
    const p = facts?.projection;
    const spawn = this.spawns.get(id);
    const link = p?.parentLink;
    const isRoot = id === this.rootId;
    const name = isRoot ? ROOT_NAME : (spawn?.name ?? link?.name ?? p?.lastSettings?.agentName ?? id);
    const parentId = isRoot ? null : (spawn?.parentId ?? link?.parentId ?? null);
    const depth = isRoot ? 0 : (spawn?.depth ?? link?.depth ?? 1);
    const running = p?.pending.calls.find((c) => c.started && c.observation === null);
    return {
      actorId: id,
      name,
      parentId,
      depth,
      status: p ? agentStatus(p, facts!.lastType) : 'starting',
      waitingFor: p?.parked ? waitingFor(p.parked, p.questions) : null,
      step: p?.openStep?.index ?? null,
      tool: running?.name ?? null,
      tokens: p ? p.usage.inputTokens + p.usage.outputTokens : 0,
      estimated: p?.usage.estimated ?? false,
      costUsd: facts ? facts.costUsd : 0,
      children: [...(this.childOrder.get(id) ?? [])],
    };
  }
}

/** A job's row in its owner's tree: its phase as its status, what a model-running job spent. */
function jobRow(s: JobState, isRoot: boolean): TreeAgent {
  const usage = s.end?.usage ?? null;
  return {
    actorId: s.jobId, name: s.name, parentId: isRoot ? null : s.ownerId, depth: 1, status: jobTreeStatus(s.phase), waitingFor: null,
    step: null, tool: null, tokens: usage ? usage.inputTokens + usage.outputTokens : 0, estimated: usage?.estimated ?? false,
    costUsd: usage === null ? 0 : (s.end?.costUsd ?? null), children: [],
    job: {
      phase: s.phase, reason: s.reason, attempts: s.attempts, exitCode: s.end?.exitCode ?? null,
      // a job that has not ended owes nothing yet: `notified` reads as done only once it ended and told its owner
      notified: isJobEnd(s.phase) && s.notified !== null,
    },
  };
}

/** Options of `readTreeView` and `watchTree`. */
export interface TreeWatchOptions {
  reader: Pick<LogReader, 'read' | 'readTree' | 'followTree'>;
  rootId: string;
}

/** The tree of `rootId` as its logs say now. */
export async function readTreeView(o: TreeWatchOptions): Promise<TreeView> {
  const fold = new TreeFold(o.rootId);
  for await (const e of followTree({ reader: o.reader, rootId: o.rootId })) fold.apply(e);
  return fold.view();
}

/**
 * The tree of `rootId` as it changes: its view as of now first, then (until `signal` aborts) a view
 * after each event of it that is committed, with the event that made it.
 */
export async function* watchTree(o: TreeWatchOptions & { signal: AbortSignal }): AsyncGenerator<{ view: TreeView; event: TreeClientEvent | null }> {
  const fold = new TreeFold(o.rootId);
  const projections = new Map<string, Projection>();
  let last = 0;
  for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections })) {
    fold.apply(e);
    last = e.streamSeq;
  }
  yield { view: fold.view(), event: null };
  // on from the last commit read (its events are skipped as seen: `followTree` folds each once)
  for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections, afterStreamSeq: Math.max(0, last - 1), signal: o.signal })) {
    fold.apply(e);
    yield { view: fold.view(), event: e };
  }
}

/** Options of `watchTreeThrough`. */
export interface TransportTreeOptions {
  transport: ClientTransport;
  rootId: string;
  /** The stream sequence of the tree's last commit as of now (0: none yet): the first view is the tree as of it. */
  endStreamSeq: number;
  signal: AbortSignal;
}

/**
 * `watchTree` over a client transport (the gateway's): the tree's commits from its first, each
 * event folded into its actor's projection and the same `TreeFold`, so a tree drawn through the
 * gateway is the tree a local reader draws. Its view once the commit at `endStreamSeq` is in,
 * then a view after each event.
 */
export async function* watchTreeThrough(o: TransportTreeOptions): AsyncGenerator<{ view: TreeView; event: TransportEvent | null }> {
  const fold = new TreeFold(o.rootId);
  const projections = new Map<string, Projection>();
  let caughtUp = o.endStreamSeq === 0;
  if (caughtUp) yield { view: fold.view(), event: null };
  const it = o.transport.follow({ agentId: o.rootId, tree: true, signal: o.signal })[Symbol.asyncIterator]();
  let next: Promise<IteratorResult<TransportEvent>> | null = null;
  try {
    for (;;) {
      next ??= it.next();
      const r = await next;
      next = null;
      if (r.done) return;
      const e = r.value;
      let p = projections.get(e.actorId);
      if (!p) projections.set(e.actorId, (p = emptyProjection(e.actorId)));
      if (e.event.seq <= p.seq) continue;
      foldEvent(p, e.event);
      fold.apply({ actorId: e.actorId, event: e.event, projection: p });
      if (caughtUp) {
        yield { view: fold.view(), event: e };
        continue;
      }
      if (e.streamSeq < o.endStreamSeq) continue;
      // the last commit's other events come with it: it is over when none is ready by the next
      // turn of the event loop (the gateway sends a commit's events one after another)
      next = it.next();
      const more = await Promise.race([next.then(() => true), new Promise<false>((resolve) => setImmediate(() => resolve(false)))]);
      if (more) continue;
      caughtUp = true;
      yield { view: fold.view(), event: null };
    }
  } finally {
    void it.return?.().catch(() => {});
  }
}

/** What a parked agent waits on; for questions, the option IDs each offers (none: free text only). */
function waitingFor(parked: NonNullable<Projection['parked']>, questions: Projection['questions']): NonNullable<TreeAgent['waitingFor']> {
  if (parked.waitingFor !== 'question') return { kind: parked.waitingFor, ids: [...parked.ids] };
  const options = Object.fromEntries(parked.ids.map((id) => [id, (questions?.[id]?.options ?? []).map((o) => o.id)]));
  return { kind: 'question', ids: [...parked.ids], options };
}
