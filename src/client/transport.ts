import type { ActorEvent } from '../protocol/events.js';
import type { GoalChange, PersonAnswer } from './messages.js';

// The port every client goes through (design §11): what it reads (an agent's log, or its tree's,
// from a cursor) and what it sends (a person's commands, each one inbox message). The bus
// transport speaks NATS itself; the gateway transport speaks the gateway's protocol. A printer or
// a prompter over it does not know which it has.

/** One committed event as a transport hands it: the actor whose log holds it, its commit's stream sequence, the event parsed. */
export interface TransportEvent {
  actorId: string;
  /** The stream sequence of the commit holding it: a tree's cursor. */
  streamSeq: number;
  event: ActorEvent;
}

/** What to follow: one agent's log, or (`tree`) every log of its tree. */
export interface FollowSpec {
  agentId: string;
  /** The agent's log root, where the client knows it already (a transport finds it otherwise). */
  rootId?: string;
  tree?: boolean;
  /** Commits after this stream sequence (absent: from the first). */
  afterStreamSeq?: number;
  /** One agent's events after this log seq (not with `tree`: each log of a tree has its own). */
  afterSeq?: number;
  /** Ends the following: the iterable ends when it aborts. */
  signal: AbortSignal;
}

/** A person's command, as a transport sends it: each is one inbox message. */
export type ClientCommand =
  /** The next task of an existing agent (a follow-up while it is in a turn), with the settings of its last turn. */
  | { type: 'submit'; agentId: string; task: string }
  | { type: 'steer' | 'inject' | 'follow_up'; agentId: string; text: string }
  /** `planDigest`: the plan the person was shown (the bus transport needs it; the gateway looks it up when absent). */
  | { type: 'approve'; agentId: string; approvalId: string; planDigest?: string; always?: boolean }
  | { type: 'deny'; agentId: string; approvalId: string; planDigest?: string; reason?: string }
  | { type: 'answer'; agentId: string; questionId: string; answer: PersonAnswer }
  | { type: 'interrupt'; agentId: string }
  /** Ask for a checkpoint at the agent's next step boundary. */
  | { type: 'compact'; agentId: string }
  | { type: 'goal'; agentId: string; change: GoalChange };

/**
 * How a client reaches a runtime. `follow` yields each committed event once, in commit order,
 * live until its signal aborts: a connection or consumer lost on the way is made again and
 * resumed from the last commit seen. `send` resolves with the message's ID once the inbox took it.
 */
export interface ClientTransport {
  follow(spec: FollowSpec): AsyncIterable<TransportEvent>;
  send(command: ClientCommand): Promise<string>;
}
