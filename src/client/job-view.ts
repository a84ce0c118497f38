import type { DirectoryEntry } from '../bus/directory.js';
import { isJobEnd, type JobOutput, type JobPhase, type JobReason } from '../protocol/job-events.js';
import type { JobState, OwnerJobRecord } from '../store/job-projection.js';
import type { TreeStatus } from './status.js';

// A job as a client shows it (`actorloop jobs`, `actorloop job`, the tree): what its own log folds
// to, with the one fact only the directory has (its place in the scheduler's queue). Pure, so every
// client that shows a job says the same of the same log.

/** One job, as its log and its directory entry say. */
export interface JobView {
  jobId: string;
  name: string;
  ownerId: string;
  rootId: string;
  executor: 'shell' | 'subagent' | null;
  /** The shell command, or a subagent's task (null: its log does not start yet). */
  command: string | null;
  cwd: string | null;
  /** From its log; null while its log holds no `job/created` (only its owner's start is known). */
  phase: JobPhase | null;
  /** Its place in the scheduler's queue (1 first), while it waits there; null otherwise. */
  queuePosition: number | null;
  reason: JobReason | null;
  message: string | null;
  attempts: number;
  host: string | null;
  exitCode: number | null;
  signal: string | null;
  /** How long it ran: its end's, else (running) since its last start; null when it never started. */
  durationMs: number | null;
  output: JobOutput | null;
  /** The last lines of its output, once it ended. */
  tail: string | null;
  cancelRequested: boolean;
  /** Its owner's inbox has its terminal notice. */
  notified: boolean;
}

/** The queue position a directory entry's label holds, or null. */
function queuePositionOf(entry: DirectoryEntry | null): number | null {
  const raw = entry?.labels.queuePosition;
  if (raw === undefined) return null;
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 ? n : null;
}

/** A job from its folded log (null: none written yet) and its directory entry; `nowMs` times a running one. */
export function jobView(state: JobState | null, entry: DirectoryEntry | null, nowMs: number): JobView {
  if (state === null) {
    return {
      jobId: entry?.actorId ?? '', name: entry?.title ?? 'job', ownerId: entry?.parentId ?? '', rootId: entry?.rootId ?? '',
      executor: null, command: null, cwd: entry?.workspace ?? null, phase: null, queuePosition: queuePositionOf(entry),
      reason: null, message: null, attempts: 0, host: null, exitCode: null, signal: null, durationMs: null, output: null, tail: null,
      cancelRequested: false, notified: false,
    };
  }
  const ex = state.executor;
  const ended = isJobEnd(state.phase);
  // the label is the scheduler's and may lag the log: a job that runs or ended is in no queue
  const queued = state.phase === 'pending' ? queuePositionOf(entry) : null;
  let durationMs: number | null = null;
  if (state.end !== null) durationMs = state.end.durationMs;
  else if (!ended && state.startedAt !== null && state.phase !== 'pending') durationMs = Math.max(0, nowMs - state.startedAt);
  return {
    jobId: state.jobId, name: state.name, ownerId: state.ownerId, rootId: state.rootId,
    executor: ex.kind, command: ex.kind === 'shell' ? ex.command : ex.task, cwd: ex.kind === 'shell' ? ex.cwd : null,
    phase: state.phase, queuePosition: queued, reason: state.reason, message: state.message, attempts: state.attempts, host: state.host,
    exitCode: state.end?.exitCode ?? null, signal: state.end?.signal ?? null, durationMs, output: state.end?.output ?? null,
    tail: state.end?.tail ?? null, cancelRequested: state.cancel !== null, notified: state.notified !== null,
  };
}

/** A job its owner's log knows of (a `start_job` that succeeded) whose own log was not found. */
export function jobViewOfRecord(jobId: string, ownerId: string, rootId: string, r: OwnerJobRecord): JobView {
  return {
    jobId, name: r.name, ownerId, rootId, executor: null, command: null, cwd: null,
    // the owner knows a job ended only from its notice: before, its phase is its own log's to say
    phase: r.phase === 'pending' ? null : r.phase, queuePosition: null, reason: null, message: null, attempts: 0, host: null,
    exitCode: null, signal: null, durationMs: null, output: null, tail: null, cancelRequested: false, notified: r.notified,
  };
}

/** The phase in words: `queued #2` while it waits in the scheduler's queue, `unknown` before its log starts. */
export function jobPhaseText(v: Pick<JobView, 'phase' | 'queuePosition'>): string {
  if (v.queuePosition !== null && (v.phase === null || v.phase === 'pending')) return `queued #${v.queuePosition}`;
  return v.phase ?? 'not started';
}

/** `850ms`, `1.5s`, `2m 03s`, `1h 02m`. */
export function durationText(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const s = Math.floor(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3_600)}h ${String(Math.floor((s % 3_600) / 60)).padStart(2, '0')}m`;
}

/** What a job's exit shows: its code, the signal that ended it, or `-`. */
export function exitText(v: Pick<JobView, 'exitCode' | 'signal'>): string {
  if (v.exitCode !== null) return String(v.exitCode);
  return v.signal ?? '-';
}

/**
 * The status a tree shows for a job (the phase of its log): running until it ends, then the
 * outcome its phase names; `interrupted` (lost, and could not be checked) reads as `stopped`.
 */
export function jobTreeStatus(phase: JobPhase): TreeStatus {
  switch (phase) {
    case 'pending':
    case 'running':
    case 'reconciling':
      return 'running';
    case 'completed':
    case 'failed':
    case 'cancelled':
      return phase;
    case 'interrupted':
      return 'stopped';
  }
}
