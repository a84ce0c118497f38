import { pendingApprovals, type Projection } from '../store/projection.js';

// setTimeout clamps longer delays to 1 ms.
const MAX_TIMER_MS = 2_147_483_647;

/** What an approval watch needs from its actor. */
export interface ApprovalHost {
  readonly projection: Projection;
  nowMs(): number;
  /** True while the actor may act (open, not halted). */
  active(): boolean;
  /** True while something is staged, queued or running. */
  busy(): boolean;
  /** Resolves when the actor has nothing left to do. */
  idle(): Promise<void>;
  /** Sends a `tick` with the time to the machines and runs what they ask for. */
  tick(nowMs: number): void;
  /** Stages (and commits) `actor/parked`: the actor waits on a person for these approvals. */
  park(approvalIds: string[], commands: string[]): void;
}

/** What a person runs to answer each approval of an agent. */
export function answerCommands(actorId: string, approvalIds: string[]): string[] {
  return approvalIds.flatMap((id) => [`actorloop approve ${actorId} ${id}`, `actorloop deny ${actorId} ${id} --reason "<why>"`]);
}

/**
 * The approvals an actor waits on: re-arms the soonest absolute expiry as a timer (a `tick` past
 * it denies the call), and when the actor can do nothing but wait for a person commits that as
 * `actor/parked` (once per set of approvals) and tells the callers waiting for it.
 */
export class ApprovalWatch {
  private timer: NodeJS.Timeout | null = null;
  private waiters: Array<(approvalIds: string[]) => void> = [];

  constructor(private readonly host: ApprovalHost) {}

  /** Approval IDs still waiting for a person, soonest expiry first. */
  pending(): string[] {
    return pendingApprovals(this.host.projection).map((a) => a.approvalId);
  }

  /** Resolves with the pending approval IDs once the actor is idle with approvals pending. */
  whenAwaiting(): Promise<string[]> {
    const p = new Promise<string[]>((resolve) => this.waiters.push(resolve));
    this.check();
    return p;
  }

  /** After a commit: the actor may be parked now, and a waiter answerable. */
  committed(): void {
    if (this.waiters.length > 0 || this.unparked()) queueMicrotask(() => this.check());
  }

  /** True when approvals are pending and the log does not yet say the actor waits on exactly them. */
  private unparked(): boolean {
    const ids = this.pending();
    const parked = this.host.projection.parked;
    return ids.length > 0 && (parked?.waitingFor !== 'approval' || parked.ids.join() !== ids.join());
  }

  private check(): void {
    if ((this.waiters.length === 0 && !this.unparked()) || this.pending().length === 0) return;
    this.host.idle().then(
      () => {
        const ids = this.pending();
        if (ids.length === 0 || this.host.busy()) return;
        // the fact first: a client following the log learns of the wait from it, never from silence
        if (this.host.active() && this.unparked()) this.host.park(ids, answerCommands(this.host.projection.actorId, ids));
        const waiters = this.waiters;
        this.waiters = [];
        for (const w of waiters) w(ids);
      },
      () => {},
    );
  }

  /** Arms a timer for the soonest pending approval's absolute expiry (persisted, so re-armed after a crash). */
  arm(): void {
    this.clear();
    const next = pendingApprovals(this.host.projection)[0];
    if (!next || !this.host.active()) return;
    const delay = Math.max(0, next.expiresAt - this.host.nowMs());
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.host.active()) return;
      this.host.tick(this.host.nowMs());
      this.arm();
    }, Math.min(delay, MAX_TIMER_MS));
    this.timer.unref?.();
  }

  /** Stops the timer (the turn ended, or the actor stopped). */
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
