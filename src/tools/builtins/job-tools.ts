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

const JOB_ID = z.string().regex(/^job_[0-9A-HJKMNP-TV-Z]{26}$/, 'expected a job ID (job_<26 characters>), as start_job returned it').describe('As start_job returned it');

const StartJobInput = z.strictObject({
  name: z.string().trim().min(1).max(80).describe('Short name, e.g. "regress"'),
  command: z.string().min(1).max(32_000).describe('Command line (bash -c)'),
  cwd: z.string().min(1).optional().describe('Relative to the workspace (default ".")'),
  timeout_seconds: z.number().positive().max(MAX_JOB_TIMEOUT_SECONDS).optional().describe('Default 1800'),
  resources: z.array(z.string().min(1)).max(16).optional().describe('Names it holds while running: jobs naming one run one at a time'),
  idempotent: z.boolean().default(false).describe('Safe to run again if its host dies'),
  retries: z.number().int().min(0).max(5).default(0).describe('Reruns allowed when idempotent'),
  on_owner_end: OnOwnerEndSchema.default('cancel').describe('On your turn being interrupted: cancel it, or let it go on'),
});
/** Input of `start_job`. */
export type StartJobInput = z.infer<typeof StartJobInput>;

/** `start_job`: starts a command in the background as a job of its own; returns its ID at once. */
export const startJobTool: ToolDefinition<StartJobInput> = {
  name: 'start_job',
  version: '1',
  description:
    'Run a long command (tests, a build) in the background, sandboxed as shell; returns its job ID at once. ' +
    'When it ends, a message gives its exit code and last output lines (all of it: artifact_read).',
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

const JobStatusInput = z.strictObject({ job_id: JOB_ID });
/** Input of `job_status`. */
export type JobStatusInput = z.infer<typeof JobStatusInput>;

/** `job_status`: where one of the agent's jobs is (queued, running, how it ended) and the last lines of its output. */
export const jobStatusTool: ToolDefinition<JobStatusInput> = {
  name: 'job_status',
  version: '1',
  description: 'A job of yours: queued, running, or how it ended (exit code, last output lines).',
  input: JobStatusInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('job_status'),
};

const WaitJobsInput = z.strictObject({
  job_ids: z.array(JOB_ID).min(1).optional().describe('Default: all your unfinished jobs'),
  timeout_seconds: z.number().positive().max(86_400).default(600),
});
/** Input of `wait_jobs`. */
export type WaitJobsInput = z.infer<typeof WaitJobsInput>;

/** `wait_jobs`: parks the call until one of the jobs ends, or the timeout (a deadline in the log). */
export const waitJobsTool: ToolDefinition<WaitJobsInput> = {
  name: 'wait_jobs',
  version: '1',
  description: 'Wait until one of your jobs ends (or the timeout); returns the notices of those that ended.',
  input: WaitJobsInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('wait_jobs'),
};

const CancelJobInput = z.strictObject({ job_id: JOB_ID });
/** Input of `cancel_job`. */
export type CancelJobInput = z.infer<typeof CancelJobInput>;

/** `cancel_job`: stops one of the agent's jobs (its process group gets SIGTERM, then SIGKILL after a grace); it ends cancelled. */
export const cancelJobTool: ToolDefinition<CancelJobInput> = {
  name: 'cancel_job',
  version: '1',
  description: 'Stop a job of yours; it ends cancelled.',
  input: CancelJobInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly('cancel_job'),
};

/** The tools of background jobs. */
export const JOB_TOOLS: ReadonlySet<string> = new Set(['start_job', 'job_status', 'wait_jobs', 'cancel_job']);
