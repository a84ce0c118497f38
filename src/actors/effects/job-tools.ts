import { resolve } from 'node:path';
import { DEFAULT_JOB_LIMITS, isJobEnd, jobIdOf, type JobEndPhase } from '../../protocol/job-events.js';
import type { EventData } from '../../protocol/events.js';
import type { JobState } from '../../store/job-projection.js';
import type { CancelJobInput, JobStatusInput, StartJobInput, WaitJobsInput } from '../../tools/builtins/job-tools.js';
import { settings, type EffectContext } from '../agent/effect-context.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';
import { armWait, callFailed, callSucceeded } from '../tree/child-waits.js';

// The runtime's side of the job tools (design §5, §11b): `start_job` creates the job (an actor
// of its own, its ID derived from the call) and answers at once; `job_status` reads the job's log;
// `cancel_job` writes to the job's inbox; `wait_jobs` parks the call on the jobs' notices as
// `wait_agents` does on children's (a `subagent/waiting` in the log, settled by the notice's
// inclusion), so a rerun after a crash finds the wait and re-arms it.


function noJobs(a: EffectContext, r: RuntimeToolRun): void {
  callFailed(a, r, 'job.unavailable', 'this runtime runs no background jobs; run the command with shell instead');
}

/** The job's state, or why the model may not look at it (unknown, another agent's). */
async function ownJob(a: EffectContext, jobId: string): Promise<JobState | { code: string; error: string }> {
  const s = await a.ports.jobs!.state(a.rootId, jobId);
  if (!s) return { code: 'job.not_found', error: `no job ${jobId}: use the ID start_job returned` };
  if (s.ownerId !== a.actorId) return { code: 'job.not_yours', error: `job ${jobId} was started by another agent: only its owner may use it` };
  return s;
}

/** One line and the tail of a job, as the model reads it. */
export function jobStatusText(s: JobState, position: number | null): string {
  const ex = s.executor;
  const what = ex.kind === 'shell' ? `command ${JSON.stringify(ex.command)}` : `subagent task`;
  let where: string;
  if (isJobEnd(s.phase)) {
    const how = s.end?.exitCode !== null && s.end?.exitCode !== undefined ? `exit code ${s.end.exitCode}` : (s.reason ?? s.phase);
    where = `ended ${s.phase} (${how}${s.message ? `: ${s.message}` : ''}) after ${((s.end?.durationMs ?? 0) / 1000).toFixed(1)} s`;
  } else if (s.phase === 'pending') {
    where = position !== null ? `queued, number ${position} in line` : s.attempts > 0 ? 'waiting to run again' : 'waiting to start';
  } else if (s.phase === 'running') {
    where = `running (execution ${s.attempts}${s.startedAt !== null ? `, for ${Math.round((Date.now() - s.startedAt) / 1000)} s` : ''})`;
  } else where = `${s.phase}${s.message ? `: ${s.message}` : ''}`;
  const cancel = s.cancel && !isJobEnd(s.phase) ? `; a cancel was asked for by ${s.cancel.by}` : '';
  const out = s.end?.output ? `\nIts whole output (${s.end.output.bytes} bytes) is artifact ${s.end.output.id}: read it with artifact_read once its notice came.` : '';
  const tail = s.end && s.end.tail !== '' ? `\nThe last lines of its output:\n${s.end.tail}` : '';
  return `Job ${s.name} (${s.jobId}), ${what}: ${where}${cancel}.${out}${tail}`;
}

export const startJobRuntime: RuntimeTool = {
  name: 'start_job',
  async run(a, r) {
    const port = a.ports.jobs;
    if (!port) return noJobs(a, r);
    const input = r.input as StartJobInput;
    const s = settings(a);
    const jobId = jobIdOf(r.ids.call);
    const grant = r.call.grant ?? { network: false, envAllow: [] };
    const data: EventData<'job/created'> = {
      jobId, ownerId: a.actorId, rootId: a.rootId, name: input.name,
      executor: {
        kind: 'shell', command: input.command, cwd: resolve(s.workspace, input.cwd ?? '.'),
        timeoutSeconds: input.timeout_seconds ?? port.timeoutSeconds ?? DEFAULT_JOB_LIMITS.timeoutSeconds,
        workspace: s.workspace, network: grant.network, envAllow: grant.envAllow,
      },
      idempotent: input.idempotent,
      retries: input.idempotent ? input.retries : 0,
      // a command may change anything: a lost execution of one not declared idempotent is checked, not rerun
      effects: input.idempotent ? 'none' : 'possible',
      onOwnerEnd: input.on_owner_end,
      resources: input.resources ?? [],
      callId: r.ids.call,
    };
    await port.start(data);
    const position = port.position(jobId);
    const queued = position !== null ? ` It waits for a place to run (number ${position} in line).` : '';
    callSucceeded(a, r, `Started job ${input.name} (${jobId}).${queued} It runs in the background; when it ends, a message tells you how. Go on with other work, or call wait_jobs.`);
  },
};

export const jobStatusRuntime: RuntimeTool = {
  name: 'job_status',
  async run(a, r) {
    if (!a.ports.jobs) return noJobs(a, r);
    const { job_id } = r.input as JobStatusInput;
    const s = await ownJob(a, job_id);
    if ('error' in s) return callFailed(a, r, s.code, s.error);
    callSucceeded(a, r, jobStatusText(s, a.ports.jobs.position(job_id)));
  },
};

export const cancelJobRuntime: RuntimeTool = {
  name: 'cancel_job',
  async run(a, r) {
    if (!a.ports.jobs) return noJobs(a, r);
    const { job_id } = r.input as CancelJobInput;
    const s = await ownJob(a, job_id);
    if ('error' in s) return callFailed(a, r, s.code, s.error);
    if (isJobEnd(s.phase)) return callSucceeded(a, r, `Job ${s.name} (${job_id}) already ended ${s.phase}: nothing to cancel.`);
    await a.ports.jobs.cancel(job_id, a.actorId, 'user_cancelled', r.ids.call);
    callSucceeded(a, r, `Asked job ${s.name} (${job_id}) to stop: its processes get SIGTERM, then SIGKILL after a grace. Its notice tells you when it ended.`);
  },
};

/** The jobs of this agent whose notice has not come, and those whose notice is unread. */
function unfinishedJobs(a: EffectContext): { running: string[]; unread: string[] } {
  const jobs = a.projection.jobs ?? {};
  const running = Object.entries(jobs).filter(([, j]) => !j.notified).map(([id]) => id);
  const unread = Object.entries(jobs).filter(([, j]) => j.noticeId !== undefined && a.projection.inbox[j.noticeId]?.state === 'pending').map(([id]) => id);
  return { running, unread };
}

export const waitJobsRuntime: RuntimeTool = {
  name: 'wait_jobs',
  async run(a, r) {
    if (!a.ports.jobs) return noJobs(a, r);
    const input = r.input as WaitJobsInput;
    if (!a.projection.waits?.[r.ids.call]) {
      const jobs = a.projection.jobs ?? {};
      for (const id of input.job_ids ?? []) {
        if (!Object.hasOwn(jobs, id)) return callFailed(a, r, 'job.not_found', `no job ${id} of yours: use an ID start_job returned`);
      }
      const { running, unread } = unfinishedJobs(a);
      const asked = input.job_ids ? [...new Set(input.job_ids)] : [...new Set([...running, ...unread])];
      const ids = asked.filter((id) => running.includes(id) || unread.includes(id));
      if (ids.length === 0) {
        if (asked.length === 0) return callFailed(a, r, 'job.none_running', 'none of your jobs is running, and no notice is waiting: there is nothing to wait for');
        const ended = asked.map((id) => `${jobs[id]!.name} (${id}) ${jobs[id]!.phase as JobEndPhase}`).join(', ');
        return callSucceeded(a, r, `Nothing to wait for: ${ended}; their notices are already in your messages.`);
      }
      a.stage({ type: 'subagent/waiting', ...r.ids, data: { childIds: ids, deadlineAt: Math.round(a.ports.clock.nowMs() + input.timeout_seconds * 1000), any: true } });
    }
    armWait(a, r.ids);
  },
};

/**
 * A turn that ended cancelled or failed stops the jobs it started that said `on_owner_end:
 * "cancel"` (the default): a message to each job's inbox (its ID derived from the job and the
 * turn, so a retry after a crash sends it once); the job records `job/cancel_requested`
 * (owner_ended) and ends cancelled. Jobs of earlier turns, and detached ones, go on.
 */
export async function endJobs(a: EffectContext, outcome: string): Promise<void> {
  const port = a.ports.jobs;
  const turn = a.projection.openTurn?.id;
  if (!port || !turn || (outcome !== 'cancelled' && outcome !== 'failed')) return;
  for (const [jobId, j] of Object.entries(a.projection.jobs ?? {})) {
    if (j.notified || j.turn !== turn || j.onOwnerEnd === 'detach') continue;
    await port.cancel(jobId, a.actorId, 'owner_ended', turn).catch((err: unknown) =>
      a.logger.warn({ err, jobId }, 'cancel of a job not sent; it runs on until its own end'));
    if (a.halted) return;
  }
}
