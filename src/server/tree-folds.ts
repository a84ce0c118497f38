import { followTree } from '../client/follower.js';
import type { ActorEvent } from '../protocol/events.js';
import { TreeFold } from '../client/tree.js';
import { createJobState, foldJobEvent, type JobState } from '../store/job-projection.js';
import type { LogReader } from '../store/log-port.js';
import type { Projection } from '../store/projection.js';
import { emptyTurnFacts, foldTurnFacts, type TurnFacts } from './turn-facts.js';

// The gateway's reads fold each tree once: a tree's fold is kept between requests and moved on
// from the last commit it holds, so a read costs the commits since the last one (and one
// round trip when there are none), not a re-fold of the whole run from its first commit.

/** A tree folded to the end of its logs as of the last read. */
export interface FoldedTree {
  fold: TreeFold;
  projections: Map<string, Projection>;
  /** What each actor's projection does not keep (its turns' tasks, ends, errors; when each person was asked), by actor. */
  facts: Map<string, TurnFacts>;
  /** Each job of the tree folded from its own log (`job-projection.ts`), by job ID: a log that starts with `job/created`. */
  jobs: Map<string, JobState>;
  /** The commit time of each job's last `job/started` and of its end, by job ID (its state keeps ms, not the end's time). */
  jobTimes: Map<string, { createdAt: string; startedAt: string | null; endedAt: string | null }>;
  /** The stream sequence of the last commit folded (0: none). */
  streamSeq: number;
}

/** Every tree the gateway was asked about, each folded as far as its last read. */
export class TreeFolds {
  private readonly trees = new Map<string, FoldedTree>();
  /** The read of each tree under way: a tree is moved on by one read at a time. */
  private readonly turns = new Map<string, Promise<unknown>>();

  constructor(private readonly reader: Pick<LogReader, 'read' | 'readTree' | 'followTree'>) {}

  /**
   * Moves the tree of `rootId` on to the end of its logs as of now, then gives it to `use`. Reads
   * of one tree take turns, so `use` sees the fold whole (never halfway through a commit) and
   * returns before the next read moves it on: what it keeps must be copied out.
   */
  with<T>(rootId: string, use: (tree: FoldedTree) => T): Promise<T> {
    const run = (this.turns.get(rootId) ?? Promise.resolve()).then(async () => use(await this.advance(rootId)));
    const settled = run.catch(() => {});
    this.turns.set(rootId, settled);
    // the last read of a tree leaves no turn behind
    void settled.then(() => {
      if (this.turns.get(rootId) === settled) this.turns.delete(rootId);
    });
    return run;
  }

  /** Forgets every tree not in `rootIds` (gone from the directory): what is kept stays bounded by what exists. */
  keepOnly(rootIds: ReadonlySet<string>): void {
    for (const id of this.trees.keys()) if (!rootIds.has(id) && !this.turns.has(id)) this.trees.delete(id);
  }

  private async advance(rootId: string): Promise<FoldedTree> {
    const tree = this.trees.get(rootId) ?? { fold: new TreeFold(rootId), projections: new Map<string, Projection>(), facts: new Map<string, TurnFacts>(), jobs: new Map<string, JobState>(), jobTimes: new Map(), streamSeq: 0 };
    try {
      // a read ends at the end of a whole commit, so the next one starts after it
      for await (const e of followTree({ reader: this.reader, rootId, projections: tree.projections, afterStreamSeq: tree.streamSeq })) {
        tree.fold.apply(e);
        let facts = tree.facts.get(e.actorId);
        if (!facts) tree.facts.set(e.actorId, (facts = emptyTurnFacts()));
        foldTurnFacts(facts, e);
        foldJob(tree, e.actorId, e.event);
        tree.streamSeq = e.streamSeq;
      }
    } catch (err) {
      // a read cut short may have folded part of a commit: the next one folds the tree anew
      this.trees.delete(rootId);
      throw err;
    }
    this.trees.set(rootId, tree);
    return tree;
  }
}

/** Folds one event of a tree into the job it belongs to, when its log is a job's. */
function foldJob(tree: FoldedTree, actorId: string, e: ActorEvent): void {
  if (e.type === 'job/created') {
    if (tree.jobs.has(actorId)) return;
    tree.jobs.set(actorId, createJobState(e));
    tree.jobTimes.set(actorId, { createdAt: e.at, startedAt: null, endedAt: null });
    return;
  }
  const job = tree.jobs.get(actorId);
  if (!job) return;
  foldJobEvent(job, e);
  const times = tree.jobTimes.get(actorId)!;
  if (e.type === 'job/started') times.startedAt = e.at;
  if (e.type === 'job/phase' && e.data.end !== null) times.endedAt = e.at;
}
