import type { NatsConnection } from '@nats-io/nats-core';
import { watchJobOutput } from '../client/job-output.js';
import type { LiveWatch } from '../client/live.js';

// A running job's output as its host publishes it (core NATS on the job's live subject, never
// persisted: design §11b), relayed by the gateway to a page watching the job
// (`GET /v1/jobs/:id/output`). Best effort, as every live subject is: a chunk may be missed (a slow
// consumer, a watch opened mid-run), so whoever shows them keeps the terminal `job/phase`'s tail
// as the truth once the job ends.

/** Where the gateway hears a job's live output. */
export interface JobOutputSource {
  /** Calls `onText` with each chunk of the job's output from now on, in the order published. */
  watch(target: { rootId: string; jobId: string }, onText: (text: string) => void): LiveWatch;
}

/** The job output source over a NATS connection: the client's watch on the job's live subject (`watchJobOutput`), as the CLI's `job --follow` reads it. */
export function createNatsJobOutputSource(nc: NatsConnection): JobOutputSource {
  return { watch: (target, onText) => watchJobOutput(nc, target.rootId, target.jobId, onText) };
}
