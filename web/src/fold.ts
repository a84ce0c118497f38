import type { ActorEvent } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
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
}

/** The actors of a tree folded from the first `upTo` events of its stream. */
export function foldTree(stream: readonly StreamEvent[], upTo: number): Map<string, ActorState> {
  const actors = new Map<string, ActorState>();
  const spawns = new Map<string, { name: string; parentId: string; depth: number }>();
  const of = (id: string): ActorState => {
    let a = actors.get(id);
    if (!a) actors.set(id, (a = { actorId: id, projection: emptyProjection(id), events: [], costUsd: 0 }));
    return a;
  };
  for (const { event } of stream.slice(0, upTo)) {
    const a = of(event.actor);
    // a resumed stream never repeats an event, but a log's own order is the fold's contract
    if (event.seq <= a.projection.seq) continue;
    // a copy: the fold keeps parts of what it folds, and time travel folds the same events again
    foldEvent(a.projection, structuredClone(event));
    a.events.push(event);
    if (event.type === 'attempt/end') {
      const c = event.data.costUsd;
      a.costUsd = a.costUsd === null || c === null || c === undefined ? (c === undefined ? a.costUsd : null) : a.costUsd + c;
    }
    if (event.type === 'subagent/spawn_requested') spawns.set(event.data.childId, { name: event.data.name, parentId: event.actor, depth: event.data.depth });
  }
  for (const [id, s] of spawns) of(id).spawnedAs = s;
  return actors;
}

/**
 * The badge of an actor as its log says: killed (its last word is a death), recovering (a new
 * incarnation rehydrated it with a turn open), waiting for an approval or an answer (it parked),
 * running, the outcome of its last turn, or idle.
 */
export function statusOf(a: ActorState): string {
  const p = a.projection;
  const last = a.events[a.events.length - 1]?.type;
  if (last === 'actor/killed') return 'killed';
  if (p.openTurn && last === 'actor/rehydrated') return 'recovering';
  if (p.parked) return p.parked.waitingFor === 'approval' ? 'waiting_approval' : 'waiting_answer';
  if (p.openTurn) return 'running';
  if (p.turns === 0 && Object.values(p.inbox).some((i) => i.state === 'pending')) return 'starting';
  return p.lastTurn?.outcome ?? 'idle';
}

/** Input and output tokens of every attempt of an actor. */
export function tokensOf(a: ActorState): number {
  return a.projection.usage.inputTokens + a.projection.usage.outputTokens;
}
