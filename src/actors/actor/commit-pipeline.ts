import { EVENT_VERSION, type ActorEvent, type EventDraft } from '../../protocol/events.js';
import { isoOf } from '../../protocol/iso-time.js';
import type { ActorLogWriter } from '../../store/log-port.js';
import { foldEvent, type Projection } from '../../store/projection.js';
import { withContinuation, type CommitWaiter, type Launch, type RecoveryNote } from '../agent/commit-batch.js';

/** What a commit pipeline needs from the actor it commits for. */
export interface PipelineHost {
  readonly actorId: string;
  readonly log: ActorLogWriter;
  readonly projection: Projection;
  nowMs(): number;
  /** Reacts to an event just staged and folded: routes it to the machines, arms timers. */
  staged(e: ActorEvent): void;
  /** Reacts to a commit the log acknowledged (before the launches it releases run). */
  committed(events: ActorEvent[]): void;
  /** Why a halted incarnation refuses to commit. */
  refusal(): unknown;
}

/**
 * The one path from an effect to the log: events are *staged* (stamped once, here, with their
 * place in the log, folded into the projection and handed to the machines at once) and
 * *committed* in batches by `flush`. Commit waiters, work released by a commit (`afterCommit`)
 * and the recovery continuation all hang off it, so a commit settles each of them exactly once
 * and a refused one drops them all.
 */
export class CommitPipeline {
  private staged: ActorEvent[] = [];
  private nextSeq: number;
  private waiters: CommitWaiter[] = [];
  private launches: Launch[] = [];
  /** While recovering: where `recovery/continuation` goes in the staged batch, and what was closed. */
  private recovery: RecoveryNote | null = null;
  private halted = false;
  /** Writes the staged events name (a blob), which their commit waits for. */
  private holds: Array<Promise<unknown>> = [];
  /** The last commit that waited on a hold, while it is not settled: later commits go after it. */
  private gate: Promise<unknown> | null = null;
  private isoMs = -1;
  private iso = '';

  constructor(private readonly host: PipelineHost) {
    this.nextSeq = host.projection.seq + 1;
  }

  /** Events staged and not yet committed. */
  get pending(): number {
    return this.staged.length;
  }

  /** Takes note of an event already in the log (a replayed tail): the next stage follows it. */
  replayed(e: ActorEvent): void {
    this.nextSeq = e.seq + 1;
  }

  /** Stages one event: stamps it, folds it into the projection, hands it to the host. */
  stage(d: EventDraft): ActorEvent {
    // A stopped actor's machines are stopped too: what in-flight work tries to stage is refused.
    if (this.halted) this.refuse();
    const e = {
      v: EVENT_VERSION,
      seq: this.nextSeq++,
      id: '',
      at: d.at ?? this.isoNow(),
      epoch: this.host.log.epoch,
      actor: this.host.actorId,
      ...d,
    } as ActorEvent;
    this.staged.push(e);
    foldEvent(this.host.projection, e);
    this.host.staged(e);
    return e;
  }

  /** The clock as ISO 8601, formatted once per millisecond (a step stages about ten events). */
  private isoNow(): string {
    const ms = this.host.nowMs();
    if (ms !== this.isoMs) {
      this.isoMs = ms;
      this.iso = isoOf(ms);
    }
    return this.iso;
  }

  /** Starts a recovery: the next commit carries `recovery/continuation` after what it closed. */
  beginRecovery(turn: string | undefined): void {
    this.recovery = { insertAt: this.staged.length, closed: [], turn };
  }

  /** Notes a closing event staged by recovery, so `recovery/continuation` lists it and follows it. */
  noteRecovered(description: string): void {
    if (!this.recovery) return;
    this.recovery.closed.push(description);
    this.recovery.insertAt = this.staged.length;
  }

  /** Resolves once the event at `seq` is committed; rejects when this incarnation fails first. */
  whenCommitted(seq: number): Promise<void> {
    return new Promise<void>((resolve, reject) => this.waiters.push({ seq, resolve, reject }));
  }

  /** Adds a waiter directly (a turn's end waits on a seq not yet staged). */
  wait(w: CommitWaiter): void {
    this.waiters.push(w);
  }

  /** Runs `launch.run` once the event at `seq` is committed; `drop` if it never will be. */
  afterCommit(seq: number, launch: Omit<Launch, 'seq'>): void {
    this.launches.push({ seq, ...launch });
  }

  /**
   * Makes the commit of what is staged (or staged next) wait for `write`: a blob an event names
   * is written before the commit that names it, and if it is not written the commit never is
   * (the flush rejects with its error). Commits keep their order: a later one waits too.
   */
  hold(write: Promise<unknown>): void {
    // a commit that is never made (the actor stopped first) never awaits it: its failure is not unhandled
    write.catch(() => {});
    this.holds.push(write);
  }

  /** Commits everything staged as one log message. */
  async flush(): Promise<void> {
    if (this.halted) this.refuse();
    if (this.staged.length === 0) return;
    let batch = this.staged;
    this.staged = [];
    if (this.recovery) {
      batch = this.insertContinuation(batch, this.recovery);
      this.recovery = null;
    }
    const committed = await this.commit(batch);
    const last = committed[committed.length - 1]!.seq;
    if (this.waiters.length > 0) {
      for (const w of this.waiters.filter((w) => w.seq <= last)) w.resolve();
      this.waiters = this.waiters.filter((w) => w.seq > last);
    }
    this.host.committed(committed);
    if (this.launches.length > 0) {
      const ready = this.launches.filter((l) => l.seq <= last);
      this.launches = this.launches.filter((l) => l.seq > last);
      for (const l of ready) l.run();
    }
  }

  /** The log's commit of `batch`, after the writes it holds for and the held commits before it. */
  private commit(batch: ActorEvent[]): Promise<ActorEvent[]> {
    // nothing held (the usual step): straight to the log, which keeps commits in call order
    if (this.holds.length === 0 && this.gate === null) return this.host.log.commit(batch);
    const waits = this.gate ? [this.gate, ...this.holds] : this.holds;
    this.holds = [];
    const run = Promise.all(waits).then(() => this.host.log.commit(batch));
    this.gate = run;
    // a rejected gate stays: what follows a commit that never happened is never committed either
    void run.then(() => {
      if (this.gate === run) this.gate = null;
    }, () => {});
    return run;
  }

  /**
   * Places `recovery/continuation` after the last closing event. The events after it move one
   * place down the log, renumbered here (the objects the projection and the machines saw), so
   * the writer finds every event stamped for its place and copies none.
   */
  private insertContinuation(batch: ActorEvent[], note: RecoveryNote): ActorEvent[] {
    const out = withContinuation(batch, note);
    const at = note.insertAt;
    out[at] = Object.assign(out[at]!, { seq: batch[0]!.seq + at });
    for (let i = at + 1; i < out.length; i++) (out[i] as { seq: number }).seq += 1;
    this.nextSeq += 1;
    this.host.projection.seq += 1;
    return out;
  }

  /**
   * From now on nothing is committed (a stopped or dropped incarnation leaves what is open as a
   * crash would); launches waiting on a commit are dropped.
   */
  halt(): void {
    this.halted = true;
    this.dropLaunches();
  }

  /** Rejects every waiter with `err` (the actor failed). */
  rejectAll(err: unknown): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(err);
  }

  private dropLaunches(): void {
    const dropped = this.launches;
    this.launches = [];
    for (const l of dropped) l.drop();
  }

  /**
   * What a halted incarnation's in-flight effect staged after the abort (an aborted attempt, a
   * cancelled call) is never committed, or the next incarnation would read a cancellation nobody
   * asked for. Throwing also stops that effect from going on as if its intent were in the log.
   */
  private refuse(): never {
    const err = this.host.refusal();
    const lost = this.staged.at(-1)?.seq ?? 0;
    this.staged = [];
    this.holds = [];
    this.dropLaunches();
    for (const w of this.waiters.filter((w) => w.seq <= lost)) w.reject(err);
    this.waiters = this.waiters.filter((w) => w.seq > lost);
    throw err;
  }
}
