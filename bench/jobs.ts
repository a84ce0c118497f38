import { loadavg } from 'node:os';
import { defaultTooling } from '../src/actors/agent/tooling.js';
import { createFaultInjector } from '../src/actors/faults/faults.js';
import { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createJetStreamPorts } from '../src/actors/hosting/supervisor-ports.js';
import { jobNoticeMessageId } from '../src/jobs/job-actor.js';
import { startShellJob } from '../src/jobs/shell-executor.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import { isJobEnd, jobIdOf } from '../src/protocol/job-events.js';
import { cancelJobTool, jobStatusTool, startJobTool, waitJobsTool } from '../src/tools/builtins/index.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { findBubblewrap } from '../src/tools/sandbox.js';
import { echoTool } from './echo-tool.js';
import { benchTurnRequest, type BenchRuntime, type Cleanup } from './harness.js';
import { fmtMs, median, nowMs, percentile, settleGc, table } from './stats.js';
import { createAgents } from './workload.js';

/** What one job and its owner's next request measured, on the host's performance clock. */
interface JobSample {
  /** The owner's commit holding the `start_job` call's `tool/start`, acked. */
  callAt: number;
  /** The job's first commit, `job/created` (its directory entry written before it), acked. */
  createdAt: number;
  /** The job's commit holding `job/started` (with `pending → running`), acked: its scheduler place taken. */
  startedAt: number;
  /** `job/started`'s own `at` (the wall clock's ms) on the performance clock: ±1 ms. */
  startedStagedAt: number;
  /** The first `job/output` chunk a subscriber of the job's live subject received. */
  firstOutputAt: number;
  /** The job's commit holding its terminal `job/phase`, acked. */
  endAt: number;
  /** The notice's publish to the owner's inbox called, and its PubAck. */
  noticePublishAt: number;
  noticeAckAt: number;
  /** The job's commit holding `job/notified` (staged after the notice's PubAck), acked. */
  notifiedAt: number;
  /** The owner's commit holding the `request/prepared` that carries the notice to the model. */
  requestAt: number;
  /** That request was the first of a turn the notice started (source `job_notice`), not a step of the turn still running. */
  noticeTurn: boolean;
}

/** One run at one N: every job's sample, and those that did not get that far. */
interface JobRun {
  samples: JobSample[];
  missing: number;
}

/** What a job's owner does: one step calling `start_job`, an answer; then, in the turn its notice starts, an answer. */
function ownerScript(command: string): ScriptResponse[] {
  const usage = { input_tokens: 100, output_tokens: 10 };
  return [
    { tool_calls: [{ name: 'start_job', arguments: { name: 'ready', command } }], usage },
    { content: 'Started it.', usage },
    { content: 'The job ended.', usage },
  ];
}

const WAIT_MS = 60_000;

/**
 * One round: `owners` agents created on `sup`, each sent a task at once; each owner's first step
 * calls `start_job` once (so N jobs start at once, one per owner and tree). Resolves once every
 * job's notice reached a request of its owner (or WAIT_MS passed) and the owners are idle.
 */
async function round(
  rt: BenchRuntime, sup: Supervisor, rec: Recorder, owners: number,
): Promise<JobRun> {
  const actors = await createAgents(sup, rt, owners);
  const request = { ...benchTurnRequest(rt.workspace, 10), tools: ['start_job'], approvalMode: 'full-auto' as const };
  const done = actors.map((a) => rec.expect(a.actorId));
  settleGc();
  await Promise.all(actors.map((a) => sup.send({
    id: newId('message'), from: 'bench', to: a.actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: `Agent ${a.actorId}: start the job.`, request, sentAt: new Date().toISOString(),
  })));
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), WAIT_MS).unref());
  await Promise.race([Promise.all(done), timeout]);
  await Promise.all(actors.map((a) => a.idle()));
  const samples: JobSample[] = [];
  let missing = 0;
  for (const a of actors) {
    const s = rec.sample(a.actorId);
    if (s) samples.push(s);
    else missing += 1;
  }
  return { samples, missing };
}

/** Timestamps of every owner's and job's commits, live chunks and notice publishes, joined per owner. */
class Recorder {
  private readonly jobOf = new Map<string, string>();
  private readonly ownerOf = new Map<string, string>();
  private readonly t = new Map<string, Partial<JobSample> & { noticeTurnOpen?: boolean }>();
  private readonly waiters = new Map<string, () => void>();

  expect(ownerId: string): Promise<void> {
    this.t.set(ownerId, {});
    return new Promise((r) => this.waiters.set(ownerId, r));
  }

  sample(ownerId: string): JobSample | null {
    const s = this.t.get(ownerId);
    this.t.delete(ownerId);
    const keys: Array<keyof JobSample> = ['callAt', 'createdAt', 'startedAt', 'startedStagedAt', 'firstOutputAt', 'endAt', 'noticePublishAt', 'noticeAckAt', 'notifiedAt', 'requestAt'];
    if (!s || keys.some((k) => s[k] === undefined)) return null;
    return { ...(s as JobSample), noticeTurn: s.noticeTurn ?? false };
  }

  private forJob(jobId: string): (Partial<JobSample> & { noticeTurnOpen?: boolean }) | undefined {
    const owner = this.ownerOf.get(jobId);
    return owner === undefined ? undefined : this.t.get(owner);
  }

  onCommit(actorId: string, events: ActorEvent[]): void {
    const at = nowMs();
    const own = this.t.get(actorId);
    for (const e of events) {
      if (own) {
        if (e.type === 'tool/start' && e.data.name === 'start_job' && own.callAt === undefined) {
          own.callAt = at;
          const jobId = jobIdOf(e.call!);
          this.jobOf.set(actorId, jobId);
          this.ownerOf.set(jobId, actorId);
        } else if (e.type === 'turn/start' && e.data.source === 'job_notice') {
          own.noticeTurnOpen = true;
        } else if (e.type === 'request/prepared' && own.requestAt === undefined) {
          const jobId = this.jobOf.get(actorId);
          const carries = jobId !== undefined && (e.data.messageIds ?? []).includes(jobNoticeMessageId(jobId));
          // the notice's own turn counts from its first request, whether or not the request names the message
          if (carries || own.noticeTurnOpen) {
            own.requestAt = at;
            own.noticeTurn = own.noticeTurnOpen === true;
            this.waiters.get(actorId)?.();
          }
        }
        continue;
      }
      const job = this.forJob(actorId);
      if (!job) continue;
      if (e.type === 'job/created') {
        job.createdAt = at;
      } else if (e.type === 'job/started') {
        job.startedAt = at;
        job.startedStagedAt = Date.parse(e.at) - performance.timeOrigin;
      } else if (e.type === 'job/phase' && isJobEnd(e.data.phase)) {
        job.endAt = at;
      } else if (e.type === 'job/notified') {
        job.notifiedAt = at;
      }
    }
  }

  onLive(jobId: string): void {
    const job = this.forJob(jobId);
    if (job && job.firstOutputAt === undefined) job.firstOutputAt = nowMs();
  }

  onNoticePublish(jobId: string, phase: 'call' | 'ack'): void {
    const job = this.forJob(jobId);
    if (!job) return;
    if (phase === 'call') job.noticePublishAt ??= nowMs();
    else job.noticeAckAt ??= nowMs();
  }
}

/**
 * A supervisor as the bench's, with the job tools, bubblewrap and limits high enough that none of
 * the N jobs waits in the scheduler's queue. Its inbox publish is wrapped to time the notices.
 */
function jobSupervisor(rt: BenchRuntime, cleanup: Cleanup, rec: Recorder, bwrapPath: string, limit: number, command: string): Supervisor {
  const ports = createJetStreamPorts(rt.bus);
  const publish = ports.inbox.publish.bind(ports.inbox);
  ports.inbox = Object.assign(Object.create(ports.inbox) as typeof ports.inbox, {
    publish: async (msg: Parameters<typeof publish>[0], channel: Parameters<typeof publish>[1]) => {
      if (msg.kind === 'job_notice') rec.onNoticePublish(msg.from, 'call');
      const r = await publish(msg, channel);
      if (msg.kind === 'job_notice') rec.onNoticePublish(msg.from, 'ack');
      return r;
    },
  });
  const script = ownerScript(command);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };
  const sup = new Supervisor({
    ports, blobs: rt.blobs, snapshots: rt.snapshots, logger: rt.logger, faults: createFaultInjector([]), snapshotEvery: 64,
    tools: createToolRegistry([echoTool, startJobTool, jobStatusTool, waitJobsTool, cancelJobTool]),
    tooling: defaultTooling({ bwrapPath, env }),
    jobLimits: { maxRunningPerHost: limit, maxRunningPerTree: limit, maxQueued: Math.max(100, limit) },
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit: (actorId, events) => rec.onCommit(actorId, events),
  });
  cleanup.add('stop jobs supervisor', () => sup.stop());
  return sup;
}

/** One run at N: `rounds` rounds of N owners with one job each, on a fresh supervisor. */
async function runJobs(rt: BenchRuntime, cleanup: Cleanup, bwrapPath: string, n: number, rounds: number, command: string): Promise<JobRun> {
  const rec = new Recorder();
  const sub = rt.bus.nc.subscribe('live.>', {
    callback: (err, msg) => {
      if (err) return;
      const jobId = msg.subject.slice(msg.subject.lastIndexOf('.') + 1);
      if (!jobId.startsWith('job_')) return;
      if ((JSON.parse(new TextDecoder().decode(msg.data)) as { type?: string }).type === 'job/output') rec.onLive(jobId);
    },
  });
  // the subscription is on the server before any job starts
  await rt.bus.nc.flush();
  const sup = jobSupervisor(rt, cleanup, rec, bwrapPath, Math.max(100, n), command);
  const out: JobRun = { samples: [], missing: 0 };
  try {
    for (let r = 0; r < rounds && !cleanup.closing; r++) {
      const got = await round(rt, sup, rec, n);
      out.samples.push(...got.samples);
      out.missing += got.missing;
    }
  } finally {
    await sup.stop();
    sub.unsubscribe();
  }
  return out;
}

/** The figures of one run, each a list of ms over its jobs. */
function figures(s: JobSample[]): Array<[string, number[]]> {
  const turn = s.filter((x) => x.noticeTurn);
  const rows: Array<[string, number[]]> = [
    ["start_job's tool/start commit → job/created commit", s.map((x) => x.createdAt - x.callAt)],
    ['job/created commit → job/started commit (the scheduler takes its place)', s.map((x) => x.startedAt - x.createdAt)],
    ["start_job's tool/start commit → 1st live output received", s.map((x) => x.firstOutputAt - x.callAt)],
    ['job/started commit → 1st live output received', s.map((x) => x.firstOutputAt - x.startedAt)],
    ["job/started's at (±1 ms) → 1st live output received", s.map((x) => x.firstOutputAt - x.startedStagedAt)],
    ["start_job's tool/start commit → terminal job/phase commit", s.map((x) => x.endAt - x.callAt)],
    ['job/started commit → terminal job/phase commit', s.map((x) => x.endAt - x.startedAt)],
    ['1st live output received → terminal job/phase commit', s.map((x) => x.endAt - x.firstOutputAt)],
    ['terminal job/phase commit → notice publish', s.map((x) => x.noticePublishAt - x.endAt)],
    ['notice publish → its PubAck', s.map((x) => x.noticeAckAt - x.noticePublishAt)],
    ["notice publish → owner's next request/prepared commit", turn.map((x) => x.requestAt - x.noticePublishAt)],
    ["job/notified commit → owner's next request/prepared commit (< 0 as 0)", turn.map((x) => Math.max(0, x.requestAt - x.notifiedAt))],
  ];
  // a notice a running turn took is a step's, not a new turn's: shown apart when there was one
  if (turn.length < s.length) rows.push(["notice publish → the request carrying it, notices a running turn took", s.filter((x) => !x.noticeTurn).map((x) => x.requestAt - x.noticePublishAt)]);
  return rows;
}

/**
 * The floor under a job: the same sandboxed command started by the shell executor alone, N at
 * once, with no actor, log or bus; from the call to its first output chunk and to its result.
 */
async function sandboxFloor(bwrapPath: string, workspace: string, n: number, rounds: number, command: string): Promise<Array<[string, number[]]>> {
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };
  const first: number[] = [];
  const end: number[] = [];
  for (let r = 0; r < rounds; r++) {
    await Promise.all(Array.from({ length: n }, async () => {
      const t0 = nowMs();
      let seen = false;
      const job = await startShellJob(
        { command, timeoutMs: 60_000 },
        { workspace, env, sandbox: { bwrapPath, network: false, envAllow: [], hide: [] } },
        { sink: { write: () => { if (!seen) { seen = true; first.push(nowMs() - t0); } } } },
      );
      await job.result;
      end.push(nowMs() - t0);
    }));
  }
  return [['floor: startShellJob alone → 1st output chunk', first], ['floor: startShellJob alone → its result', end]];
}

/**
 * The jobs section: N owners at once, each one `start_job` of `command`, on the bench's JetStream
 * runtime with bubblewrap; timed from the call to the job's first live output line and its end,
 * and from its notice to the owner's next request. Prints tables; never asserts.
 */
export async function runJobsBench(rt: BenchRuntime, cleanup: Cleanup, opts: { sizes: number[]; samples: number; runs: number; command: string }): Promise<void> {
  const env = process.env.PATH ?? '/usr/bin:/bin';
  const bwrapPath = await findBubblewrap(env);
  console.log('');
  if (!bwrapPath) {
    console.log('== jobs: skipped (no working bubblewrap on PATH: jobs run in the shell sandbox) ==');
    return;
  }
  const load0 = loadavg();
  // warm-up, not reported: the job paths' first compile, the job_slots bucket, bwrap's pages
  await runJobs(rt, cleanup, bwrapPath, Math.min(10, Math.max(...opts.sizes)), 1, opts.command);
  const rows: string[][] = [];
  const perRun: string[][] = [];
  const notes: string[] = [];
  for (const n of opts.sizes) {
    const rounds = Math.max(1, Math.ceil(opts.samples / n));
    const runs: JobRun[] = [];
    for (let r = 0; r < opts.runs && !cleanup.closing; r++) runs.push(await runJobs(rt, cleanup, bwrapPath, n, rounds, opts.command));
    const floors: Array<Array<[string, number[]]>> = [];
    for (let r = 0; r < opts.runs && !cleanup.closing; r++) floors.push(await sandboxFloor(bwrapPath, rt.workspace, n, rounds, opts.command));
    const byRun = runs.map((run, i) => [...figures(run.samples), ...(floors[i] ?? [])]);
    const labels = [...new Set(byRun.flatMap((f) => f.map(([l]) => l)))];
    for (const label of labels) {
      // a row some run lacks (no notice a running turn took) is left out of that run's figures
      const lists = byRun.map((f) => f.find(([l]) => l === label)?.[1] ?? []).filter((xs) => xs.length > 0);
      const p50s = lists.map((xs) => percentile(xs, 50));
      const p99s = lists.map((xs) => percentile(xs, 99));
      rows.push([String(n), label, fmtMs(median(p50s)), fmtMs(median(p99s))]);
      perRun.push([String(n), label, p50s.map(fmtMs).join(', '), p99s.map(fmtMs).join(', ')]);
    }
    const total = runs.reduce((a, r) => a + r.samples.length, 0);
    const inTurn = runs.reduce((a, r) => a + r.samples.filter((x) => x.noticeTurn).length, 0);
    const missing = runs.reduce((a, r) => a + r.missing, 0);
    notes.push(`N=${n}: ${runs.length} runs of ${rounds} round(s) of ${n} owner(s); ${total} jobs measured, ${missing} not; ${inTurn} notices started a job_notice turn, ${total - inTurn} were taken by a step of the owner's turn still running`);
    process.stderr.write(`jobs N=${n} done\n`);
  }
  console.log(`== jobs: N owners at once, each one step calling start_job {command: ${JSON.stringify(opts.command)}} (one job per owner and tree) ==`);
  console.log(table(['N', 'figure', 'p50 ms', 'p99 ms'], rows));
  console.log('');
  console.log(table(['N', 'figure', 'p50 of each run', 'p99 of each run'], perRun));
  console.log(
    [
      `notes: median over runs of each run's p50 and p99; ${notes.join('; ')}.`,
      '  Times on the host\'s performance clock: commits at onCommit (acked); live output at the callback of a core NATS',
      '  subscriber of live.> on the bus connection (flushed before the jobs start); the notice publish wrapped around the',
      '  inbox port. The floor rows: the shell executor alone (the same sandbox and command, N at once, no actor or bus).',
      `  Bubblewrap sandbox, approval mode full-auto, jobLimits maxRunningPerHost = maxRunningPerTree = max(100, N)`,
      '  (no job queued). "notice turns": the request is the first of the turn the notice started (source job_notice); a',
      '  notice that came while the owner\'s first turn still ran is taken by its next step instead and counted apart.',
      `  load average at the section's start: ${load0.map((x) => x.toFixed(2)).join(' ')}; at its end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}.`,
    ].join('\n'),
  );
}
