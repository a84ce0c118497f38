import type { DirectoryEntry } from '../../bus/directory.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { SubagentLimits } from '../../protocol/subagents.js';

/** A child's directory entry as its parent makes it (the directory stamps times and status). */
export type ChildEntry = Omit<DirectoryEntry, 'createdAt' | 'updatedAt' | 'status'>;

/**
 * What an agent reaches the rest of its tree through (design §6b): it creates children and writes
 * to other actors' inboxes, on the actors' channel, never a person's. Everything it does is
 * idempotent by ID, so a spawn or send retried after a crash creates and delivers nothing twice.
 */
export interface SubagentPort {
  /** Depth, width and what a parent's end does to its children, from the config. */
  readonly limits: SubagentLimits;
  /**
   * Creates a child once: its directory entry (kept when it exists), its task in its inbox
   * (`task.id` is derived from the spawn request, so a second publish is deduped), and its hosting
   * here when this process may take its lease (else a host takes it on its mail). `fresh`: the
   * request was committed by this very call, so the child cannot exist yet and is not looked up.
   */
  spawn(entry: ChildEntry, task: InboxMessage, opts?: { fresh?: boolean }): Promise<void>;
  /** Publishes to another actor's inbox on the actors' channel; resolves once the inbox accepted it (the PubAck). */
  send(msg: InboxMessage): Promise<void>;
  /**
   * Takes a place in the tree for a child under `token` (its spawn request, a follow-up), unless
   * `max` children of the tree hold one: exact across hosts, and a token taken again is taken once.
   * Refused: how many hold one.
   */
  takeSlot(rootId: string, childId: string, token: string, max: number): Promise<{ taken: true } | { taken: false; running: number }>;
  /** Gives back a child's place held under `tokens` (null: all of them). Idempotent. */
  releaseSlot(rootId: string, childId: string, tokens: string[] | null): Promise<void>;
  /** Resolves once the child's log holds the start of its first turn (a `continuable` spawn returns then). */
  firstTurn(rootId: string, childId: string, signal: AbortSignal): Promise<void>;
  /** A git worktree for a child under the data dir (branch `actorloop/<childId>`); null when this runtime makes none. */
  worktree?(childId: string, workspace: string): Promise<string>;
  /** Why a workspace cannot have worktrees (not in a git repository, no commit yet), or null when it can. */
  worktreeProblem?(workspace: string): Promise<string | null>;
  /** The diff of a child's worktree against where it started, or null when nothing changed. */
  worktreeDiff?(worktree: string): Promise<string | null>;
}
