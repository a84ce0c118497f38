import { z } from 'zod';
import { UsageSchema } from './history.js';
import { derivedId } from './ids.js';

// Jobs (design §5, §11b): long work run in the background as an actor of its own. A job's log
// starts with `job/created`, which holds everything a host that takes it over needs (the
// executor, the command, who owns it, how it may be recovered); every move of its machine is a
// `job/phase`; each execution begins with a `job/started`; the owner's inbox accepting the
// terminal notice is `job/notified`. Process handles stay in memory: the log never names a pid.

/** The job a `start_job` call starts: derived from the call, so a retried start names the same job. */
export function jobIdOf(callId: string): string {
  return derivedId('job', 'start', callId);
}

/** The limits of background jobs when the config names none (the scheduler's and the executor's defaults). */
export const DEFAULT_JOB_LIMITS = {
  maxRunningPerHost: 4,
  maxRunningPerTree: 4,
  maxQueued: 100,
  timeoutSeconds: 30 * 60,
  killGraceMs: 5_000,
} as const;

/** The phases of a job, one per state of the job machine (`src/machines/job.machine.ts`). */
export const JobPhaseSchema = z.enum(['pending', 'running', 'reconciling', 'completed', 'failed', 'cancelled', 'interrupted']);
export type JobPhase = z.infer<typeof JobPhaseSchema>;

/** The phases a job ends in: after one of them no execution starts again. */
export const JobEndPhaseSchema = z.enum(['completed', 'failed', 'cancelled', 'interrupted']);
export type JobEndPhase = z.infer<typeof JobEndPhaseSchema>;

/**
 * Every move a job's phase may make: the job machine's edges, and what `verify` holds a job's log
 * to. `pending → failed`: the execution could not start (`executor_error`); `pending → cancelled`:
 * cancelled before it ran. `running → pending` is the restart of an idempotent job with retries left;
 * `reconciling` comes after a lost execution whose effects cannot be known without checking.
 */
export const JOB_EDGES: { readonly [P in JobPhase]: readonly JobPhase[] } = {
  pending: ['running', 'failed', 'cancelled'],
  running: ['pending', 'reconciling', 'completed', 'failed', 'cancelled', 'interrupted'],
  reconciling: ['completed', 'failed', 'interrupted'],
  completed: [],
  failed: [],
  cancelled: [],
  interrupted: [],
};

/** True for a phase a job ends in. */
export function isJobEnd(phase: JobPhase): phase is JobEndPhase {
  return JOB_EDGES[phase].length === 0;
}

/**
 * Why a job's phase moved, as a stable code (decisions read it, never `message`). `started`: an
 * execution began; `exited`: it ended by itself (exit code 0: completed, else `executor_error`);
 * `executor_error`: it could not start or ended in error; `timed_out`: it ran past its
 * `timeoutSeconds` and was stopped; `user_cancelled`: `cancel_job`, the CLI or the page;
 * `owner_ended`: its owner's turn ended under `onOwnerEnd: cancel`; `runtime_restarted`: the host
 * running it died (it restarts, or ends `interrupted`); `outcome_unknown`: it was lost and what it
 * did cannot be known without checking (`reconciling`), or could not be checked (`interrupted`).
 */
export const JobReasonSchema = z.enum([
  'started', 'exited', 'executor_error', 'timed_out', 'user_cancelled', 'owner_ended', 'runtime_restarted', 'outcome_unknown',
]);
export type JobReason = z.infer<typeof JobReasonSchema>;

/** A job's shell command: run in the same sandbox and under the same policy as the `shell` tool. */
export const ShellExecutorSchema = z.object({
  kind: z.literal('shell'),
  command: z.string().min(1),
  /** Absolute working directory, inside the owner's workspace. */
  cwd: z.string(),
  timeoutSeconds: z.number().positive(),
  /** The owner's workspace root, which the sandbox shows writable (absent: `cwd`). */
  workspace: z.string().optional(),
  /** What the policy granted the `start_job` call, as it grants a `shell` call: network, secret-looking names let through. */
  network: z.boolean().optional(),
  envAllow: z.array(z.string()).optional(),
});

/** A one-shot background subagent: its one turn is the job, its answer the output. */
export const SubagentExecutorSchema = z.object({
  kind: z.literal('subagent'),
  task: z.string().min(1),
  tools: z.array(z.string()),
  /** The model it runs (null: its owner's). */
  model: z.string().nullable(),
  timeoutSeconds: z.number().positive(),
});

/** What runs a job; more kinds come (a remote CI executor, through extensions). Extend, never rename. */
export const JobExecutorSchema = z.discriminatedUnion('kind', [ShellExecutorSchema, SubagentExecutorSchema]);
export type JobExecutor = z.infer<typeof JobExecutorSchema>;

/** What a job does when its owner's turn is interrupted: stop with it, or go on alone. */
export const OnOwnerEndSchema = z.enum(['cancel', 'detach']);
export type OnOwnerEnd = z.infer<typeof OnOwnerEndSchema>;

/** A job's output, stored whole in the shared blob store (named as `tool/result.artifact` names one). */
export const JobOutputSchema = z.object({ id: z.string(), digest: z.string(), bytes: z.number().int().nonnegative(), binary: z.boolean() });
export type JobOutput = z.infer<typeof JobOutputSchema>;

/** What a terminal `job/phase` records of how the job ended. */
export const JobEndSchema = z.object({
  /** The process's exit code (null: it was killed by a signal, never ran, or is no process: a subagent). */
  exitCode: z.number().int().nullable(),
  /** The signal that ended it (`SIGTERM`, `SIGKILL`), when one did. */
  signal: z.string().nullable(),
  /** From its last `job/started` to its end (0 when it never started). */
  durationMs: z.number().int().nonnegative(),
  /** What a model-running job spent (null: it runs no model). */
  usage: UsageSchema.nullable(),
  costUsd: z.number().nonnegative().nullable(),
  /** Its output (null: there was none, or it never started). */
  output: JobOutputSchema.nullable(),
  /** The last lines of its output, redacted and bounded: what its owner reads first. */
  tail: z.string(),
});
export type JobEnd = z.infer<typeof JobEndSchema>;

/** The data schemas of a job's own log, spread into the event catalogue. Extend, never rename. */
export const JOB_EVENT_DATA = {
  /**
   * The job's first event: everything a host that takes it over needs to run, resume or end it.
   * Its ID is derived from the owner's `start_job` call, so a retried start names the same job.
   */
  'job/created': z.object({
    jobId: z.string(),
    ownerId: z.string(),
    rootId: z.string(),
    name: z.string(),
    executor: JobExecutorSchema,
    /** Running it again does no harm: a lost execution restarts (while retries last) instead of ending `interrupted`. */
    idempotent: z.boolean(),
    /** Executions it may start after the first (only an idempotent job restarts). */
    retries: z.number().int().nonnegative(),
    /** `possible`: a lost execution may have changed something, and is checked (`reconciling`) before it ends. */
    effects: z.enum(['none', 'possible']),
    onOwnerEnd: OnOwnerEndSchema,
    /** The resource leases it holds while it runs (the `shared` workspace's, by name). */
    resources: z.array(z.string()),
    /** The owner's `start_job` call. */
    callId: z.string(),
  }),
  /**
   * An execution is about to begin, committed before the process is spawned (no effect starts
   * without it): its number (1 first, one more with each restart), the host running it, and the
   * absolute time it must end by.
   */
  'job/started': z.object({
    attempt: z.number().int().positive(),
    host: z.string(),
    deadlineAt: z.number().int().nullable(),
  }),
  /**
   * One move of the job's machine, `from → phase`, along an edge of `JOB_EDGES`. A terminal one
   * carries `end`; the others have `end: null`.
   */
  'job/phase': z.object({
    from: JobPhaseSchema,
    phase: JobPhaseSchema,
    reason: JobReasonSchema,
    /** One line for people (the executor's error, who cancelled); null: the reason says it all. */
    message: z.string().nullable(),
    /** The execution it is about (0: none had started). */
    attempt: z.number().int().nonnegative(),
    end: JobEndSchema.nullable(),
  }),
  /**
   * A stop was asked for (`cancel_job`, `actorloop job <id> --cancel`, the page, or the owner's
   * turn ending under `onOwnerEnd: cancel`): recorded before the process group is signalled, so a
   * host that dies while it settles leaves a job that still ends `cancelled`.
   */
  'job/cancel_requested': z.object({
    reason: z.enum(['user_cancelled', 'owner_ended']),
    by: z.string(),
    /** The inbox message that asked (null: the runtime asked, on the owner's turn ending). */
    messageId: z.string().nullable(),
  }),
  /** The owner's inbox accepted the job's terminal notice (the PubAck): nothing is owed any more. */
  'job/notified': z.object({ ownerId: z.string(), messageId: z.string(), phase: JobEndPhaseSchema }),
} as const;

/** The content of a `job_notice` message: what the owner's model reads when its job ends. */
export const JobNoticeSchema = z.object({
  jobId: z.string(),
  name: z.string(),
  phase: JobEndPhaseSchema,
  reason: JobReasonSchema,
  message: z.string().nullable(),
  attempts: z.number().int().nonnegative(),
  exitCode: z.number().int().nullable(),
  durationMs: z.number().int().nonnegative(),
  usage: UsageSchema.nullable(),
  /** The whole output, readable with `artifact_read` (the owner's host stored it). */
  output: JobOutputSchema.nullable(),
  tail: z.string(),
});
export type JobNotice = z.infer<typeof JobNoticeSchema>;

/** What the owner's model reads of a job's notice (a malformed one is shown as it came). */
export function jobNoticeText(content: string): string {
  let n: JobNotice;
  try {
    n = JobNoticeSchema.parse(JSON.parse(content));
  } catch {
    return content;
  }
  const how = n.exitCode !== null ? `exit code ${n.exitCode}` : n.reason;
  const head = `Job ${n.name} (${n.jobId}) ended ${n.phase} (${how}${n.message ? `: ${n.message}` : ''}) after ${(n.durationMs / 1000).toFixed(1)} s.`;
  const out = n.output ? `\nIts whole output (${n.output.bytes} bytes) is artifact ${n.output.id}: read it with artifact_read.` : '';
  const tail = n.tail !== '' ? `\nThe last lines of its output:\n${n.tail}` : '';
  return `${head}${out}${tail}`;
}
