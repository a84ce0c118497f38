import type { ActorEvent } from '../protocol/events.js';
import { foldEvent, type Projection } from '../store/projection.js';
import { statusOf, type ClientStatus } from './status.js';
import type { ClientTransport } from './transport.js';

// The one turn follower (design §11): every client that follows a turn to its end (the CLI over
// the bus, the CLI through the gateway) reads it here, and the decisions of following are made
// once: an event seen already is skipped, each is folded into the agent's projection, an answer
// the agent refused is a person's to give again, a park that waits on a person is said, and the
// turn's end (not a goal's continuation, not the end of a turn before the task's) ends it. What
// is printed and how a person is asked is the caller's.

/** A `turn/end` event. */
export type TurnEndEvent = Extract<ActorEvent, { type: 'turn/end' }>;

/** What a turn's end says, as a client prints it. */
export interface TurnEndFacts {
  turnId: string;
  outcome: TurnEndEvent['data']['outcome'];
  reason: string | null;
  answer: string | null;
  /** USD of the turn's attempts; null when the model has no known price. */
  costUsd: number | null;
  /** Tokens of this turn's attempts. */
  usage?: TurnEndEvent['data']['usage'];
}

/** The facts of a `turn/end`. */
export function turnEndOf(e: TurnEndEvent): TurnEndFacts {
  return { turnId: e.turn!, outcome: e.data.outcome, reason: e.data.reason, answer: e.data.answer, costUsd: e.data.costUsd ?? null, usage: e.data.usage };
}

/** What following a turn gives, in the order the log says it. */
export type TurnStep =
  /** A committed event, folded into the projection. */
  | { kind: 'event'; event: ActorEvent; streamSeq: number; projection: Projection; status: ClientStatus }
  /** The agent waits on a person for these approvals or questions (pending, not answered by this client). */
  | { kind: 'parked'; waiting: string[]; projection: Projection }
  /** The turn ended: the last step; nothing after its end is read or folded. */
  | { kind: 'ended'; event: TurnEndEvent; projection: Projection };

/** What `followTurnSteps` needs. */
export interface TurnFollowOptions {
  transport: ClientTransport;
  agentId: string;
  /** The agent's log root, where the caller knows it (the bus transport reads the directory otherwise). */
  rootId?: string;
  /** The agent's state folded so far (not copied: the follower folds into it); events after its `seq` are read. */
  from: Projection;
  /** Approvals and questions this client answered (ID → message ID); one the agent refused is dropped. */
  answered: Map<string, string>;
  /** Events up to this log seq are folded and not handed as steps; a turn end among them is not the one followed. */
  quietUntilSeq?: number;
  /**
   * The message carrying the task followed (`run --continue`, `--last`): steps start with its
   * receipt, and a turn that ends before taking it (the one running when it came) is followed past.
   */
  taskMessageId?: string;
  /** Say a park the log already holds before the first event (a host's agent may be waiting already). */
  parkedAtStart?: boolean;
  /** Ends the following. */
  signal: AbortSignal;
}

/**
 * The approvals a person must answer, from the log alone: those the agent's `actor/parked` names
 * that are still pending and whose answer this client has not sent. Empty when it is not parked.
 */
export function awaitingPerson(p: Projection, answered: ReadonlyMap<string, string>): string[] {
  if (!p.openTurn || !p.parked) return [];
  const pending = (id: string): boolean =>
    (p.parked!.waitingFor === 'approval' ? p.approvals?.[id]?.state : p.questions?.[id]?.state) === 'pending';
  return p.parked.ids.filter((id) => pending(id) && !answered.has(id));
}

/** True while a job the agent started has not sent its notice. */
function jobsRunning(p: Projection): boolean {
  return Object.values(p.jobs ?? {}).some((j) => !j.notified);
}

/**
 * Follows an agent's turn to its end over a transport. A step is read only when the caller asks
 * for the next: after `ended` nothing more is folded, so a caller following on from the same
 * projection (the next turn) misses nothing.
 */
export async function* followTurnSteps(o: TurnFollowOptions): AsyncGenerator<TurnStep> {
  const p = o.from;
  const { answered } = o;
  let quietUntil = o.taskMessageId !== undefined ? Infinity : (o.quietUntilSeq ?? 0);
  if (o.parkedAtStart) {
    const waiting = awaitingPerson(p, answered);
    if (waiting.length > 0) yield { kind: 'parked', waiting, projection: p };
  }
  const events = o.transport.follow({ agentId: o.agentId, afterSeq: p.seq, signal: o.signal, ...(o.rootId !== undefined ? { rootId: o.rootId } : {}) });
  for await (const { event, streamSeq } of events) {
    // a source resumed from a cursor may hand an event seen already: each is folded once
    if (event.seq <= p.seq) continue;
    foldEvent(p, event);
    if (event.type === 'inbox/cancelled') {
      // an answer of ours the agent refused: the approval (or question) is a person's to answer again
      for (const [id, messageId] of answered) if (messageId === event.data.messageId) answered.delete(id);
    }
    if (quietUntil === Infinity && p.inbox[o.taskMessageId!] !== undefined) quietUntil = Math.max(o.quietUntilSeq ?? 0, event.seq - 1);
    if (event.seq <= quietUntil) continue;
    yield { kind: 'event', event, streamSeq, projection: p, status: statusOf(p) };
    if (event.type === 'actor/parked') {
      const waiting = awaitingPerson(p, answered);
      if (waiting.length > 0) yield { kind: 'parked', waiting, projection: p };
      continue;
    }
    // a turn whose goal goes on is followed into its continuation: the goal's work is the run's
    // and a completed turn that left jobs running is followed into the turn their notices start:
    // a job the run started is the run's work too
    if (event.type === 'turn/end' && event.data.goalContinues !== true && !(event.data.outcome === 'completed' && jobsRunning(p))) {
      // the turn that was running when the task came: the task's own turn comes after it
      const task = o.taskMessageId !== undefined ? p.inbox[o.taskMessageId] : undefined;
      if (task?.state === 'pending') continue;
      yield { kind: 'ended', event, projection: p };
      return;
    }
  }
}
