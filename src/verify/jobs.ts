import { isJobEnd, JOB_EDGES, type JobPhase } from '../protocol/job-events.js';
import type { Check, Report } from './violations.js';

// A job's invariants (design §11b) as its own log shows them: its phase moves only along the job
// machine's edges (`JOB_EDGES`, the one definition both use), it ends exactly once, no execution
// starts after it ended or while one is already under way, and its notice is recorded at most
// once and only after it ended. Logs without a `job/created` (an agent's) have nothing to check.

/** Checks one job's log; O(1) state. */
export function createJobCheck(report: Report): Check {
  let created = false;
  let createdAt = 0;
  let phase: JobPhase = 'pending';
  /** The seq of its terminal phase (null: not ended). */
  let endedAt: number | null = null;
  let attempts = 0;
  let notifiedAt: number | null = null;
  let strayed = false;
  // once per log: every job event of a log that never started a job is the same mistake
  const uncreated = (seq: number, type: string): boolean => {
    if (created) return false;
    if (!strayed) report('job.uncreated', seq, `${type} with no job/created before it: the log does not start a job`);
    strayed = true;
    return true;
  };
  return {
    event(e) {
      switch (e.type) {
        case 'job/created':
          created = true;
          createdAt = e.seq;
          return;
        case 'job/started':
          if (uncreated(e.seq, e.type)) return;
          if (endedAt !== null) report('job.started_after_end', e.seq, `execution ${e.data.attempt} starts after the job ended ${phase} at seq ${endedAt}`);
          else if (phase !== 'pending' || e.data.attempt !== attempts + 1) {
            report('job.started_twice', e.seq, `execution ${e.data.attempt} starts while the job is ${phase} after ${attempts} execution(s): an execution starts only from pending, numbered one more than the last`);
          }
          attempts = Math.max(attempts, e.data.attempt);
          return;
        case 'job/phase': {
          if (uncreated(e.seq, e.type)) return;
          const d = e.data;
          if (endedAt !== null) {
            report('job.ended_twice', e.seq, `job/phase ${d.from} → ${d.phase} after the job ended ${phase} at seq ${endedAt}`);
            return;
          }
          if (d.from !== phase || !JOB_EDGES[phase].includes(d.phase)) {
            const why = d.from !== phase ? `the job is ${phase}, not ${d.from}` : `${phase} → ${d.phase} is no edge of the job machine`;
            report('job.edge', e.seq, `job/phase ${d.from} → ${d.phase}: ${why}`);
          }
          if (isJobEnd(d.phase) !== (d.end !== null)) {
            report('job.end_missing', e.seq, isJobEnd(d.phase) ? `job/phase → ${d.phase} ends the job without its end (exit code, duration, output)` : `job/phase → ${d.phase} carries an end but does not end the job`);
          }
          phase = d.phase;
          if (isJobEnd(d.phase)) endedAt = e.seq;
          return;
        }
        case 'job/notified':
          if (uncreated(e.seq, e.type)) return;
          if (notifiedAt !== null) report('job.notified_twice', e.seq, `notice ${e.data.messageId} recorded again: the owner had it at seq ${notifiedAt}`);
          else if (endedAt === null) report('job.notified_early', e.seq, `notice ${e.data.messageId} recorded while the job is ${phase}: a notice follows its end`);
          notifiedAt ??= e.seq;
          return;
        case 'job/cancel_requested':
          uncreated(e.seq, e.type);
          return;
        default:
          return;
      }
    },
    end(complete) {
      if (complete && created && endedAt === null) report('job.unended', createdAt, `the log is complete and the job is still ${phase}: a job ends in exactly one of completed, failed, cancelled, interrupted`);
    },
  };
}
