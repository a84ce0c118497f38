import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import { OnOwnerEndSchema } from '../../protocol/job-events.js';
import type { ToolDefinition } from '../tool.js';
import { relativeCwd } from './shell.js';

// The tools an agent runs background jobs with (design §5, §11b). Each is carried out by the
// runtime (src/actors/effects/job-tools.ts): `start_job` creates a job actor, which runs the
// command in the same sandbox and under the same policy as `shell`, and returns its ID at once;
// the job's end comes back to the agent as a `job_notice` message.

const runtimeOnly = (name: string) => async (): Promise<never> => {
  throw new ToolError('tool.runtime_only', `${name} is carried out by the agent runtime, not executed as a tool`);
};

/** The longest a job may run. */
export const MAX_JOB_TIMEOUT_SECONDS = 7 * 86_400;

const JOB_ID = z.string().regex(/^job_[0-9A-HJKMNP-TV-Z]{26}$/, 'expected a job ID (job_<26 characters>), as start_job returned it');

const StartJobInput = z.strictObject({
  name: z.string().trim().min(1).max(80).describe('A short name for the job (e.g. "regress")'),
  command: z.string().min(1).max(32_000).describe('The command line, run by bash -c in the workspace as shell runs one'),
  cwd: z.string().min(1).optional().describe('Working directory relative to the workspace root (default ".")'),
  timeout_seconds: z.number().positive().max(MAX_JOB_TIMEOUT_SECONDS).optional().describe('Stop it after this long (default: the job_timeout_seconds setting, 30 minutes)'),
  resources: z.array(z.string().min(1)).max(16).optional().describe('Names of shared resources it holds while it runs (jobs naming the same one run one at a time)'),
  idempotent: z.boolean().default(false).describe('true: running it again does no harm, so an execution lost with its host runs again (while retries last)'),
  retries: z.number().int().min(0).max(5).default(0).describe('Executions it may start after the first, when idempotent'),
  on_owner_end: OnOwnerEndSchema.default('cancel').describe('"cancel": stop it when your turn is interrupted; "detach": let it go on alone'),
});
/** Input of `start_job`. */
export type StartJobInput = z.infer<typeof StartJobInput>;

/** `start_job`: starts a command in the background as a job of its own; returns its ID at once. */
export const startJobTool: ToolDefinition<StartJobInput> = {
  name: 'start_job',
  version: '1',
  description:
    'Start a long command (a test suite, a build) in the background as a job, and get its ID at once. ' +
    'It runs in the same sandbox as shell; when it ends, a message tells you its exit code and the last lines of its output ' +
    '(the whole output is an artifact: read it with artifact_read). Use job_status, wait_jobs and cancel_job with its ID.',
  input: StartJobInput,
  level: 'execute',
  // the start is keyed by the call (the job's ID derives from it): a start retried after a crash starts nothing twice
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'idempotent', key: 'start_job' } }),
  resources: () => [],
  plan: (input, { workspace }) => ({
    tool: 'start_job',
    version: '1',
    command: input.command,
    cwd: relativeCwd(workspace, input.cwd),
    paths: [],
    network: false,
    envNames: [],
  }),
  execute: runtimeOnly('start_job'),
};

const JobStatusInput = z.strictObject({ job_id: JOB_ID.describe('The job, as start_job returned it') });
/** Input of `job_status`. */
export type JobStatusInput = z.infer<typeof JobStatusInput>;

/** `job_status`: where one of the agent's jobs is (queued, running, how it ended) and the last lines of its output. */
export const jobStatusTool: ToolDefinition<JobStatusInput> = {
  name: 'job_status',
  version: '1',
  description: 'Where one of your jobs is: queued (and its place), running, or how it ended, with its exit code and the last lines of its output.',
  input: JobStatusInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('job_status'),
};

const WaitJobsInput = z.strictObject({
  job_ids: z.array(JOB_ID).min(1).optional().describe('The jobs to wait for (default: all your unfinished ones)'),
  timeout_seconds: z.number().positive().max(86_400).default(600).describe('How long to wait at most'),
});
/** Input of `wait_jobs`. */
export type WaitJobsInput = z.infer<typeof WaitJobsInput>;

/** `wait_jobs`: parks the call until one of the jobs ends, or the timeout (a deadline in the log). */
export const waitJobsTool: ToolDefinition<WaitJobsInput> = {
  name: 'wait_jobs',
  version: '1',
  description: 'Wait until one of your jobs ends (or the timeout passes); the result is its notice, and those of any others that ended meanwhile. Call it again for the next.',
  input: WaitJobsInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('wait_jobs'),
};

const CancelJobInput = z.strictObject({ job_id: JOB_ID.describe('The job to stop') });
/** Input of `cancel_job`. */
export type CancelJobInput = z.infer<typeof CancelJobInput>;

/** `cancel_job`: stops one of the agent's jobs (its process group gets SIGTERM, then SIGKILL after a grace); it ends cancelled. */
export const cancelJobTool: ToolDefinition<CancelJobInput> = {
  name: 'cancel_job',
  version: '1',
  description: 'Stop one of your jobs: its processes are signalled, and it ends cancelled (its notice tells you so).',
  input: CancelJobInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('cancel_job'),
};

/** The tools of background jobs. */
export const JOB_TOOLS: ReadonlySet<string> = new Set(['start_job', 'job_status', 'wait_jobs', 'cancel_job']);
