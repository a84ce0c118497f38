import type { ActorEvent } from '../protocol/events.js';
import { isJobEnd } from '../protocol/job-events.js';
import { foldJobLog, type JobState } from '../store/job-projection.js';
import type { TreeReport } from './violations.js';

// A tree's jobs (design §11b): each job's log is its own actor's under its owner's root, checked
// alone by `verifyJobLog`; what links it to the tree is its owner, an agent of the tree whose
// `start_job` call (the one its ID derives from) succeeded. A job still running, or ended and owing
// its owner the notice, keeps the tree running.

/** The jobs of a tree's logs, folded, by job ID (a log whose events start no job is left out). */
export function treeJobs(jobLogs: Map<string, ActorEvent[]>): Map<string, JobState> {
  const jobs = new Map<string, JobState>();
  for (const [id, events] of jobLogs) {
    const s = foldJobLog(events);
    if (s !== null) jobs.set(id, s);
  }
  return jobs;
}

/** Why the tree's jobs keep it running (empty: every job ended and told its owner). */
export function jobRunningReasons(jobs: Map<string, JobState>): string[] {
  const why: string[] = [];
  for (const [id, s] of jobs) {
    if (!isJobEnd(s.phase)) why.push(`job ${id} is ${s.phase}`);
    else if (s.notified === null) why.push(`job ${id} still owes ${s.ownerId} the notice that it ended ${s.phase}`);
  }
  return why;
}

/**
 * Every job has an owner in the tree, and (once the tree is complete) the owner's log holds the
 * `start_job` call the job was started by, succeeded.
 */
export function checkJobOwners(jobs: Map<string, JobState>, agentLogs: Map<string, ActorEvent[]>, complete: boolean, report: TreeReport): void {
  for (const [id, s] of jobs) {
    const owner = agentLogs.get(s.ownerId);
    if (!owner) {
      report('tree.job_unowned', id, 1, `job ${id} names its owner ${s.ownerId}, which has no log in the tree`);
      continue;
    }
    if (!complete) continue;
    const started = owner.some((e) => e.type === 'tool/result' && e.call === s.callId && e.data.ok);
    if (!started) report('tree.job_unowned', id, 1, `job ${id} was started by call ${s.callId}, which its owner ${s.ownerId} has no succeeded tool/result of`);
  }
}
