import type { ID_PREFIXES } from '../../src/protocol/ids.js';
import type { JobEndPhase, JobPhase } from '../../src/protocol/job-events.js';

// The page's side of the gateway's job protocol (src/protocol/gateway-jobs.ts): the few shapes the
// page reads, and test/server/gateway-jobs.test.ts checks at compile time that the gateway's
// answers fit them (a drift fails `tsc`).

/** The job methods the page calls, their params and results (`JobRpcParamsSchemas`, `JobRpcResultSchemas`). */
export interface JobMethods {
  'job.cancel': { params: { jobId: string }; result: { messageId: string; jobId: string } };
}

/** What the page reads of `GET /v1/jobs/:id` (`JobDetail`): the gateway's word on the job's queue place. */
export interface JobDetailRead {
  job: { jobId: string; phase: JobPhase | null; queuePosition: number | null };
}

/** The prefix of a job's ID (`ID_PREFIXES.job`): the compiler says when it changes. */
export const JOB_ID_PREFIX: `${(typeof ID_PREFIXES)['job']}_` = 'job_';

/** The phases a job ends in (`JobEndPhaseSchema`): `satisfies` says when the protocol adds one this lacks. */
const JOB_ENDS = { completed: true, failed: true, cancelled: true, interrupted: true } satisfies Record<JobEndPhase, true>;

/** True for a phase a job ends in (`isJobEnd`). */
export function jobEnded(phase: JobPhase): phase is JobEndPhase {
  return Object.hasOwn(JOB_ENDS, phase);
}
