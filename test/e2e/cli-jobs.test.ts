// `actorloop jobs`, `job`, and jobs in `tree`, `runs`, `events --tree` and `verify --tree`, over a
// real nats-server: job logs written by the real JetStream writer under their owners' roots, with
// the directory entries the job host writes (kind `job`, the owner as parent, the queue position
// as a label), then the built CLI run against them.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openBus, type Bus } from '../../src/bus/connection.js';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import { inboxSubject, liveSubject, STREAMS } from '../../src/bus/subjects.js';
import type { ActorEvent, EventDraft } from '../../src/protocol/events.js';
import { jobIdOf } from '../../src/protocol/job-events.js';
import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import type { ActorLogWriter } from '../../src/store/log-port.js';
import { LogBuilder } from '../actors/log-builder.js';
import { lines, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { JobLogBuilder } from '../helpers/job-log.js';

const stack = useCliStack();

/** Owner A: one turn whose start_job call (call_1) started the completed job. */
const OWNER_A = 'agt_01JQBSRXXTA0000000000000AA';
/** Owner B: its jobs wait in the queue and run. */
const OWNER_B = 'agt_01JQBSRXXTB0000000000000BB';
const DONE = jobIdOf('call_1');
const QUEUED = jobIdOf('call_queued');
const RUNNING = jobIdOf('call_running');
const STOPPING = jobIdOf('call_stopping');
const UNKNOWN = 'job_01ABCDEFGHJKMNPQRSTVWXYZ01';

let bus: Bus;
let dataDir: string;
let common: string[];
let running: ActorLogWriter;
let stopping: ActorLogWriter;

function drafts(events: readonly ActorEvent[]): EventDraft[] {
  return events.map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft);
}

function entry(e: Pick<DirectoryEntry, 'actorId' | 'kind' | 'parentId' | 'rootId' | 'status' | 'title'> & Partial<DirectoryEntry>): DirectoryEntry {
  const at = new Date().toISOString();
  return { workspace: '/ws', createdAt: at, updatedAt: at, labels: {}, ...e };
}

async function writeLog(rootId: string, actorId: string, events: readonly ActorEvent[]): Promise<ActorLogWriter> {
  const logs = createJetStreamLogs({ publisher: bus.logJs, js: bus.js, jsm: bus.jsm });
  const writer = logs.writer({ rootId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  await writer.commit(drafts(events));
  return writer;
}

/** A job's log from the fixture builder, named for this job and owner. */
function jobLog(jobId: string, ownerId: string, callId: string, name: string, build: (b: JobLogBuilder) => JobLogBuilder): ActorEvent[] {
  const b = build(new JobLogBuilder().created({ jobId, ownerId, rootId: ownerId, callId, name }));
  return b.events.map((e) => (e.type === 'job/notified' ? { ...e, data: { ...e.data, ownerId } } : e));
}

beforeAll(async () => {
  dataDir = await stack.dir('jobs');
  common = stack.flags(dataDir);
  bus = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  // owner A's turn: a start_job call that succeeded, then its answer
  const a = new LogBuilder();
  a.receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('start_job')
    .call({ name: 'start_job', effects: 'possible', recovery: 'manual' }).startTool('call_1', { name: 'start_job', effects: 'possible' }).result('call_1')
    .endStep('tool_calls', 1).startStep(2).answer('Started the tests.').endStep('final').endTurn('completed', 'Started the tests.');
  await writeLog(OWNER_A, OWNER_A, a.events);
  const b = new LogBuilder();
  b.receive('msg_1').startTurn('msg_1').startStep(1).answer('Queued.').endStep('final').endTurn('completed', 'Queued.');
  await writeLog(OWNER_B, OWNER_B, b.events);
  await writeLog(OWNER_A, DONE, jobLog(DONE, OWNER_A, 'call_1', 'regress', (j) => j.started().phase('running', 'completed', 'exited').notified()));
  await writeLog(OWNER_B, QUEUED, jobLog(QUEUED, OWNER_B, 'call_queued', 'lint', (j) => j));
  running = await writeLog(OWNER_B, RUNNING, jobLog(RUNNING, OWNER_B, 'call_running', 'build', (j) => j.started()));
  stopping = await writeLog(OWNER_B, STOPPING, jobLog(STOPPING, OWNER_B, 'call_stopping', 'serve', (j) => j.started()));
  await bus.directory.put(entry({ actorId: OWNER_A, kind: 'agent', parentId: null, rootId: OWNER_A, status: 'completed', title: 'run the tests' }));
  await bus.directory.put(entry({ actorId: OWNER_B, kind: 'agent', parentId: null, rootId: OWNER_B, status: 'completed', title: 'lint and build' }));
  await bus.directory.put(entry({ actorId: DONE, kind: 'job', parentId: OWNER_A, rootId: OWNER_A, status: 'completed', title: 'regress' }));
  await bus.directory.put(entry({ actorId: QUEUED, kind: 'job', parentId: OWNER_B, rootId: OWNER_B, status: 'running', title: 'lint', labels: { queuePosition: '2' } }));
  await bus.directory.put(entry({ actorId: RUNNING, kind: 'job', parentId: OWNER_B, rootId: OWNER_B, status: 'running', title: 'build' }));
  await bus.directory.put(entry({ actorId: STOPPING, kind: 'job', parentId: OWNER_B, rootId: OWNER_B, status: 'running', title: 'serve' }));
}, 30_000);

afterAll(async () => {
  await bus?.close();
});

describe('jobs', () => {
  test.concurrent('jobs lists every tree\'s jobs with their phases; --json has the same facts', async (ctx) => {
    const cli = stack.cli(ctx, dataDir);
    const [table, json] = await Promise.all([cli.run(['jobs', ...common]), cli.run(['jobs', '--json', ...common])]);
    expect(table.code, show(table)).toBe(0);
    const rows = lines(table.stdout);
    expect(rows[0]).toMatch(/^ID\s+NAME\s+PHASE\s+ATTEMPTS\s+EXIT\s+DURATION\s+OWNER$/);
    expect(rows.find((l) => l.startsWith(DONE))).toMatch(new RegExp(`^${DONE}\\s+regress\\s+completed\\s+1\\s+0\\s+1\\.5s\\s+${OWNER_A}$`));
    expect(rows.find((l) => l.startsWith(QUEUED))).toMatch(/\blint\s+queued #2\s+0\s+-\s+-\s+/);
    expect(rows.find((l) => l.startsWith(RUNNING))).toMatch(/\bbuild\s+running\s+1\s+-\s+/);
    expect(json.code, show(json)).toBe(0);
    const jobs = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(jobs.map((j) => j.jobId).sort()).toEqual([DONE, QUEUED, RUNNING, STOPPING].sort());
    expect(jobs.find((j) => j.jobId === DONE)).toMatchObject({
      name: 'regress', ownerId: OWNER_A, phase: 'completed', attempts: 1, exitCode: 0, durationMs: 1500, command: 'npm test',
      output: { digest: 'sha256:out', bytes: 12 }, notified: true,
    });
    expect(jobs.find((j) => j.jobId === QUEUED)).toMatchObject({ phase: 'pending', queuePosition: 2, attempts: 0 });
  });

  test.concurrent('jobs <agent> lists that agent\'s jobs alone', async (ctx) => {
    const r = await stack.cli(ctx, dataDir).run(['jobs', OWNER_A, '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    expect((JSON.parse(r.stdout) as Array<{ jobId: string }>).map((j) => j.jobId)).toEqual([DONE]);
  });
});

describe('job', () => {
  test.concurrent('job <id> of a completed job: what ran, its phase, exit, duration, output and tail', async (ctx) => {
    const r = await stack.cli(ctx, dataDir).run(['job', DONE, ...common]);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^${DONE}  regress\n`));
    expect(r.stdout).toMatch(/^ {2}command\s+npm test$/m);
    expect(r.stdout).toMatch(new RegExp(`^ {2}owner\\s+${OWNER_A}$`, 'm'));
    expect(r.stdout).toMatch(/^ {2}phase\s+completed \(exited\)$/m);
    expect(r.stdout).toMatch(/^ {2}attempts\s+1 · last on host-a$/m);
    expect(r.stdout).toMatch(/^ {2}exit\s+0$/m);
    expect(r.stdout).toMatch(/^ {2}duration\s+1\.5s$/m);
    expect(r.stdout).toMatch(/^ {2}output\s+sha256:out · 12 bytes$/m);
    expect(r.stdout).toMatch(/output tail:\n {2}ok 12 tests\n$/);
  });

  test.concurrent('job <id> of a queued job says its place in the queue', async (ctx) => {
    const cli = stack.cli(ctx, dataDir);
    const [text, json] = await Promise.all([cli.run(['job', QUEUED, ...common]), cli.run(['job', QUEUED, '--json', ...common])]);
    expect(text.code, show(text)).toBe(0);
    expect(text.stdout).toMatch(/^ {2}phase\s+queued #2$/m);
    expect(text.stdout).not.toMatch(/exit|output tail/);
    expect(JSON.parse(json.stdout)).toMatchObject({ jobId: QUEUED, phase: 'pending', queuePosition: 2, exitCode: null, tail: null });
  });

  test.concurrent('job <unknown> is one line naming it, no stack, exit 3 as for an unknown agent', async (ctx) => {
    const r = await stack.cli(ctx, dataDir).run(['job', UNKNOWN, ...common]);
    expect({ code: r.code, stdout: r.stdout }, show(r)).toEqual({ code: 3, stdout: '' });
    expect(r.stderr).not.toMatch(/^ {4}at /m);
    expect(lines(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^actorloop: no job ${UNKNOWN} in this data dir`));
    // an agent's ID is no job's
    const agent = await stack.cli(ctx, dataDir).run(['job', OWNER_A, ...common]);
    expect(agent.code, show(agent)).toBe(2);
  });

  test.concurrent('job <id> --cancel puts an interrupt into the job\'s inbox on the person channel', async (ctx) => {
    const r = await stack.cli(ctx, dataDir).run(['job', QUEUED, '--cancel', '--json', ...common]);
    expect(r.code, show(r)).toBe(0);
    const { messageId } = JSON.parse(r.stdout) as { messageId: string };
    const m = await bus.jsm.streams.getMessage(STREAMS.inbox, { last_by_subj: inboxSubject(QUEUED, 'person') });
    expect(m).not.toBeNull();
    expect(JSON.parse(new TextDecoder().decode(m!.data))).toMatchObject({ id: messageId, to: QUEUED, kind: 'interrupt', target: 'now' });
    // an ended job has nothing to cancel, and nothing is sent
    const done = await stack.cli(ctx, dataDir).run(['job', DONE, '--cancel', ...common]);
    expect(done.code, show(done)).toBe(0);
    expect(done.stderr).toMatch(/already ended completed: nothing to cancel/);
    expect(await bus.jsm.streams.getMessage(STREAMS.inbox, { last_by_subj: inboxSubject(DONE, 'person') }).catch(() => null)).toBeNull();
  });

  test('job <id> --follow prints the live output and the phase moves until it ends, exit 1 when it failed', async (ctx) => {
    const follow = stack.cli(ctx, dataDir).start(['job', RUNNING, '--follow', ...common]);
    // the status line is written once the live watch is ready
    await follow.waitFor(new RegExp(`${RUNNING} build: running`), 10_000);
    bus.nc.publish(liveSubject(OWNER_B, RUNNING), JSON.stringify({ type: 'job/output', text: 'compiling 3 files\n' }));
    await follow.waitFor(/compiling 3 files/, 5_000);
    await running.commit([{ type: 'job/phase', data: {
      from: 'running', phase: 'failed', reason: 'exited', message: 'exit 2', attempt: 1,
      end: { exitCode: 2, signal: null, durationMs: 900, usage: null, costUsd: null, output: null, tail: 'error TS2304\n' },
    } }]);
    const r = await follow.ended;
    expect(r.code, show(r)).toBe(1);
    expect(r.stdout).toBe('compiling 3 files\n');
    expect(r.stderr).toMatch(/job\/phase\s+running → failed \(exited\) · exit 2/);
  });
});

test('job <id> --cancel --follow waits for the job to end cancelled: exit 0, what was asked; the tail when no live output came', async (ctx) => {
  const follow = stack.cli(ctx, dataDir).start(['job', STOPPING, '--cancel', '--follow', ...common]);
  await follow.waitFor(new RegExp(`${STOPPING} serve: running`), 10_000);
  const m = await bus.jsm.streams.getMessage(STREAMS.inbox, { last_by_subj: inboxSubject(STOPPING, 'person') });
  const msg = JSON.parse(new TextDecoder().decode(m!.data)) as { id: string; kind: string };
  expect(msg.kind).toBe('interrupt');
  // what the job's host commits when it takes the interrupt in
  await stopping.commit([
    { type: 'job/cancel_requested', data: { reason: 'user_cancelled', by: 'client:cli', messageId: msg.id } },
    { type: 'job/phase', data: {
      from: 'running', phase: 'cancelled', reason: 'user_cancelled', message: null, attempt: 1,
      end: { exitCode: null, signal: 'SIGTERM', durationMs: 4_000, usage: null, costUsd: null, output: null, tail: 'listening on :8080\n' },
    } },
  ]);
  const r = await follow.ended;
  expect(r.code, show(r)).toBe(0);
  expect(r.stdout).toBe('listening on :8080\n');
  expect(r.stderr).toMatch(new RegExp(`cancel of ${STOPPING} sent \\(${msg.id}\\)`));
  expect(r.stderr).toMatch(/job\/cancel_requested\s+user_cancelled · by client:cli/);
});

describe('jobs in the other commands', () => {
  test.concurrent('tree shows a job under its owner with its phase; runs never lists a job', async (ctx) => {
    const cli = stack.cli(ctx, dataDir);
    const [tree, json, runs] = await Promise.all([
      cli.run(['tree', OWNER_A, ...common]), cli.run(['tree', OWNER_A, '--json', ...common]), cli.run(['runs', '--json', ...common]),
    ]);
    expect(tree.code, show(tree)).toBe(0);
    const ls = lines(tree.stdout);
    expect(ls[0]).toMatch(new RegExp(`^main\\s+${OWNER_A}  completed`));
    expect(ls[1]).toMatch(new RegExp(`^ {2}regress\\s+${DONE}  job completed · exit 0$`));
    expect(ls.at(-1)).toMatch(/^total: 1 agent · 1 job · /);
    const view = JSON.parse(json.stdout) as { agents: Array<Record<string, unknown>>; settled: boolean };
    expect(view.agents[1]).toMatchObject({ actorId: DONE, parentId: OWNER_A, depth: 1, status: 'completed', job: { phase: 'completed', exitCode: 0 } });
    expect(view.settled).toBe(true);
    // a job's ID shows its owner's tree
    const byJob = await cli.run(['tree', DONE, ...common]);
    expect(byJob.code, show(byJob)).toBe(0);
    expect(byJob.stdout).toBe(tree.stdout);
    expect(byJob.stderr).toContain(`${DONE} is a job in the tree of ${OWNER_A}; showing that tree`);
    expect(runs.code, show(runs)).toBe(0);
    const ids = lines(runs.stdout).map((l) => (JSON.parse(l) as { actorId: string }).actorId);
    expect(ids.sort()).toEqual([OWNER_A, OWNER_B].sort());
    expect(lines(runs.stdout).map((l) => (JSON.parse(l) as { children: number }).children)).toEqual([0, 0]);
  });

  test.concurrent('verify --tree checks a job\'s log as a job\'s; events --tree names the job', async (ctx) => {
    const cli = stack.cli(ctx, dataDir);
    const [text, json, events] = await Promise.all([
      cli.run(['verify', OWNER_A, '--tree', ...common]), cli.run(['verify', OWNER_A, '--tree', '--json', ...common]), cli.run(['events', OWNER_A, '--tree', ...common]),
    ]);
    expect(text.code, show(text)).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^tree ${OWNER_A}: 1 agent\\(s\\), 1 job\\(s\\), \\d+ events$`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^ {2}${DONE} \\(job regress\\): 5 events, all invariants hold$`, 'm'));
    const v = JSON.parse(json.stdout) as { ok: boolean; running: string[]; actors: Array<Record<string, unknown>> };
    expect(v).toMatchObject({ ok: true, running: [] });
    expect(v.actors.find((a) => a.actorId === DONE)).toMatchObject({ kind: 'job', name: 'regress', events: 5, violations: [] });
    expect(events.code, show(events)).toBe(0);
    expect(events.stdout).toMatch(/^regress\s+4 .*job\/phase\s+running → completed \(exited\) · exit 0/m);
    // a job's own log, by its ID
    const [one, log] = await Promise.all([cli.run(['verify', DONE, ...common]), cli.run(['events', DONE, '--json', ...common])]);
    expect(one.code, show(one)).toBe(0);
    expect(one.stdout).toBe(`${DONE}: 5 events, all invariants hold\n`);
    expect(lines(log.stdout).map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(['job/created', 'job/started', 'job/phase', 'job/phase', 'job/notified']);
    // the tree with a job still running is running, not broken
    const b = await cli.run(['verify', OWNER_B, '--tree', '--json', ...common]);
    expect(b.code, show(b)).toBe(0);
    expect((JSON.parse(b.stdout) as { running: string[] }).running.join('; ')).toMatch(new RegExp(`job ${QUEUED} is pending`));
  });
});
