import type { DirectoryEntry } from '../bus/directory.js';
import { ConfigError, NotFoundError } from '../protocol/errors.js';
import { isJobEnd } from '../protocol/job-events.js';
import { jobView } from '../client/job-view.js';
import type { ActorReadPorts } from './actor-reads.js';
import type { JobDetail, JobSummary } from '../protocol/gateway-jobs.js';
import { redactJson } from './redact-json.js';
import type { FoldedTree } from './tree-folds.js';

// The gateway's reads of jobs (`GET /v1/jobs`, `GET /v1/jobs/:id`, `jobs.list`, `job.inspect`) and
// the check `job.cancel` makes before it sends: each job folded from its own log in its owner's
// tree (the tree folds keep it, `tree-folds.ts`), its queue place from the directory (the host
// writes it there, not in the log: a queue moves without anything happening to the job).
// Redacted on the way out, as every read is.

/** A job ID the directory does not hold as a job (exit 3 in the CLI's words, a 404 here). */
export function jobNotFound(jobId: string): NotFoundError {
  return new NotFoundError('gateway.job_not_found', `no job ${jobId} in this data dir`, {
    hint: 'list the jobs of a run with GET /v1/jobs?root=<agent> (or `actorloop jobs`)',
  });
}

/** One job as a tree holds it (the entry alone when its log has no line yet): what every client shows of it, with its times. */
function summaryOf(tree: FoldedTree, entry: DirectoryEntry | undefined, jobId: string): JobSummary {
  const job = tree.jobs.get(jobId) ?? null;
  const times = tree.jobTimes.get(jobId);
  const view = jobView(job, entry ?? null, Date.now());
  return {
    ...view,
    jobId,
    rootId: view.rootId === '' ? tree.fold.rootId : view.rootId,
    maxAttempts: (job?.retries ?? 0) + 1,
    createdAt: times?.createdAt ?? entry?.createdAt ?? new Date(0).toISOString(),
    startedAt: times?.startedAt ?? null,
    endedAt: times?.endedAt ?? null,
    streamSeq: tree.streamSeq,
  };
}

/** The job IDs of a tree: those its logs start, then the directory's jobs of it with no log yet. */
function jobIdsOf(tree: FoldedTree, entries: readonly DirectoryEntry[]): string[] {
  const ids = [...tree.jobs.keys()];
  for (const e of entries) if (e.kind === 'job' && e.rootId === tree.fold.rootId && !tree.jobs.has(e.actorId)) ids.push(e.actorId);
  return ids;
}

/** Every job of the directory's trees (or of `rootId`'s alone), oldest first in each tree. */
export async function listJobs(ports: ActorReadPorts, rootId?: string): Promise<{ jobs: JobSummary[] }> {
  const entries = await ports.directory.list();
  const byId = new Map(entries.map((e) => [e.actorId, e]));
  const roots = rootId !== undefined ? [rootId] : [...new Set(entries.filter((e) => e.kind === 'job').map((e) => e.rootId))].sort();
  const jobs: JobSummary[] = [];
  for (const root of roots) {
    if (!entries.some((e) => e.rootId === root)) continue;
    // copied (by the redaction) while the tree is held: the next read moves the same states on
    jobs.push(...(await ports.folds.with(root, (tree) => redactJson(
      jobIdsOf(tree, entries).map((id) => summaryOf(tree, byId.get(id), id)).sort((a, b) => a.createdAt.localeCompare(b.createdAt)),
      ports.redact,
    ))));
  }
  return { jobs };
}

/** The directory entry of a job, or NotFoundError (an ID of another kind of actor is no job either). */
async function jobEntry(ports: ActorReadPorts, jobId: string): Promise<DirectoryEntry> {
  const entry = await ports.directory.get(jobId);
  if (!entry || entry.kind !== 'job') throw jobNotFound(jobId);
  return entry;
}

/** One job: its summary and its folded state (`GET /v1/jobs/:id`, `job.inspect`). */
export async function inspectJob(ports: ActorReadPorts, jobId: string): Promise<JobDetail> {
  const entry = await jobEntry(ports, jobId);
  return ports.folds.with(entry.rootId, (tree) => redactJson({
    job: summaryOf(tree, entry, jobId),
    state: tree.jobs.get(jobId) ?? null,
  }, ports.redact) as JobDetail);
}

/**
 * The check `job.cancel` makes before it sends: the job exists (NotFoundError) and has not ended
 * (ConfigError naming the phase it ended in). A job whose stop was asked for already is asked
 * again: the host dedupes nothing here, and a second ask does no harm.
 */
export async function cancellableJob(ports: ActorReadPorts, jobId: string): Promise<JobSummary> {
  const entry = await jobEntry(ports, jobId);
  const job = await ports.folds.with(entry.rootId, (tree) => summaryOf(tree, entry, jobId));
  if (job.phase !== null && isJobEnd(job.phase)) {
    throw new ConfigError('gateway.job_ended', `job ${jobId} ("${job.name}") already ended ${job.phase}: there is nothing to cancel`, {
      hint: job.tail !== null ? 'its output tail is in GET /v1/jobs/<id>' : 'GET /v1/jobs/<id> shows how it ended',
    });
  }
  return redactJson(job, ports.redact);
}
