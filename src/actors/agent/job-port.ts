import type { EventData } from '../../protocol/events.js';
import type { JobState } from '../../store/job-projection.js';

/**
 * What an agent reaches its background jobs through (design §5, §11b): it starts them (each an
 * actor of its own, hosted where its lease is taken), reads their state from their logs, and
 * cancels them through their inboxes. Everything is idempotent by ID: a start retried after a
 * crash creates nothing twice, a cancel sent twice is one message.
 */
export interface JobPort {
  /** Creates the job once (its directory entry, its `job/created`) and hosts it here when this process may take its lease. */
  start(data: EventData<'job/created'>): Promise<void>;
  /** The job's state as its log has it now; null when no job has that ID under the root. */
  state(rootId: string, jobId: string): Promise<JobState | null>;
  /** Asks the job to stop (a message from its owner on the actors' channel, its ID derived from `token`). */
  cancel(jobId: string, ownerId: string, reason: 'user_cancelled' | 'owner_ended', token: string): Promise<void>;
  /** How long a job runs when its `start_job` names no timeout (the `job_timeout_seconds` setting). */
  readonly timeoutSeconds?: number;
  /** The job's place in this host's queue (1 = next), or null when it is not waiting here. */
  position(jobId: string): number | null;
}
