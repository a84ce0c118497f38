import type { DirectoryEntry } from '../bus/directory.js';
import { jobView, jobViewOfRecord, type JobView } from '../client/job-view.js';
import { NotFoundError } from '../protocol/errors.js';
import { foldJobLog, type JobState } from '../store/job-projection.js';
import { emptyProjection, foldEvent } from '../store/projection.js';
import type { ActorEvent } from '../protocol/events.js';
import { entryOf } from './hand-off.js';
import type { Runtime } from './runtime.js';

// What `jobs` and `job` read of a job: its directory entry (kind `job`, under its owner's root) and
// its own log, folded by the job projection. A job's log is an actor log in its owner's tree.

/** A job ID this data dir's directory does not hold as a job (exit 3). */
export function jobNotFound(jobId: string): NotFoundError {
  return new NotFoundError('job.not_found', `no job ${jobId} in this data dir`, {
    hint: 'list jobs with `actorloop jobs` (or `actorloop jobs <agentId>`), and pass the same --data-dir and --nats as the run',
  });
}

/** The directory entry of a job; a NotFoundError when there is none, or the ID names an agent. */
export async function jobEntryOf(rt: Runtime, jobId: string): Promise<DirectoryEntry> {
  const entry = await rt.bus.directory.get(jobId);
  if (!entry || entry.kind !== 'job') throw jobNotFound(jobId);
  return entry;
}

/** A job's log, whole, in seq order. */
export async function readJobLog(rt: Runtime, rootId: string, jobId: string): Promise<ActorEvent[]> {
  const events: ActorEvent[] = [];
  for await (const { event } of rt.reader.read(rootId, jobId, { afterSeq: 0 })) events.push(event);
  return events;
}

/** A job's state from its log (null: the log holds no `job/created` yet). */
export async function readJobState(rt: Runtime, rootId: string, jobId: string): Promise<JobState | null> {
  return foldJobLog(await readJobLog(rt, rootId, jobId));
}

/**
 * The jobs of one agent (its directory's jobs, and those its log started that the directory does
 * not hold yet), or of every tree when `agentId` is null; newest first.
 */
export async function listJobs(rt: Runtime, agentId: string | null, nowMs: number): Promise<JobView[]> {
  const all = await rt.bus.directory.list();
  const entries = all
    .filter((e) => e.kind === 'job' && (agentId === null || e.parentId === agentId))
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.actorId.localeCompare(a.actorId));
  const views = await Promise.all(entries.map(async (e) => jobView(await readJobState(rt, e.rootId, e.actorId), e, nowMs)));
  if (agentId === null) return views;
  // the owner's own record: a job its start_job started whose entry is not written (yet)
  const owner = await entryOf(rt, agentId);
  const p = emptyProjection(agentId);
  for await (const { event } of rt.reader.read(owner.rootId, agentId, { afterSeq: 0 })) foldEvent(p, event);
  const listed = new Set(entries.map((e) => e.actorId));
  for (const [jobId, record] of Object.entries(p.jobs ?? {})) {
    if (listed.has(jobId)) continue;
    const state = await readJobState(rt, owner.rootId, jobId);
    views.push(state !== null ? jobView(state, null, nowMs) : jobViewOfRecord(jobId, agentId, owner.rootId, record));
  }
  return views;
}
