import type { ActorEvent, EventData, EventOf } from '../protocol/events.js';
import { isJobEnd, jobIdOf, JobNoticeSchema, type JobEnd, type JobEndPhase, type JobNotice, type JobPhase, type JobReason } from '../protocol/job-events.js';
import type { Projection } from './projection.js';
import { workflowRunIdOf } from '../protocol/workflow-events.js';

// Jobs as the logs show them (design §11b). A job's own log folds into `JobState`: what its next
// holder resumes from, what `job_status` and `actorloop job` print. Its owner's log knows less: the
// jobs its `start_job` calls started and the notices it received (`OwnerJobRecord`); the job's
// own log has the rest. Both are plain JSON: they ride in snapshots.

/** Version of `JobState`'s shape; a snapshot of another version is folded again from the log. */
export const JOB_STATE_VERSION = 1;

/** A job folded from its own log. */
export interface JobState extends EventData<'job/created'> {
  version: typeof JOB_STATE_VERSION;
  /** The seq of the last event folded. */
  seq: number;
  phase: JobPhase;
  /** Why it moved to its phase (null: it has not moved since it was created). */
  reason: JobReason | null;
  message: string | null;
  /** Executions begun (the `attempt` of its last `job/started`). */
  attempts: number;
  /** The host of its last execution, and when that began (ms since epoch). */
  host: string | null;
  startedAt: number | null;
  deadlineAt: number | null;
  /** A stop asked for, and by whom. */
  cancel: { reason: 'user_cancelled' | 'owner_ended'; by: string } | null;
  /** How it ended (its terminal `job/phase`), once it did. */
  end: JobEnd | null;
  /** The notice its owner's inbox accepted (null: still owed, once it has ended). */
  notified: { messageId: string } | null;
}

/** The state of a job from its `job/created`. */
export function createJobState(e: EventOf<'job/created'>): JobState {
  return {
    ...structuredClone(e.data),
    version: JOB_STATE_VERSION, seq: e.seq, phase: 'pending', reason: null, message: null, attempts: 0,
    host: null, startedAt: null, deadlineAt: null, cancel: null, end: null, notified: null,
  };
}

/** Folds one event of the job's own log into its state, in place; O(1). Events of other kinds change nothing but `seq`. */
export function foldJobEvent(s: JobState, e: ActorEvent): JobState {
  s.seq = e.seq;
  switch (e.type) {
    case 'job/started':
      s.attempts = e.data.attempt;
      s.host = e.data.host;
      s.startedAt = Date.parse(e.at);
      s.deadlineAt = e.data.deadlineAt;
      break;
    case 'job/phase':
      s.phase = e.data.phase;
      s.reason = e.data.reason;
      s.message = e.data.message;
      if (e.data.end !== null) s.end = e.data.end;
      if (e.data.phase === 'pending') s.deadlineAt = null;
      break;
    case 'job/cancel_requested':
      s.cancel ??= { reason: e.data.reason, by: e.data.by };
      break;
    case 'job/notified':
      s.notified ??= { messageId: e.data.messageId };
      break;
    default:
      break;
  }
  return s;
}

/** A job's state from its whole log; null when the log does not start a job. */
export function foldJobLog(events: Iterable<ActorEvent>): JobState | null {
  let s: JobState | null = null;
  for (const e of events) {
    if (s === null) {
      if (e.type === 'job/created') s = createJobState(e);
    } else foldJobEvent(s, e);
  }
  return s;
}

/** True when the job has ended and its owner has not had the notice yet. */
export function noticeOwed(s: JobState): boolean {
  return isJobEnd(s.phase) && s.notified === null;
}

/** The notice an ended job sends its owner; null while it has not ended. */
export function jobNotice(s: JobState): JobNotice | null {
  if (!isJobEnd(s.phase)) return null;
  const end = s.end;
  return {
    jobId: s.jobId, name: s.name, phase: s.phase, reason: s.reason ?? 'runtime_restarted', message: s.message, attempts: s.attempts,
    exitCode: end?.exitCode ?? null, durationMs: end?.durationMs ?? 0, usage: end?.usage ?? null, output: end?.output ?? null, tail: end?.tail ?? '',
  };
}

/** What an owner knows of one of its jobs. */
export interface OwnerJobRecord {
  name: string;
  /** The `start_job` call that started it. */
  callId: string;
  /** `pending` until its notice arrives, then the phase it ended in (the job's own log has the moves between). */
  phase: 'pending' | JobEndPhase;
  /** Its notice reached this agent's inbox. */
  notified: boolean;
  /** That notice's message ID. */
  noticeId?: string;
  /** The turn whose call started it (absent: a notice of a job this log never started). */
  turn?: string;
  /** What its owner's interrupted turn does to it (`start_job`'s `on_owner_end`, default cancel). */
  onOwnerEnd?: 'cancel' | 'detach';
}

/** The name and `on_owner_end` a `start_job` call gave its job (its arguments as the model wrote them). */
function argsOf(args: string): { name: string; onOwnerEnd: 'cancel' | 'detach' } {
  try {
    const parsed = JSON.parse(args) as { name?: unknown; on_owner_end?: unknown };
    return {
      name: typeof parsed.name === 'string' && parsed.name !== '' ? parsed.name : 'job',
      onOwnerEnd: parsed.on_owner_end === 'detach' ? 'detach' : 'cancel',
    };
  } catch {
    return { name: 'job', onOwnerEnd: 'cancel' };
  }
}

/** The file a `start_workflow` call named. */
function fileOf(args: string): string {
  try {
    const f = (JSON.parse(args) as { file?: unknown }).file;
    return typeof f === 'string' ? f : '?';
  } catch {
    return '?';
  }
}

function parseNotice(content: string): JobNotice | null {
  try {
    const n = JobNoticeSchema.safeParse(JSON.parse(content));
    return n.success ? n.data : null;
  } catch {
    return null;
  }
}

/**
 * Folds the job facts of one event of an owner's log, before the projection's own fold of it (it
 * reads the open step's call a result answers). A `start_job` call that succeeded started the job
 * its call ID derives, a `start_workflow` one the run its call ID derives (a job to its owner); a `job_notice` received ends it (a notice of a job this log never started,
 * a detached one from an older turn, is recorded too). O(1).
 */
export function foldOwnerJobs(p: Projection, e: ActorEvent): void {
  if (e.type === 'tool/result') {
    if (!e.data.ok || e.call === undefined) return;
    const call = p.pending.calls.find((c) => c.callId === e.call);
    if (call?.name !== 'start_job' && call?.name !== 'start_workflow') return;
    const jobs = (p.jobs ??= {});
    const turn = e.turn !== undefined ? { turn: e.turn } : {};
    if (call.name === 'start_workflow') {
      // to its owner a workflow run is a job: its notice names the run, and nothing cancels it on the owner's end
      jobs[workflowRunIdOf(e.call)] ??= { name: `workflow ${fileOf(call.arguments)}`, callId: e.call, phase: 'pending', notified: false, onOwnerEnd: 'detach', ...turn };
      return;
    }
    const { name, onOwnerEnd } = argsOf(call.arguments);
    jobs[jobIdOf(e.call)] ??= { name, callId: e.call, phase: 'pending', notified: false, onOwnerEnd, ...turn };
  } else if (e.type === 'inbox/received' && e.data.kind === 'job_notice') {
    const n = parseNotice(e.data.content);
    if (n === null) return;
    const jobs = (p.jobs ??= {});
    const known = Object.hasOwn(jobs, n.jobId) ? jobs[n.jobId] : undefined;
    jobs[n.jobId] = { ...known, name: known?.name ?? n.name, callId: known?.callId ?? '', phase: n.phase, notified: true, noticeId: e.data.messageId };
    // its whole output is readable with artifact_read (the job stored it in the shared blob store)
    if (n.output) (p.artifacts ??= {})[n.output.id] = n.output.digest;
  }
}
