// Jobs on real host processes: the host running a job is SIGKILLed mid-run; the other host takes
// the job over from its log once its lease lapses and ends it (`interrupted`: the command may have
// had effects and cannot be checked), or, for a job declared idempotent with retries, runs it
// again exactly once; the owner is told either way, in a turn of its own. Real processes, a real
// nats-server, separate data dirs, bubblewrap (the sandboxed command dies with its host).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { openBus } from '../../src/bus/connection.js';
import { createKvLeaseStore, type Lease } from '../../src/bus/leases.js';
import { newId } from '../../src/protocol/ids.js';
import { jobIdOf, type JobPhase } from '../../src/protocol/job-events.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { foldJobLog } from '../../src/store/job-projection.js';
import { createLogReader } from '../../src/store/jetstream-log.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { sleepers, until } from '../helpers/processes.js';
import { submitTask } from '../helpers/submit.js';

const stack = useCliStack();

function startHost(name: string, dataDir: string) {
  const h = stack.fileCli(dataDir).start(['host', '--name', name, '--lease-ttl', '2000', ...stack.flags(dataDir)]);
  return { child: h.child, stderr: h.stderr, exited: h.exited.then((e) => e.code) };
}

async function leaseOf(actorId: string, dataDir: string): Promise<Lease | null> {
  const probe = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  try {
    const leases = createKvLeaseStore(await new Kvm(probe.js).open('leases'), { ttlMs: 2_000 });
    return await leases.get(actorId, Date.now());
  } finally {
    await probe.close();
  }
}

/** A log read from the bus (the job's: a job is not an agent, so `events` does not take its ID). */
async function logOf(rootId: string, actorId: string, dataDir: string): Promise<ActorEvent[]> {
  const probe = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  try {
    const reader = createLogReader({ js: probe.js, jsm: probe.jsm });
    const out: ActorEvent[] = [];
    for await (const { event } of reader.read(rootId, actorId)) out.push(event);
    return out;
  } finally {
    await probe.close();
  }
}


async function scenario(onTestFinished: (fn: () => void | Promise<void>) => void, job: Record<string, unknown>, sleepArg: string) {
  const ws = await stack.workspace();
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli);
  const common = stack.flags(dataCli);
  const script = join(ws, '..', `job-${newId('message')}.json`);
  await writeFile(script, JSON.stringify({ responses: [
    { tool_calls: [{ name: 'start_job', arguments: job }] },
    { content: 'started it' },
    { content: 'heard how it ended' },
  ] }));
  stack.remove(script);
  const a = startHost('host-a', dataA);
  const b = startHost('host-b', dataB);
  onTestFinished(async () => {
    for (const h of [a, b]) h.child.kill('SIGKILL');
    await Promise.all([a.exited, b.exited]);
  });
  await until('both hosts up', async () => a.stderr().includes('hosting agents') && b.stderr().includes('hosting agents'));
  const agentId = await submitTask({ natsUrl: stack.nats.url, dataDir: dataCli, ws, model: `scripted:${script}`, approvalMode: 'full-auto' });
  const events = async (id: string): Promise<ActorEvent[]> => (id === agentId ? parseEvents((await cli.run(['events', id, '--json', ...common])).stdout) : logOf(agentId, id, dataCli));
  const first = await until('the job started', async () => {
    const log = await events(agentId);
    return log.some((e) => e.type === 'tool/result') ? log : null;
  });
  const result = first.find((e) => e.type === 'tool/result')!;
  const jobId = jobIdOf(result.call!);
  const running = await until('the job running', async () => {
    const log = await events(jobId);
    return log.some((e) => e.type === 'job/phase' && e.data.phase === 'running') ? log : null;
  }).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${a.stderr()}\n${b.stderr()}`);
  });
  await until('its command running', async () => (await sleepers(sleepArg)).length > 0);
  const holder = (await leaseOf(jobId, dataCli))?.host;
  expect(['host-a', 'host-b']).toContain(holder);
  const victim = holder === 'host-a' ? a : b;
  const survivor = victim === a ? b : a;
  victim.child.kill('SIGKILL');
  await victim.exited;
  // bubblewrap dies with its parent, and the command with it
  await until('the command gone with its host', async () => (await sleepers(sleepArg)).length === 0);
  const jobLog = await until('the job ended and its owner told', async () => {
    const log = await events(jobId);
    return log.some((e) => e.type === 'job/notified') ? log : null;
  }, 40_000);
  const ownerLog = await until('the owner\'s turn of the notice', async () => {
    const log = await events(agentId);
    return log.filter((e) => e.type === 'turn/end').length === 2 ? log : null;
  }, 30_000);
  expect(ownerLog.filter((e) => e.type === 'turn/start').map((e) => (e.data as { source: string }).source)).toEqual(['user_message', 'job_notice']);
  // the job is over: the host that ended it gave its lease back
  await until('the job\'s lease given back', async () => (await leaseOf(jobId, dataCli)) === null, 15_000);
  const v = await cli.run(['verify', agentId, ...common]);
  expect(v.code, show(v)).toBe(0);
  const jv = verifyLog(jobLog);
  expect(jv, formatViolations(jv)).toEqual([]);
  return { ws, jobLog, ownerLog, epoch1: running[0]!.epoch, survivor };
}

test('kill -9 the host running a job: the other host ends it interrupted, and the owner is told', async ({ onTestFinished }) => {
  const { jobLog, epoch1 } = await scenario(onTestFinished, { name: 'slow', command: 'echo run >> runs.txt; sleep 20.0419' }, '20.0419');
  const state = foldJobLog(jobLog)!;
  expect(state.phase).toBe<JobPhase>('interrupted');
  expect(state.reason).toBe('outcome_unknown');
  // the lost execution was checked before it ended: it may have had effects
  expect(jobLog.filter((e) => e.type === 'job/phase').map((e) => (e.data as { phase: string }).phase)).toEqual(['running', 'reconciling', 'interrupted']);
  expect(jobLog.filter((e) => e.type === 'job/started')).toHaveLength(1);
  expect(jobLog.filter((e) => e.epoch > epoch1).length).toBeGreaterThan(0);
}, 90_000);

test('kill -9 the host running an idempotent job with retries: it runs again exactly once and completes', async ({ onTestFinished }) => {
  const { ws, jobLog } = await scenario(onTestFinished, { name: 'again', command: 'echo run >> runs.txt; sleep 4.0421; echo ok', idempotent: true, retries: 1 }, '4.0421');
  const state = foldJobLog(jobLog)!;
  expect(state).toMatchObject({ phase: 'completed', attempts: 2 });
  expect(jobLog.filter((e) => e.type === 'job/phase').map((e) => (e.data as { phase: string; reason: string }).reason)).toEqual(['started', 'runtime_restarted', 'started', 'exited']);
  expect(await readFile(join(ws, 'runs.txt'), 'utf8')).toBe('run\nrun\n');
}, 90_000);
