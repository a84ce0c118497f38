import { z } from 'zod';
import { idString } from './ids.js';
import { JobEndSchema, JobExecutorSchema, JobOutputSchema, JobPhaseSchema, JobReasonSchema } from './job-events.js';

// The gateway's job protocol (`/v1/jobs`, `jobs.list`, `job.inspect`, `job.cancel`): the part of
// `/v1` that speaks of background jobs (design §11b), beside `gateway.ts`'s rest of `/v1`.

/** The query of `GET /v1/jobs`: `root` keeps to one tree's jobs. */
export const JobsQuerySchema = z.object({
  root: idString('agent').optional(),
});

/**
 * One job of a tree as the gateway reads it (`GET /v1/jobs`, `jobs.list`): what every client shows
 * of a job (`jobView`, src/client/job-view.ts: its log's word, and the directory's on its queue),
 * with its times and its tree's stream position.
 */
export const JobSummarySchema = z.object({
  jobId: z.string(),
  name: z.string(),
  /** The agent whose `start_job` call started it. */
  ownerId: z.string(),
  rootId: z.string(),
  /** The executor's kind; null while its log holds no `job/created`. */
  executor: z.enum(['shell', 'subagent']).nullable(),
  /** What it runs: the shell command, or the subagent's task. */
  command: z.string().nullable(),
  cwd: z.string().nullable(),
  /** Its phase as its log says; null while its log holds no `job/created`. */
  phase: JobPhaseSchema.nullable(),
  /** Its place in its host's queue while it waits for a slot (1: next); null: not queued. */
  queuePosition: z.number().int().positive().nullable(),
  reason: JobReasonSchema.nullable(),
  message: z.string().nullable(),
  /** Executions begun, and how many it may begin in all (its retries and the first). */
  attempts: z.number().int().nonnegative(),
  maxAttempts: z.number().int().positive(),
  host: z.string().nullable(),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  /** How long it ran: its end's, else (running) since its last start; null when it never started. */
  durationMs: z.number().int().nonnegative().nullable(),
  output: JobOutputSchema.nullable(),
  /** The last lines of its output, from its terminal `job/phase`; null while it has not ended. */
  tail: z.string().nullable(),
  /** A stop was asked for. */
  cancelRequested: z.boolean(),
  /** Its owner has had the notice of its end. */
  notified: z.boolean(),
  createdAt: z.string(),
  /** When its last execution began; null: none has. */
  startedAt: z.string().nullable(),
  /** When it ended; null: it has not. */
  endedAt: z.string().nullable(),
  /** The stream sequence of the tree's last commit this summary folded. */
  streamSeq: z.number().int(),
});
/** One job of `GET /v1/jobs`. */
export type JobSummary = z.infer<typeof JobSummarySchema>;

/** `GET /v1/jobs`, `jobs.list`. */
export const JobsResponseSchema = z.object({ jobs: z.array(JobSummarySchema) });
/** `GET /v1/jobs`. */
export type JobsResponse = z.infer<typeof JobsResponseSchema>;

/** `GET /v1/jobs/:id`, `job.inspect`: the summary, and what its log folds to (null: its log has no line yet). */
export const JobDetailSchema = z.object({
  job: JobSummarySchema,
  state: z.object({
    jobId: z.string(),
    executor: JobExecutorSchema,
    idempotent: z.boolean(),
    retries: z.number().int(),
    effects: z.enum(['none', 'possible']),
    onOwnerEnd: z.enum(['cancel', 'detach']),
    resources: z.array(z.string()),
    callId: z.string(),
    seq: z.number().int(),
    phase: JobPhaseSchema,
    attempts: z.number().int(),
    host: z.string().nullable(),
    deadlineAt: z.number().int().nullable(),
    cancel: z.object({ reason: z.enum(['user_cancelled', 'owner_ended']), by: z.string() }).nullable(),
    end: JobEndSchema.nullable(),
    notified: z.object({ messageId: z.string() }).nullable(),
  }).passthrough().nullable(),
});
/** `GET /v1/jobs/:id`. */
export type JobDetail = z.infer<typeof JobDetailSchema>;

/** The params of each job method, by name. */
export const JobRpcParamsSchemas = {
  'jobs.list': z.object({ rootId: idString('agent').optional() }).strict().optional(),
  'job.inspect': z.object({ jobId: idString('job') }).strict(),
  /** A person's stop of a job: an `interrupt` to its inbox on the person channel, which its host takes as a cancel. */
  'job.cancel': z.object({ jobId: idString('job') }).strict(),
} as const;

/** A job method of `/v1/rpc`. */
export type JobRpcMethod = keyof typeof JobRpcParamsSchemas;
/** The params of a job method. */
export type JobRpcParams<M extends JobRpcMethod> = z.infer<(typeof JobRpcParamsSchemas)[M]>;

/** The results of each job method, by name. */
export const JobRpcResultSchemas = {
  'jobs.list': JobsResponseSchema,
  'job.inspect': JobDetailSchema,
  'job.cancel': z.object({ messageId: z.string(), jobId: z.string() }),
} as const satisfies Record<JobRpcMethod, z.ZodType>;

/** A job method's result. */
export type JobRpcResult<M extends JobRpcMethod> = z.infer<(typeof JobRpcResultSchemas)[M]>;

/** The job schemas, for `GET /v1/schema` beside the rest of `/v1`. */
export function jobSchemas(): Record<string, z.ZodType> {
  const out: Record<string, z.ZodType> = { JobsQuery: JobsQuerySchema, JobSummary: JobSummarySchema, JobsResponse: JobsResponseSchema, JobDetail: JobDetailSchema };
  for (const [m, s] of Object.entries(JobRpcParamsSchemas)) out[`rpc.${m}.params`] = s;
  for (const [m, s] of Object.entries(JobRpcResultSchemas)) out[`rpc.${m}.result`] = s;
  return out;
}
