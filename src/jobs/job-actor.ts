import type { Logger } from 'pino';
import { CompiledMachine, type CompiledSnapshot, type Effect } from '../machines/compiled-machine.js';
import { jobMachine, type CommitPhaseParams, type JobStopReason } from '../machines/job.machine.js';
import type { MachineEvent } from '../machines/machine-event.js';
import { ActorloopError } from '../protocol/errors.js';
import type { ActorEvent, EventData, EventDraft } from '../protocol/events.js';
import { derivedId } from '../protocol/ids.js';
import type { InboxMessage } from '../protocol/inbox.js';
import { isJobEnd, type JobEnd, type JobEndPhase } from '../protocol/job-events.js';
import type { BlobStore } from '../store/blob-port.js';
import { foldJobEvent, foldJobLog, jobNotice, type JobState } from '../store/job-projection.js';
import type { ActorLogWriter } from '../store/log-port.js';
import type { SandboxGrant } from '../tools/tool.js';
import type { JobScheduler, Slot } from './scheduler.js';
import { holdResources, type HeldResources } from './job-resources.js';
import type { ResourceLeaseStore } from '../bus/resource-lease-port.js';
import { DEFAULT_JOB_KILL_GRACE_MS, startShellJob, type ShellJob, type ShellJobResult } from './shell-executor.js';

// The job actor (design §5, §11b): one job's machine over its own log. Every move is committed
// before the runtime acts on it: `job/started` (with `pending → running`) before the process is
// spawned, the end with its exit code and output after the process group is gone, the notice to
// the owner before `job/notified`. The process handle is this host's memory alone: a host that
// takes the job over after a crash replays the log, and the machine's `recover` decides what the
// lost execution becomes (a restart, `reconciling`, `interrupted`).

const engine = new CompiledMachine(jobMachine);

/** The bytes of a job's output kept for its artifact; beyond it the output is counted, not kept. */
export const MAX_JOB_OUTPUT_BYTES = 64 * 1024 * 1024;

/** What a job actor runs on: its log, the shared blob store, the scheduler, the owner's inbox, the sandbox. */
export interface JobActorPorts {
  log: ActorLogWriter;
  blobs: BlobStore;
  scheduler: JobScheduler;
  /** This host, recorded in `job/started`. */
  hostId: string;
  /** Publishes the notice to the owner's inbox on the actors' channel; resolves on its PubAck. */
  notify(msg: InboxMessage): Promise<void>;
  /** How its command runs: the host's environment and the sandbox the `start_job` call was granted. */
  shell: { env: Readonly<Record<string, string>>; sandbox: SandboxGrant };
  /** Masks secrets in output before it reaches the log, a blob, the tail or a watcher. */
  redact(text: string): string;
  /** A live output chunk for watchers (best effort, never persisted). */
  live?(text: string): void;
  faults: { hit(point: string, actorId: string): void };
  clock: { nowMs(): number };
  logger: Logger;
  killGraceMs?: number;
  onCommit?(events: ActorEvent[]): void;
  /** The job moved in or out of the scheduler's queue (its position, null once it runs or ended). */
  onQueue?(): void;
  /** Where its named resources are leased (absent: they are recorded, not held). */
  resources?: ResourceLeaseStore;
}

/** True when a byte string is not text a person can read (a NUL, or not UTF-8). */
function isBinary(bytes: Uint8Array): boolean {
  if (bytes.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return false;
  } catch {
    return true;
  }
}

/** The message ID of a job's notice: derived from the job, so a notice sent again is deduped by the inbox. */
export function jobNoticeMessageId(jobId: string): string {
  return derivedId('message', 'job-notice', jobId);
}

/** One job hosted in this process. */
export class JobActor {
  readonly jobId: string;
  readonly rootId: string;
  private snap: CompiledSnapshot;
  private readonly queue: Effect[] = [];
  private running = false;
  private handle: ShellJob | null = null;
  private slot: Slot | null = null;
  private held: HeldResources | null = null;
  /** Aborted when a cancel is committed while the job waits for a slot or a resource: the wait ends, and the cancel's own move ends the job. */
  private waiting: AbortController | null = null;
  /** Aborted when the actor stops here: a wait in the queue ends, nothing more is committed. */
  private readonly life = new AbortController();
  private idle: Promise<void> = Promise.resolve();
  private settle: () => void = () => {};

  private constructor(private readonly ports: JobActorPorts, public state: JobState, snap: CompiledSnapshot) {
    this.jobId = state.jobId;
    this.rootId = state.rootId;
    this.snap = snap;
  }

  /** A job taken over from its log: replayed without effects, then recovered (the lost execution's fate, or the owed notice). */
  static hydrate(events: ActorEvent[], ports: JobActorPorts): JobActor {
    const state = foldJobLog(events);
    if (!state) throw new ActorloopError('job.not_a_job', `the log of ${ports.log.actorId} does not start with job/created`);
    const first = events.find((e) => e.type === 'job/created') as Extract<ActorEvent, { type: 'job/created' }>;
    let snap = engine.initial(first.data, null);
    for (const e of events) if (e !== first) snap = engine.transition(snap, e, null);
    const actor = new JobActor(ports, state, snap);
    actor.send({ type: 'recover' });
    return actor;
  }

  /** The phase its log says it is in. */
  get phase(): JobState['phase'] {
    return this.state.phase;
  }

  /** True once the job ended and its owner has the notice: nothing more will happen to it. */
  get finished(): boolean {
    return this.state.notified !== null;
  }

  /** Settles once no effect is running or waiting. */
  settled(): Promise<void> {
    return this.idle;
  }

  /**
   * Mail for the job: a person's `interrupt` (CLI, gateway, page) or its owner's
   * `subagent_interrupt` (`cancel_job`, the owner's turn ending) asks for a cancel. Anything else,
   * and a cancel of a job that ended or is being cancelled, changes nothing. Resolves once what it
   * changed is committed.
   */
  async receive(msg: InboxMessage, channel: 'person' | 'actor'): Promise<void> {
    const fromOwner = channel === 'actor' && msg.kind === 'subagent_interrupt' && msg.from === this.state.ownerId;
    const fromPerson = channel === 'person' && msg.kind === 'interrupt';
    if (!fromOwner && !fromPerson) {
      this.ports.logger.warn({ jobId: this.jobId, kind: msg.kind, from: msg.from, channel }, 'job mail ignored: a job takes only a cancel from a person or its owner');
      return;
    }
    if (isJobEnd(this.state.phase) || this.state.cancel !== null) return;
    const reason = fromOwner && msg.content === 'owner_ended' ? 'owner_ended' : 'user_cancelled';
    await this.commit([{ type: 'job/cancel_requested', data: { reason, by: fromPerson ? msg.from : this.state.ownerId, messageId: msg.id } }]);
  }

  /**
   * Stops hosting the job here (the host drains, or lost the lease): the process group is stopped
   * and nothing is committed, so the next holder ends or restarts the execution from the log.
   */
  async stop(): Promise<void> {
    this.life.abort();
    const h = this.handle;
    this.handle = null;
    if (h) await h.cancel(this.ports.killGraceMs ?? DEFAULT_JOB_KILL_GRACE_MS);
    await this.releaseSlot();
  }

  private async commit(drafts: EventDraft[]): Promise<ActorEvent[]> {
    if (this.life.signal.aborted) throw new ActorloopError('job.stopped', `job ${this.jobId} is no longer hosted here`);
    const events = await this.ports.log.commit(drafts);
    for (const e of events) foldJobEvent(this.state, e);
    // observers see the state the commit made
    this.ports.onCommit?.(events);
    for (const e of events) {
      if (e.type === 'job/cancel_requested') this.waiting?.abort();
      this.send(e);
    }
    return events;
  }

  private send(e: MachineEvent): void {
    const fx: Effect[] = [];
    this.snap = engine.transition(this.snap, e, (f) => fx.push(f));
    this.enqueue(fx);
  }

  private enqueue(fx: Effect[]): void {
    if (fx.length === 0) return;
    // a stop is carried out at once: it must not wait behind the execution it stops
    for (const f of fx) {
      if (f.name === 'stopExecution') void this.stopExecution(f.params.reason as JobStopReason);
      else this.queue.push(f);
    }
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    this.idle = new Promise<void>((r) => (this.settle = r));
    void this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.life.signal.aborted) {
        const f = this.queue.shift()!;
        try {
          await this.run(f);
        } catch (err) {
          if (this.life.signal.aborted) break;
          // an effect that failed (the log unreachable) is asked for again by the next holder's recover
          this.ports.logger.error({ err, jobId: this.jobId, effect: f.name }, 'job effect failed; the job waits for its next holder');
          this.life.abort();
          break;
        }
      }
    } finally {
      this.running = false;
      this.settle();
    }
  }

  private run(f: Effect): Promise<void> {
    switch (f.name) {
      case 'startExecution':
        return this.startExecution(f.params.attempt as number);
      case 'commitPhase':
        return this.commitPhase(f.params as CommitPhaseParams);
      case 'reconcileJob':
        // a shell command's effects cannot be checked from here: what it did is unknown
        return this.commitPhase({
          jobId: this.jobId, from: 'reconciling', phase: 'interrupted', reason: 'outcome_unknown', attempt: this.state.attempts,
          message: 'its execution was lost and what it did cannot be checked: look at its effects before starting it again',
        });
      case 'notifyOwner':
        return this.notifyOwner(f.params.phase as JobEndPhase);
      default:
        throw new Error(`job machine effect ${f.name} has no handler`);
    }
  }

  /**
   * Runs an I/O step that must happen before the job can go on (its output's blob, its notice)
   * again through failures (the bus away, an election), with a backoff up to 10 s, for as long as
   * the job is hosted here: giving up would leave the job owing them with nobody to retry.
   */
  private async retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (let delay = 250; ; delay = Math.min(delay * 2, 10_000)) {
      try {
        return await fn();
      } catch (err) {
        if (this.life.signal.aborted) throw err;
        this.ports.logger.warn({ err, jobId: this.jobId }, `could not ${what}; trying again in ${delay} ms`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delay);
          this.life.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
        });
        if (this.life.signal.aborted) throw err;
      }
    }
  }

  private async commitPhase(p: CommitPhaseParams): Promise<void> {
    const end: JobEnd | null = isJobEnd(p.phase)
      ? { exitCode: null, signal: null, durationMs: 0, usage: null, costUsd: null, output: null, tail: '' }
      : null;
    await this.commit([{ type: 'job/phase', data: { from: p.from, phase: p.phase, reason: p.reason, message: p.message, attempt: p.attempt, end } }]);
  }

  private async startExecution(attempt: number): Promise<void> {
    const executor = this.state.executor;
    if (executor.kind !== 'shell') {
      await this.commitPhase({ jobId: this.jobId, from: 'pending', phase: 'failed', reason: 'executor_error', attempt: this.state.attempts, message: `this host runs no ${executor.kind} jobs` });
      return;
    }
    this.ports.onQueue?.();
    const waiting = (this.waiting = new AbortController());
    const signal = AbortSignal.any([this.life.signal, waiting.signal]);
    let slot: Slot;
    try {
      slot = await this.ports.scheduler.acquire(this.jobId, { treeId: this.rootId, signal });
      const names = this.state.resources;
      if (names.length > 0 && this.ports.resources) {
        try {
          this.held = await holdResources(this.ports.resources, names, `${this.jobId}/${attempt}`, {
            signal, nowMs: () => this.ports.clock.nowMs(), logger: this.ports.logger,
          });
        } catch (err) {
          await slot.release();
          throw err;
        }
      }
    } catch (err) {
      // stopped here, or cancelled while it waited: the cancel's own move ends it
      if (this.life.signal.aborted || this.state.cancel !== null) return;
      const message = err instanceof ActorloopError ? err.message : String(err);
      await this.commitPhase({ jobId: this.jobId, from: 'pending', phase: 'failed', reason: 'executor_error', attempt: this.state.attempts, message: `it could not be scheduled: ${message}` });
      return;
    } finally {
      this.waiting = null;
      this.ports.onQueue?.();
    }
    if (this.state.phase !== 'pending' || this.state.cancel !== null) {
      await slot.release();
      await this.releaseHeld();
      return;
    }
    this.slot = slot;
    const deadlineAt = this.ports.clock.nowMs() + Math.round(executor.timeoutSeconds * 1000);
    await this.commit([
      { type: 'job/started', data: { attempt, host: this.ports.hostId, deadlineAt } },
      { type: 'job/phase', data: { from: 'pending', phase: 'running', reason: 'started', message: null, attempt, end: null } },
    ]);
    this.ports.faults.hit('after:job/started', this.jobId);
    const chunks: Uint8Array[] = [];
    let kept = 0;
    let job: ShellJob;
    try {
      job = await startShellJob(
        { command: executor.command, cwd: executor.cwd, timeoutMs: Math.max(1, deadlineAt - this.ports.clock.nowMs()), killGraceMs: this.ports.killGraceMs ?? DEFAULT_JOB_KILL_GRACE_MS },
        { workspace: executor.workspace ?? executor.cwd, env: this.ports.shell.env, sandbox: { ...this.ports.shell.sandbox, network: executor.network ?? false, envAllow: executor.envAllow ?? [] } },
        {
          sink: {
            write: (c) => {
              if (kept + c.bytes.length <= MAX_JOB_OUTPUT_BYTES) {
                chunks.push(c.bytes);
                kept += c.bytes.length;
              }
              this.ports.live?.(this.ports.redact(Buffer.from(c.bytes).toString('utf8')));
            },
          },
        },
      );
    } catch (err) {
      await this.releaseSlot();
      const message = this.ports.redact(err instanceof Error ? err.message : String(err));
      await this.commit([{ type: 'job/phase', data: { from: 'running', phase: 'failed', reason: 'executor_error', message, attempt, end: { exitCode: null, signal: null, durationMs: 0, usage: null, costUsd: null, output: null, tail: '' } } }]);
      return;
    }
    this.handle = job;
    // a cancel committed while the process was being spawned stops it now
    if (this.state.cancel !== null) void job.cancel(this.ports.killGraceMs ?? DEFAULT_JOB_KILL_GRACE_MS);
    const r = await job.result;
    if (this.life.signal.aborted) return;
    this.handle = null;
    // its end is committed before its place is given back: the log never shows more running than the limit
    try {
      await this.ended(attempt, r, Buffer.concat(chunks), job.tail());
    } finally {
      await this.releaseSlot();
    }
  }

  private async releaseHeld(): Promise<void> {
    const h = this.held;
    this.held = null;
    await h?.release();
  }

  private async releaseSlot(): Promise<void> {
    await this.releaseHeld();
    const s = this.slot;
    this.slot = null;
    await s?.release().catch((err: unknown) => this.ports.logger.warn({ err, jobId: this.jobId }, 'scheduler slot not given back; the tree slot ages out'));
  }

  /** Stores the output, then commits how the execution ended. */
  private async ended(attempt: number, r: ShellJobResult, output: Buffer, tailBytes: Uint8Array): Promise<void> {
    const binary = isBinary(output);
    let outputRef: JobEnd['output'] = null;
    if (r.bytes > 0) {
      const text = binary ? output : this.ports.redact(output.toString('utf8'));
      // stored before the event that names it: the log never points at a missing blob
      const digest = await this.retrying('store its output', () => this.ports.blobs.put(text));
      outputRef = { id: derivedId('artifact', 'job-output', this.jobId, String(attempt)), digest, bytes: typeof text === 'string' ? Buffer.byteLength(text) : text.length, binary };
    }
    const tail = isBinary(Buffer.from(tailBytes)) ? `(${r.bytes} bytes of binary output)` : this.ports.redact(Buffer.from(tailBytes).toString('utf8'));
    const end: JobEnd = { exitCode: r.exitCode, signal: r.signal, durationMs: r.durationMs, usage: null, costUsd: null, output: outputRef, tail };
    const cancel = this.state.cancel;
    let data: EventData<'job/phase'>;
    const base = { from: 'running' as const, attempt, end };
    if (cancel !== null) data = { ...base, phase: 'cancelled', reason: cancel.reason, message: `cancelled by ${cancel.by}` };
    else if (r.timedOut) data = { ...base, phase: 'failed', reason: 'timed_out', message: `it ran past its timeout of ${(this.state.executor as { timeoutSeconds: number }).timeoutSeconds} s and was stopped` };
    else if (r.exitCode === 0) data = { ...base, phase: 'completed', reason: 'exited', message: r.outputError ? `its output was not all kept: ${r.outputError.message}` : null };
    else if (r.exitCode === null) data = { ...base, phase: 'failed', reason: 'executor_error', message: `it was killed by ${r.signal ?? 'a signal'}` };
    else data = { ...base, phase: 'failed', reason: 'exited', message: `it exited with code ${r.exitCode}` };
    await this.commit([{ type: 'job/phase', data }]);
  }

  private async stopExecution(reason: JobStopReason): Promise<void> {
    // before the spawn: startExecution sees the cancel and stops what it spawns
    const h = this.handle;
    if (!h) return;
    this.ports.logger.info({ jobId: this.jobId, reason }, 'stopping the job');
    await h.cancel(this.ports.killGraceMs ?? DEFAULT_JOB_KILL_GRACE_MS);
  }

  private async notifyOwner(phase: JobEndPhase): Promise<void> {
    const notice = jobNotice(this.state);
    if (!notice) return;
    const id = jobNoticeMessageId(this.jobId);
    const msg: InboxMessage = {
      id, from: this.jobId, to: this.state.ownerId, kind: 'job_notice', target: 'next_step', wakeup: true,
      content: JSON.stringify(notice), request: null, sentAt: new Date(this.ports.clock.nowMs()).toISOString(),
    };
    await this.retrying('send its notice', () => this.ports.notify(msg));
    this.ports.faults.hit('before:job/notified', this.jobId);
    await this.commit([{ type: 'job/notified', data: { ownerId: this.state.ownerId, messageId: id, phase } }]);
  }
}
