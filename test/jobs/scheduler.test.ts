import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBus, type Bus } from '../../src/bus/connection.js';
import type { JobSlotStore } from '../../src/jobs/job-slot-port.js';
import { createKvJobSlots } from '../../src/jobs/kv-job-slots.js';
import { createMemoryJobSlots } from '../../src/jobs/memory-job-slots.js';
import { createJobScheduler, SCHEDULER_CODES, type JobScheduler, type SchedulerOptions } from '../../src/jobs/scheduler.js';
import { startShellJob } from '../../src/jobs/shell-executor.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { useTestBus } from '../helpers/test-bus.js';
import { waitUntil } from '../helpers/processes.js';

const bwrap = await findBubblewrap(process.env.PATH);
const tick = () => new Promise((r) => setTimeout(r, 10));

function scheduler(over: Partial<SchedulerOptions> = {}): JobScheduler {
  return createJobScheduler({ hostId: 'host_a', slots: createMemoryJobSlots(), treeRetryMs: 20, ...over });
}

/** Runs `jobs` through the schedulers (job i on scheduler i mod n), each holding its slot `holdMs`; the most that ran at once, per tree and in all. */
async function runAll(schedulers: JobScheduler[], jobs: { jobId: string; treeId: string }[], holdMs: number) {
  let now = 0;
  let most = 0;
  const perTree = new Map<string, number>();
  const mostPerTree = new Map<string, number>();
  const order: string[] = [];
  await Promise.all(
    jobs.map(async (j, i) => {
      const slot = await schedulers[i % schedulers.length]!.acquire(j.jobId, { treeId: j.treeId });
      order.push(j.jobId);
      most = Math.max(most, ++now);
      perTree.set(j.treeId, (perTree.get(j.treeId) ?? 0) + 1);
      mostPerTree.set(j.treeId, Math.max(mostPerTree.get(j.treeId) ?? 0, perTree.get(j.treeId)!));
      await new Promise((r) => setTimeout(r, holdMs));
      now--;
      perTree.set(j.treeId, perTree.get(j.treeId)! - 1);
      await slot.release();
    }),
  );
  return { most, mostPerTree, order };
}

describe('job scheduler', () => {
  it('with max 2 and five acquires never runs more than two, queues three at positions 1..3, and runs all five in order', async () => {
    const s = scheduler({ maxRunningPerHost: 2 });
    const jobs = ['job_1', 'job_2', 'job_3', 'job_4', 'job_5'].map((jobId) => ({ jobId, treeId: 'agent_t' }));
    const done = runAll([s], jobs, 100);
    await tick();
    expect(s.running().map((r) => r.jobId)).toEqual(['job_1', 'job_2']);
    expect(jobs.map((j) => s.position(j.jobId))).toEqual([null, null, 1, 2, 3]);
    expect(s.queued().map((q) => [q.jobId, q.position])).toEqual([
      ['job_3', 1],
      ['job_4', 2],
      ['job_5', 3],
    ]);
    const { most, order } = await done;
    expect(most).toBe(2);
    expect(order).toEqual(jobs.map((j) => j.jobId));
    expect(s.running()).toEqual([]);
    expect(s.queued()).toEqual([]);
  });

  it('a queued acquire aborted leaves the queue, the others move up, and it never runs', async () => {
    const s = scheduler({ maxRunningPerHost: 1 });
    const first = await s.acquire('job_1', { treeId: 'agent_t' });
    const ac = new AbortController();
    const second = s.acquire('job_2', { treeId: 'agent_t', signal: ac.signal });
    const third = s.acquire('job_3', { treeId: 'agent_t' });
    await tick();
    expect([s.position('job_2'), s.position('job_3')]).toEqual([1, 2]);
    ac.abort(new Error('the owner ended'));
    await expect(second).rejects.toMatchObject({ code: SCHEDULER_CODES.aborted });
    expect([s.position('job_2'), s.position('job_3')]).toEqual([null, 1]);
    await first.release();
    const slot = await third;
    expect(slot.jobId).toBe('job_3');
    expect(s.running().map((r) => r.jobId)).toEqual(['job_3']);
    // an already aborted signal is refused at once
    await expect(s.acquire('job_4', { treeId: 'agent_t', signal: AbortSignal.abort() })).rejects.toMatchObject({ code: SCHEDULER_CODES.aborted });
    await slot.release();
    await slot.release();
    expect(s.running()).toEqual([]);
  });

  it('a full tree lets the jobs of other trees behind it pass', async () => {
    const s = scheduler({ maxRunningPerHost: 3, maxRunningPerTree: 1 });
    const a1 = await s.acquire('job_a1', { treeId: 'agent_a' });
    const a2 = s.acquire('job_a2', { treeId: 'agent_a' });
    const b1 = await s.acquire('job_b1', { treeId: 'agent_b' });
    expect(b1.jobId).toBe('job_b1');
    expect(s.position('job_a2')).toBe(1);
    await a1.release();
    expect((await a2).jobId).toBe('job_a2');
  });

  it('refuses a job twice, past the queue limit, and after close; close rejects the waiting', async () => {
    const s = scheduler({ maxRunningPerHost: 1, maxQueued: 1 });
    await s.acquire('job_1', { treeId: 'agent_t' });
    await expect(s.acquire('job_1', { treeId: 'agent_t' })).rejects.toMatchObject({ code: SCHEDULER_CODES.duplicate });
    const waiting = s.acquire('job_2', { treeId: 'agent_t' });
    await expect(s.acquire('job_2', { treeId: 'agent_t' })).rejects.toMatchObject({ code: SCHEDULER_CODES.duplicate });
    await expect(s.acquire('job_3', { treeId: 'agent_t' })).rejects.toMatchObject({ code: SCHEDULER_CODES.queueFull, retryable: true });
    s.close();
    await expect(waiting).rejects.toMatchObject({ code: SCHEDULER_CODES.closed });
    await expect(s.acquire('job_4', { treeId: 'agent_t' })).rejects.toMatchObject({ code: SCHEDULER_CODES.closed });
  });

  it('limits a tree across two hosts sharing one slot store, and the host limit on each', async () => {
    const slots = createMemoryJobSlots();
    const hosts = [scheduler({ hostId: 'host_a', slots, maxRunningPerTree: 2 }), scheduler({ hostId: 'host_b', slots, maxRunningPerTree: 2 })];
    const jobs = Array.from({ length: 8 }, (_, i) => ({ jobId: `job_${i}`, treeId: i < 6 ? 'agent_t' : 'agent_u' }));
    const { mostPerTree } = await runAll(hosts, jobs, 50);
    expect(mostPerTree.get('agent_t')).toBe(2);
    expect(mostPerTree.get('agent_u')).toBe(2);
    expect(await slots.holders('agent_t')).toEqual({});
  });

  it('five sandboxed jobs under max 2: never more than two processes at once, all five end', async () => {
    const ws = await realpath(await mkdtemp(path.join(tmpdir(), 'actorloop-sched-')));
    try {
      const s = scheduler({ maxRunningPerHost: 2 });
      const ctx = { workspace: ws, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sandbox: { bwrapPath: bwrap, network: false, envAllow: [] } };
      // each job leaves a mark in the workspace while it runs, and counts the marks there (a glob
      // only reads the directory; ls would stat a mark another job removes meanwhile)
      const command = (i: number) => `touch running.${i}; sleep 0.3; marks=(running.*); echo "\${#marks[@]}"; rm running.${i}`;
      const seen: number[] = [];
      await Promise.all(
        [1, 2, 3, 4, 5].map(async (i) => {
          const slot = await s.acquire(`job_${i}`, { treeId: 'agent_t' });
          try {
            const job = await startShellJob({ command: command(i) }, ctx, { sink: { write: () => undefined } });
            expect((await job.result).exitCode).toBe(0);
            seen.push(Number(Buffer.from(job.tail()).toString('utf8').trim()));
          } finally {
            await slot.release();
          }
        }),
      );
      expect(seen).toHaveLength(5);
      expect(Math.max(...seen)).toBeLessThanOrEqual(2);
    } finally {
      await rm(ws, { recursive: true, force: true });
    }
  });
});

describe('job scheduler over KV job places, two hosts', () => {
  const nats = useTestBus();
  let second: Bus | undefined;
  let stores: JobSlotStore[] = [];
  beforeAll(async () => {
    second = await openBus({ natsUrl: nats.nats.url, dataDir: nats.nats.storeDir, logger: pino({ level: 'silent' }) });
    stores = [createKvJobSlots({ js: nats.bus.js }), createKvJobSlots({ js: second.js })];
  });
  afterAll(async () => {
    await second?.close();
  });

  it('never runs more than the tree allows across the hosts, and all jobs end', async () => {
    const hosts = stores.map((slots, i) => scheduler({ hostId: `host_${i}`, slots, maxRunningPerTree: 2 }));
    const jobs = Array.from({ length: 6 }, (_, i) => ({ jobId: `job_${i}`, treeId: 'agent_kv' }));
    const { mostPerTree, order } = await runAll(hosts, jobs, 60);
    expect(mostPerTree.get('agent_kv')).toBe(2);
    expect(order.sort()).toEqual(jobs.map((j) => j.jobId).sort());
    expect(await waitUntil(async () => Object.keys(await stores[0]!.holders('agent_kv')).length === 0, 2_000)).toBe(true);
  });
});
