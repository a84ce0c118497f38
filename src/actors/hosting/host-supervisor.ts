import type { DirectoryEntry } from '../../bus/directory.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { LogReader } from '../../store/log-port.js';
import type { AgentActorRef } from '../actor/agent-logic.js';
import type { HostedAgent } from '../actor/hosted-agent.js';

/**
 * The supervisor as a host builder (and an embedder, `runtime.supervisor`) sees it: what it
 * hosts reads as a HostedAgent, so staging, recovery and the pump stay the supervisor's own.
 * The class keeps its full actor for the code inside this package.
 */
export interface HostSupervisor {
  /** Reads and follows the logs of the agents it hosts. */
  readonly reader: LogReader;
  /** Creates an agent (its directory entry and first events) and hosts it. */
  create(entry: Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>, opts?: { epoch?: number }): Promise<HostedAgent>;
  /** Rehydrates an agent from its snapshot and log tail, recovering a turn a crash left open. */
  hydrate(actorId: string, onHydrated?: (actor: HostedAgent) => void, opts?: { epoch?: number }): Promise<{ actor: HostedAgent; recovered: boolean; entry: DirectoryEntry }>;
  /** Messages waiting in an actor's inbox. */
  inboxPending(actorId: string): Promise<number>;
  /** Puts a message in an actor's durable inbox. */
  send(msg: InboxMessage): Promise<void>;
  /** Who takes the lease of a child an agent here creates: an epoch to host it here, null elsewhere. */
  setAdopter(adopter: (actorId: string) => Promise<number | null>): void;
  /** True when this process hosts the actor now. */
  hosts(actorId: string): boolean;
  /** The root of an actor hosted here now. */
  rootOf(actorId: string): string | undefined;
  /** The XState actor of an actor hosted here now. */
  refOf(actorId: string): AgentActorRef | undefined;
  /** Hosts an actor whose lease this process took. */
  adopt(entry: DirectoryEntry): Promise<void>;
  /** Listens for inbox mail, calling `onUnhosted` for mail to an actor not hosted here. */
  listenForMail(onUnhosted: (actorId: string) => void): Promise<void>;
  /** Stops hosting one actor (its lease moved elsewhere). */
  evict(actorId: string, reason: unknown): void;
  /** Waits until no hosted actor runs a tool, or `timeoutMs` passes. */
  quiesceTools(timeoutMs: number): Promise<void>;
  /** Stops every hosted actor; work left open resumes in the next incarnation. */
  stop(reason?: string): Promise<void>;
  /** True once `stop` was called. */
  readonly isStopped: boolean;
}
