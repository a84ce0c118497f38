import type { Logger } from 'pino';
import { mailStartsTurn, NEEDS_HOST, statusAfter, type ActorDirectory, type ActorStatus } from '../../bus/directory.js';

/**
 * Keeps the directory's status of hosted actors in step with their logs (a cache of them):
 * running at a turn's start or an answered approval, waiting on a request for one, the outcome at
 * a turn's end (running while a child still owes its notice). Without it a finished agent stayed
 * `running`: every takeover rehydrated every agent ever run, and a tree counted every child it
 * ever had as running. Writes of one actor go in commit order; a failed write is logged (the next
 * status change or `runs` from the log corrects it).
 */
export class DirectoryStatuses {
  private readonly writes = new Map<string, Promise<void>>();

  constructor(
    private readonly directory: ActorDirectory,
    private readonly logger: Logger,
    private readonly clock: { nowMs(): number } = { nowMs: () => Date.now() },
  ) {}

  /** An actor's commit: writes the status its last status-moving event gives, if any. */
  committed(actorId: string, events: ReadonlyArray<{ type: string; data?: unknown }>): void {
    let status: ActorStatus | null = null;
    for (const e of events) status = statusAfter(e) ?? status;
    if (status === null) return;
    const to = status;
    this.write(actorId, (entry) => entry.status !== to ? to : null);
  }

  /**
   * Mail that starts a turn is about to be handed to an idle actor: the directory says `running`
   * before the actor takes it (resolves once it does). A host that dies anywhere after, before
   * its own turn/start's write lands, leaves the actor for another host to take on: its scan
   * looks only at `running` and `waiting` actors, and mail taken and acked wakes nobody. Mail
   * that starts no turn after all leaves it `running` until its next status (a takeover finds
   * nothing to do).
   */
  mailArrives(actorId: string, kind: string): Promise<void> {
    if (!mailStartsTurn(kind)) return Promise.resolve();
    return this.write(actorId, (entry) => (NEEDS_HOST.has(entry.status) ? null : 'running'));
  }

  /** Writes the status `to` gives for the entry as it is (null: none), after the actor's earlier writes. */
  private write(actorId: string, to: (entry: { status: ActorStatus }) => ActorStatus | null): Promise<void> {
    const prev = this.writes.get(actorId) ?? Promise.resolve();
    const next = prev.then(async () => {
      const entry = await this.directory.get(actorId);
      const status = entry ? to(entry) : null;
      if (entry && status !== null) await this.directory.put({ ...entry, status, updatedAt: new Date(this.clock.nowMs()).toISOString() });
    }).catch((err: unknown) => this.logger.warn({ err, actorId }, 'directory status not updated'))
      .finally(() => {
        if (this.writes.get(actorId) === next) this.writes.delete(actorId);
      });
    this.writes.set(actorId, next);
    return next;
  }

  /** Resolves once every write begun so far has ended (before the connection closes). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.writes.values()]);
  }
}
