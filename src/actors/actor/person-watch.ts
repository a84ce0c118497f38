import { pendingApprovals, pendingQuestions, type Projection } from '../../store/projection.js';

// setTimeout clamps longer delays to 1 ms.
const MAX_TIMER_MS = 2_147_483_647;

/** What a person is asked for: an approval of a tool call, or the answer to a question. */
export type PersonWaitKind = 'approval' | 'question';

/** What a person watch needs from its actor. */
export interface PersonWatchHost {
  readonly projection: Projection;
  nowMs(): number;
  /** True while the actor may act (open, not halted). */
  active(): boolean;
  /** True while something is staged, queued or running. */
  busy(): boolean;
  /** Resolves when the actor has nothing left to do. */
  idle(): Promise<void>;
  /** Sends a `tick` with the time to the machines (an approval past its expiry is denied, a question expired) and runs what follows. */
  tick(nowMs: number): void;
  /** Stages (and commits) `actor/parked`: the actor waits on a person for these approvals or questions. */
  park(waitingFor: PersonWaitKind, ids: string[], commands: string[]): void;
}

/** What a person runs to answer each approval of an agent. */
export function answerCommands(actorId: string, approvalIds: string[]): string[] {
  return approvalIds.flatMap((id) => [`actorloop approve ${actorId} ${id}`, `actorloop deny ${actorId} ${id} --reason "<why>"`]);
}

/** What a person runs to answer each question of an agent: free text or an option, as the question takes. */
export function questionCommands(actorId: string, p: Projection, questionIds: string[]): string[] {
  return questionIds.flatMap((id) => {
    const q = p.questions?.[id];
    const lines: string[] = [];
    if (!q || q.allowFreeText) lines.push(`actorloop answer ${actorId} ${id} "<text>"`);
    if (q && q.options.length > 0) lines.push(`actorloop answer ${actorId} ${id} --option <${q.options.map((o) => o.id).join('|')}>`);
    return lines;
  });
}

/**
 * What an actor waits on a person for (approvals first: the questions of a step whose other
 * call waits for an approval are asked once it is answered), re-arming the soonest absolute
 * expiry of either as a timer (a `tick` past it denies the call or expires the question). When
 * the actor can do nothing but wait, it commits that as `actor/parked` (once per set of IDs) and
 * tells the callers waiting for it.
 */
export class PersonWatch {
  private timer: NodeJS.Timeout | null = null;
  private waiters: Array<{ kind: PersonWaitKind; resolve: (ids: string[]) => void }> = [];

  constructor(private readonly host: PersonWatchHost) {}

  /** IDs of one kind still waiting for a person, soonest expiry first. */
  pending(kind: PersonWaitKind): string[] {
    return kind === 'approval'
      ? pendingApprovals(this.host.projection).map((a) => a.approvalId)
      : pendingQuestions(this.host.projection).map((q) => q.questionId);
  }

  /** What the actor waits for now, if anything: approvals first, then questions. */
  private wait(): { waitingFor: PersonWaitKind; ids: string[] } | null {
    const approvals = this.pending('approval');
    if (approvals.length > 0) return { waitingFor: 'approval', ids: approvals };
    const questions = this.pending('question');
    return questions.length > 0 ? { waitingFor: 'question', ids: questions } : null;
  }

  /** Resolves with the pending IDs of `kind` once the actor is idle with some pending. */
  whenAwaiting(kind: PersonWaitKind = 'approval'): Promise<string[]> {
    const p = new Promise<string[]>((resolve) => this.waiters.push({ kind, resolve }));
    this.check();
    return p;
  }

  /** After a commit: the actor may be parked now, and a waiter answerable. */
  committed(): void {
    if (this.waiters.length > 0 || this.unparked()) queueMicrotask(() => this.check());
  }

  /** True when the actor waits for a person and the log does not yet say it waits on exactly that. */
  private unparked(): boolean {
    const w = this.wait();
    const parked = this.host.projection.parked;
    return w !== null && (parked?.waitingFor !== w.waitingFor || parked.ids.join() !== w.ids.join());
  }

  private check(): void {
    if ((this.waiters.length === 0 && !this.unparked()) || this.wait() === null) return;
    this.host.idle().then(
      () => {
        const w = this.wait();
        if (w === null || this.host.busy()) return;
        // the fact first: a client following the log learns of the wait from it, never from silence
        if (this.host.active() && this.unparked()) {
          const id = this.host.projection.actorId;
          const commands = w.waitingFor === 'approval' ? answerCommands(id, w.ids) : questionCommands(id, this.host.projection, w.ids);
          this.host.park(w.waitingFor, w.ids, commands);
        }
        const ready = this.waiters.filter((x) => this.pending(x.kind).length > 0);
        this.waiters = this.waiters.filter((x) => !ready.includes(x));
        for (const x of ready) x.resolve(this.pending(x.kind));
      },
      () => {},
    );
  }

  /** Arms a timer for the soonest pending expiry, approval or question (persisted, so re-armed after a crash). */
  arm(): void {
    this.clear();
    if (!this.host.active()) return;
    const next = Math.min(
      pendingApprovals(this.host.projection)[0]?.expiresAt ?? Infinity,
      pendingQuestions(this.host.projection)[0]?.expiresAt ?? Infinity,
    );
    if (next === Infinity) return;
    const delay = Math.max(0, next - this.host.nowMs());
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
