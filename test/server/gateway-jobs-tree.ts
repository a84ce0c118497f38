// A tree with jobs, written to a real nats-server the way the job host writes one (the contract it
// follows): an owner agent with an open turn, and its jobs, each a directory entry of kind `job`
// under the owner's root and a log of its own under that root, committed through the real
// JetStream writer. One job runs (a live host holds its lease), one completed and its owner had
// the notice, one waits in the queue. The gateway's and the page's job tests read it.
import type { DirectoryEntry } from '../../src/bus/directory.js';
import { inboxSubject, STREAMS } from '../../src/bus/subjects.js';
import type { Runtime } from '../../src/cli/runtime.js';
import type { EventDraft } from '../../src/protocol/events.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import { jobIdOf } from '../../src/protocol/job-events.js';
import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import type { ActorLogWriter } from '../../src/store/log-port.js';
import { LogBuilder } from '../actors/log-builder.js';
import { JobLogBuilder, jobEnd } from '../helpers/job-log.js';

/** The owner agent: the tree's root. */
export const OWNER = 'agt_01JQBWEB000000000000000000';
/** The job that runs (`npm test`, attempt 1 of 2). */
export const RUNNING = jobIdOf('call_01JQBWEBRUNNING00000000000');
/** The job that completed (`make build`, exit 0), its owner notified. */
export const DONE = jobIdOf('call_01JQBWEBDONE0000000000000');
/** The job queued behind the running one (`npm run lint`, never started). */
export const QUEUED = jobIdOf('call_01JQBWEBQUEUED000000000000');
/** The host that holds the running job's lease. */
export const JOB_HOST = 'jobs-test-host';

function entry(actorId: string, over: Partial<DirectoryEntry> = {}): DirectoryEntry {
  const at = new Date().toISOString();
  return { actorId, kind: 'agent', parentId: null, rootId: OWNER, status: 'running', title: actorId, workspace: '/ws', createdAt: at, updatedAt: at, labels: {}, ...over };
}

/** A job's log as its host commits it: each `step` adds events to the builder, and they go out as one commit. */
export class JobLog {
  readonly b = new JobLogBuilder();
  private sent = 0;
  constructor(private readonly writer: ActorLogWriter) {}

  async commit(step: (b: JobLogBuilder) => void): Promise<this> {
    step(this.b);
    const drafts = this.b.events.slice(this.sent).map(({ type, data }) => ({ type, data }) as EventDraft);
    this.sent = this.b.events.length;
    await this.writer.commit(drafts);
    return this;
  }
}

/** Writes the tree: the owner's log and entry, then each job's, then a lease on the running job held by a live host record; the running job's log goes on from there. */
export async function writeJobTree(rt: Runtime): Promise<{ running: JobLog; startedJob: () => Promise<string> }> {
  const logs = createJetStreamLogs({ publisher: rt.bus.logJs, js: rt.bus.js, jsm: rt.bus.jsm });
  const writer = (actorId: string): ActorLogWriter => logs.writer({ rootId: OWNER, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  await rt.bus.directory.put(entry(OWNER, { title: 'run the tests' }));
  const owner = new LogBuilder().receive('msg_1', 'run the tests').startTurn('msg_1').startStep(1);
  await writer(OWNER).commit(owner.events.map(({ type, data, turn, step }) => ({ type, data, turn, step }) as EventDraft));

  const job = async (jobId: string, callId: string, name: string, command: string, retries = 0): Promise<JobLog> =>
    new JobLog(writer(jobId)).commit((b) => b.created({
      jobId, ownerId: OWNER, rootId: OWNER, name, callId, retries, idempotent: retries > 0, executor: { kind: 'shell', command, cwd: '/ws', timeoutSeconds: 600 },
    }));

  // the completed one first: the lane shows it ended before the running one began. Each commit as
  // its host makes it: started with its move to running, then its end, then the notice
  await rt.bus.directory.put(entry(DONE, { kind: 'job', parentId: OWNER, title: 'build', status: 'completed' }));
  const done = await job(DONE, 'call_01JQBWEBDONE0000000000000', 'build', 'make build');
  await done.commit((b) => b.started());
  await new Promise((r) => setTimeout(r, 300));
  await done.commit((b) => b.phase('running', 'completed', 'exited', 1, { ...jobEnd(0), tail: 'built 3 targets\n' }));
  await done.commit((b) => b.notified('completed'));

  await rt.bus.directory.put(entry(RUNNING, { kind: 'job', parentId: OWNER, title: 'tests', status: 'running' }));
  const running = await job(RUNNING, 'call_01JQBWEBRUNNING00000000000', 'tests', 'npm test', 1);
  await running.commit((b) => b.started(1, Date.now() + 600_000));

  await rt.bus.directory.put(entry(QUEUED, { kind: 'job', parentId: OWNER, title: 'lint', status: 'running', labels: { queuePosition: '1' } }));
  await job(QUEUED, 'call_01JQBWEBQUEUED000000000000', 'lint', 'npm run lint');

  // its host is live and holds it: a message to it goes straight to its inbox (no hand-over to hosts)
  const now = Date.now();
  await rt.hosts.announce({ name: JOB_HOST, hostname: 'localhost', pid: process.pid, startedAt: new Date(now).toISOString(), leaseTtlMs: 600_000 }, now);
  const lease = await rt.leases.take(RUNNING, JOB_HOST, now);
  if (!lease) throw new Error(`could not take the lease of ${RUNNING}`);
  let more = 0;
  // another job of the owner, started (its ID made of a call of its own)
  const startedJob = async (): Promise<string> => {
    const callId = `call_01JQBWEBM0RE${String(++more).padStart(14, '0')}`;
    const jobId = jobIdOf(callId);
    await rt.bus.directory.put(entry(jobId, { kind: 'job', parentId: OWNER, title: `more ${more}`, status: 'running' }));
    await (await job(jobId, callId, `more ${more}`, 'sleep 60')).commit((b) => b.started());
    return jobId;
  };
  return { running, startedJob };
}

/** The last message the job's inbox took on the person channel (null: none). */
export async function lastPersonMessage(rt: Runtime, jobId: string): Promise<InboxMessage | null> {
  const stored = await rt.bus.jsm.streams.getMessage(STREAMS.inbox, { last_by_subj: inboxSubject(jobId, 'person') }).catch(() => null);
  return stored ? (stored.json() as InboxMessage) : null;
}
