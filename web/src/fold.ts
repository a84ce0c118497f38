import type { ActorEvent } from '../../src/protocol/events.js';
import { agentStatus } from '../../src/client/status.js';
import { createJobState, foldJobEvent, type JobState } from '../../src/store/job-projection.js';
import { emptyProjection, foldEvent, pendingApprovals, pendingQuestions, type Projection } from '../../src/store/projection.js';
import type { PendingItem } from './pending-item.js';
import type { StreamEvent } from './stream-event.js';

// The page is a projection like any other (design §11): it folds the events it was sent with the
// projection code every reader uses, so the state it shows at stream position N (live: the last)
// is what the log says at N, never a guess.

/** What the page knows of one actor at a position of the stream. */
export interface ActorState {
  actorId: string;
  projection: Projection;
  /** Its events up to the position, in log order. */
  events: ActorEvent[];
  /** USD of its attempts so far; null once any had no known price. */
  costUsd: number | null;
  /** A child's name and parent, from its parent's spawn request. */
  spawnedAs?: { name: string; parentId: string; depth: number };
  /** A job's state, when its log is a job's (it starts with `job/created`): folded by the job projection every reader uses. */
  job?: JobState;
}

/**
 * A tree's fold that moves forward: each event of the stream is folded once, so following a live
 * run costs one fold an event, not a re-fold of the whole stream per update.
 */
export class TreeFolder {
  /** The actors folded so far, by ID. */
  readonly actors = new Map<string, ActorState>();
  /** How many events of the stream are folded. */
  position = 0;

  /** `onStatus`: told each actor's status after each event folded, with the event's stream position. */
  constructor(private readonly onStatus?: (actorId: string, status: string, streamSeq: number) => void) {}

  /** Folds the stream's events from the current position up to `upTo`. */
  advance(stream: readonly StreamEvent[], upTo: number): this {
    for (; this.position < Math.min(upTo, stream.length); this.position++) {
      const { event, streamSeq } = stream[this.position]!;
      this.take(event);
      if (this.onStatus) this.onStatus(event.actor, statusOf(this.actors.get(event.actor)!), streamSeq);
    }
    return this;
  }

  private of(id: string): ActorState {
    let a = this.actors.get(id);
    if (!a) this.actors.set(id, (a = { actorId: id, projection: emptyProjection(id), events: [], costUsd: 0 }));
    return a;
  }

  private take(event: ActorEvent): void {
    const a = this.of(event.actor);
    // a resumed stream never repeats an event, but a log's own order is the fold's contract
    if (event.seq <= a.projection.seq) return;
    // a copy: the fold keeps parts of what it folds, and time travel folds the same events again
    foldEvent(a.projection, structuredClone(event));
    a.events.push(event);
    if (event.type === 'attempt/end') {
      const c = event.data.costUsd;
      a.costUsd = a.costUsd === null || c === null || c === undefined ? (c === undefined ? a.costUsd : null) : a.costUsd + c;
    }
    // a job's log folds into its job state; the agent projection above only counts its seqs
    if (event.type === 'job/created') a.job ??= createJobState(event);
    else if (a.job) foldJobEvent(a.job, event);
    if (event.type === 'subagent/spawn_requested') {
      this.of(event.data.childId).spawnedAs = { name: event.data.name, parentId: event.actor, depth: event.data.depth };
    }
  }
}

/**
 * The actors of a tree folded from the first `upTo` events of its stream (time travel: from the
 * start); `onStatus` is told each actor's status after each event, as `TreeFolder`'s is.
 */
export function foldTree(stream: readonly StreamEvent[], upTo: number, onStatus?: (actorId: string, status: string, streamSeq: number) => void): Map<string, ActorState> {
  return new TreeFolder(onStatus).advance(stream, upTo).actors;
}

/**
 * The badge of an actor as its log says: the status every client shows (`agentStatus`), a wait
 * named by what it waits for.
 */
export function statusOf(a: ActorState): string {
  // a job's badge is its phase (`running`, `completed`, `interrupted`…), not an agent's status
  if (a.job) return a.job.phase;
  return badge(agentStatus(a.projection, a.events[a.events.length - 1]?.type ?? null), a.projection.parked?.waitingFor ?? null);
}

const WAITING: Record<string, string> = { approval: 'waiting_approval', question: 'waiting_answer' };

/** The badge of a status: `waiting` named by what it waits for (the page says which a person is asked for). */
export function badge(status: string, waitingFor: string | null): string {
  return status === 'waiting' && waitingFor ? (WAITING[waitingFor] ?? status) : status;
}

/** Input and output tokens of every attempt of an actor. */
export function tokensOf(a: ActorState): number {
  return a.projection.usage.inputTokens + a.projection.usage.outputTokens;
}

/**
 * Every approval and question pending in the folded tree, soonest to expire first: what "Needs
 * you" shows of a tree, at the position shown (time travel shows what waited then).
 */
export function pendingInTree(folded: ReadonlyMap<string, ActorState>, nameOf: (actorId: string) => string, rootId: string): PendingItem[] {
  const items: PendingItem[] = [];
  for (const a of folded.values()) {
    // most actors of a big tree never asked anything: no list made for them
    if (a.projection.approvals === undefined && a.projection.questions === undefined) continue;
    const actorName = nameOf(a.actorId);
    for (const x of pendingApprovals(a.projection)) {
      items.push({
        kind: 'approval', actorId: a.actorId, actorName, rootId,
        approval: {
          approvalId: x.approvalId, tool: x.tool, toolVersion: x.toolVersion, planDigest: x.planDigest, preview: x.preview ?? null,
          plan: x.plan ?? null, reason: x.reason ?? null, rule: x.rule ?? null, expiresAt: x.expiresAt,
        },
      });
    }
    for (const q of pendingQuestions(a.projection)) {
      items.push({
        kind: 'question', actorId: a.actorId, actorName, rootId,
        question: { questionId: q.questionId, question: q.question, options: q.options, allowFreeText: q.allowFreeText, sensitive: q.sensitive, expiresAt: q.expiresAt },
      });
    }
  }
  return items.sort((x, y) => expiryOf(x) - expiryOf(y));
}

const expiryOf = (i: PendingItem): number => (i.kind === 'approval' ? i.approval.expiresAt : i.question.expiresAt);
