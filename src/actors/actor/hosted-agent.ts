import type { Projection } from '../../store/projection.js';
import type { ActorEvent, TurnOutcome } from '../../protocol/events.js';
import type { AgentActorRef } from './agent-logic.js';

/** How a turn ended, as `turn/end` recorded it. */
export interface TurnEnded {
  turnId: string;
  outcome: TurnOutcome;
  reason: string | null;
  answer: string | null;
  /** USD of the turn's attempts; null when the model has no known price. */
  costUsd: number | null;
  /** Tokens of this turn's attempts (the agent's total is its projection's). */
  usage?: Extract<ActorEvent, { type: 'turn/end' }>['data']['usage'];
}

/**
 * What a host reads of an agent it hosts: its identity, its state, and when it waits. The actor
 * behind it has more (staging, recovery, the pump), which only the supervisor may drive; a host
 * builder depends on this instead, as `person-watch.ts` depends on its narrow host.
 */
export interface HostedAgent {
  readonly actorId: string;
  /** The root of its tree (itself for a top-level agent): whose log stream holds its events. */
  readonly rootId: string;
  /** The agent as an XState actor: `getSnapshot()`, `subscribe()`. */
  readonly ref: AgentActorRef;
  /** Its state as its committed events fold it. */
  readonly projection: Projection;
  /** Resolves when the open (or next) turn ends. */
  whenTurnEnds(): Promise<TurnEnded>;
  /** Resolves with the pending approval IDs once it can do nothing but wait for a person. */
  whenAwaitingApproval(): Promise<string[]>;
  /** Resolves with the pending question IDs once it can do nothing but wait for their answers. */
  whenAwaitingQuestion(): Promise<string[]>;
  /** Resolves when it has nothing left to do and no tool is running. */
  idle(): Promise<void>;
}
