import { readFile, rm } from 'node:fs/promises';
import { sleepers } from '../helpers/processes.js';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultTooling, staticPolicy } from '../../src/actors/agent/tooling.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { JobNoticeSchema, jobIdOf } from '../../src/protocol/job-events.js';
import { foldJobLog } from '../../src/store/job-projection.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, message, ofType, startTurn, waitForLog } from '../actors/harness.js';
import { interruptMessage } from '../../src/client/messages.js';
import { createMemoryResourceLeases } from '../../src/bus/memory-resource-leases.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';

const world = actorTestWorld();
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };

async function sandboxed(over: Parameters<typeof defaultTooling>[0] = {}) {
  const bwrapPath = await findBubblewrap(env.PATH);
  expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
  return defaultTooling({ bwrapPath, env, ...over });
}

const jobIdsOf = (log: Awaited<ReturnType<typeof readLog>>) =>
  ofType(log, 'tool/result').filter((e) => e.data.ok && e.data.output.startsWith('Started job')).map((e) => jobIdOf(e.call!));

describe('jobs started by the model', () => {
  it('a job appends a line after 2 s; the turn ends first; its notice starts a new turn with source job_notice', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          call('start_job', { name: 'append', command: 'sleep 2 && echo done >> job-out.txt && echo finished' }),
          answer('started it'),
          answer('the job finished'),
        ],
      }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const { actor, ended } = await startTurn(sup, 'run it in the background', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    const t0 = Date.now();
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    expect(Date.now() - t0, 'the turn does not wait for the job').toBeLessThan(2_000);
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2, 20_000);
    const starts = ofType(log, 'turn/start');
    expect(starts[1]!.data.source).toBe('job_notice');
    const started = ofType(log, 'tool/result')[0]!;
    const jobId = jobIdOf(started.call!);
    expect(started.data.output).toContain(jobId);
    const jobLog = await readLog(sup, actor.rootId, jobId);
    const state = foldJobLog(jobLog)!;
    expect(state).toMatchObject({ phase: 'completed', reason: 'exited', attempts: 1, ownerId: actor.actorId });
    expect(state.end).toMatchObject({ exitCode: 0, tail: 'finished\n' });
    expect(Buffer.from((await rt.blobs.get(state.end!.output!.digest))!).toString('utf8')).toBe('finished\n');
    expect(await readFile(join(world.ws, 'job-out.txt'), 'utf8')).toBe('done\n');
    const notice = ofType(log, 'inbox/received').find((e) => e.data.kind === 'job_notice')!;
    expect(JobNoticeSchema.parse(JSON.parse(notice.data.content))).toMatchObject({ jobId, phase: 'completed', exitCode: 0 });
    await waitForLog(sup, { rootId: actor.rootId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/notified'));
    // over: no longer hosted here (a host gives its lease back), and its directory entry says how it ended
    await until(async () => !sup.hosts(jobId));
    expect((await rt.ports.directory.get(jobId))?.status).toBe('completed');
    for (const l of [log, await readLog(sup, actor.rootId, jobId)]) {
      const v = verifyLog(l);
      expect(v, formatViolations(v)).toEqual([]);
    }
  });

  it('cancel_job of a running sleep 30: the process group is gone within the grace and the job ends cancelled', async () => {
    let jobId = '';
    const rt = await world.rts.open({
      // read at each turn's first attempt: the second turn names the job the first one started
      modelFor: treeModels(() => ({
        main: [
          call('start_job', { name: 'sleeper', command: 'sleep 30.0417' }),
          answer('started'),
          call('cancel_job', { job_id: jobId }),
          call('wait_jobs', { timeout_seconds: 20 }),
          answer('cancelled it'),
        ],
      })),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { killGraceMs: 1_000 } } });
    const { actor, ended } = await startTurn(sup, 'start it', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    jobId = jobIdsOf(await readLog(sup, actor.rootId, actor.actorId))[0]!;
    await waitForLog(sup, { rootId: actor.rootId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/phase' && e.data.phase === 'running'));
    await until(async () => (await sleepers('30.0417')).length > 0);
    const next = actor.whenTurnEnds();
    await sup.send(message(actor.actorId, 'stop it now', { request: turnRequest(world.ws, { approvalMode: 'full-auto' }) }));
    await expect(next).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const results = ofType(log, 'tool/result').map((e) => e.data.output);
    expect(results[1]).toContain('Asked job sleeper');
    expect(results[2]).toMatch(/Job sleeper \(job_\w+\) ended cancelled/);
    const state = foldJobLog(await readLog(sup, actor.rootId, jobId))!;
    expect(state).toMatchObject({ phase: 'cancelled', reason: 'user_cancelled', cancel: { reason: 'user_cancelled', by: actor.actorId } });
    expect(state.end!.durationMs).toBeLessThan(10_000);
    expect((await sleepers('30.0417')).length).toBe(0);
    const v = verifyLog(await readLog(sup, actor.rootId, jobId));
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('a person cancels a running job through its inbox (the CLI\'s and the page\'s path): it ends cancelled, by them', async () => {
    const rt = await world.rts.open({ modelFor: treeModels({ main: [call('start_job', { name: 'sleeper', command: 'sleep 30.0418' }), answer('started'), answer('it was cancelled')] }) });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { killGraceMs: 1_000 } } });
    const { actor, ended } = await startTurn(sup, 'start it', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const jobId = jobIdsOf(await readLog(sup, actor.rootId, actor.actorId))[0]!;
    await until(async () => (await sleepers('30.0418')).length > 0);
    await sup.send(interruptMessage(jobId));
    const jobLog = await waitForLog(sup, { rootId: actor.rootId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/notified'));
    expect(foldJobLog(jobLog)).toMatchObject({ phase: 'cancelled', cancel: { reason: 'user_cancelled', by: 'client:cli' } });
    expect((await sleepers('30.0418')).length).toBe(0);
    // its notice woke the owner
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2);
    expect(ofType(log, 'turn/start')[1]!.data.source).toBe('job_notice');
  });

  it('an interrupted turn cancels the jobs it started (on_owner_end cancel, the default); a detached one goes on', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          { tool_calls: [
            { name: 'start_job', arguments: { name: 'stops', command: 'sleep 30.0422' } },
            { name: 'start_job', arguments: { name: 'goes-on', command: 'sleep 30.0423', on_owner_end: 'detach' } },
          ] },
          call('shell', { command: 'sleep 20' }),
          answer('never'),
        ],
      }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { killGraceMs: 1_000 } } });
    const { actor, ended } = await startTurn(sup, 'start two', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await waitForLog(sup, actor, (l) => ofType(l, 'tool/start').some((e) => e.data.name === 'shell'));
    await until(async () => (await sleepers('30.0422')).length > 0 && (await sleepers('30.0423')).length > 0);
    await sup.send(interruptMessage(actor.actorId));
    await expect(ended).resolves.toMatchObject({ outcome: 'cancelled' });
    const [stops, goesOn] = jobIdsOf(await readLog(sup, actor.rootId, actor.actorId));
    const stopped = await waitForLog(sup, { rootId: actor.rootId, actorId: stops! }, (l) => l.some((e) => e.type === 'job/notified'));
    expect(foldJobLog(stopped)).toMatchObject({ phase: 'cancelled', reason: 'owner_ended', cancel: { reason: 'owner_ended', by: actor.actorId } });
    expect((await sleepers('30.0422')).length).toBe(0);
    expect(foldJobLog(await readLog(sup, actor.rootId, goesOn!))!.phase).toBe('running');
    expect((await sleepers('30.0423')).length).toBe(1);
    await sup.send(interruptMessage(goesOn!));
    await waitForLog(sup, { rootId: actor.rootId, actorId: goesOn! }, (l) => l.some((e) => e.type === 'job/notified'));
    expect((await sleepers('30.0423')).length).toBe(0);
  });

  it('a goal\'s continuation waits for the job its turn started: the notice starts the next turn, which completes the goal', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          call('start_job', { name: 'check', command: 'sleep 1 && echo checked' }),
          answer('waiting for the check'),
          call('update_goal', { phase: 'complete', reason: 'the check passed', expected_revision: 0 }),
          answer('done'),
        ],
      }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const goal = { objective: 'run the check', budget: {}, maxIdleTurns: 5 };
    const { actor, ended } = await startTurn(sup, 'run the check', turnRequest(world.ws, { approvalMode: 'full-auto', goal }));
    const first = await ended;
    expect(first.outcome).toBe('completed');
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2);
    const ends = ofType(log, 'turn/end');
    // no continuation while the job ran: the notice's turn came next, and completed the goal
    expect(ends[0]!.data.goalContinues ?? false).toBe(false);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'job_notice']);
    expect(actor.projection.goal).toMatchObject({ phase: 'complete' });
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('max_running_jobs = 2 with five jobs started in one step: never more than two run; all five end', async () => {
    const starts = Array.from({ length: 5 }, (_, i) => ({ name: 'start_job', arguments: { name: `j${i}`, command: `echo start >> runs.log; sleep 0.6; echo end >> runs.log` } }));
    const rt = await world.rts.open({
      modelFor: treeModels({ main: [{ tool_calls: starts }, call('wait_jobs', {}), call('wait_jobs', {}), call('wait_jobs', {}), call('wait_jobs', {}), call('wait_jobs', {}), answer('all ran')] }),
    });
    await rm(join(world.ws, 'runs.log'), { force: true });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { maxRunningPerHost: 2 } } });
    const { actor, ended } = await startTurn(sup, 'five at once', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const ids = jobIdsOf(log);
    expect(ids).toHaveLength(5);
    const spans: Array<[number, number]> = [];
    for (const id of ids) {
      const j = await waitForLog(sup, { rootId: actor.rootId, actorId: id }, (l) => l.some((e) => e.type === 'job/notified'));
      const state = foldJobLog(j)!;
      expect(state.phase).toBe('completed');
      const started = Date.parse(ofType(j, 'job/started')[0]!.at);
      const end = Date.parse(ofType(j, 'job/phase').at(-1)!.at);
      spans.push([started, end]);
    }
    // at every start, at most one other job's span is open
    for (const [s] of spans) expect(spans.filter(([a, b]) => a <= s && s < b).length).toBeLessThanOrEqual(2);
    // and the file says the same: never three starts ahead of the ends
    let open = 0;
    let most = 0;
    for (const line of (await readFile(join(world.ws, 'runs.log'), 'utf8')).trim().split('\n')) {
      open += line === 'start' ? 1 : -1;
      most = Math.max(most, open);
    }
    expect(most).toBe(2);
  });

  it('a job cancelled while it waits in the queue ends cancelled at once, never running', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({ main: [{ tool_calls: [
        { name: 'start_job', arguments: { name: 'first', command: 'sleep 30.0431' } },
        { name: 'start_job', arguments: { name: 'second', command: 'echo never >> never.txt' } },
      ] }, answer('started two')] }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { maxRunningPerHost: 1, killGraceMs: 1_000 } } });
    const { actor, ended } = await startTurn(sup, 'two', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const [first, second] = jobIdsOf(await readLog(sup, actor.rootId, actor.actorId));
    // the second waits behind the first, its place in the directory
    await until(async () => (await rt.ports.directory.get(second!))?.labels.queuePosition === '1');
    await sup.send(interruptMessage(second!));
    const log = await waitForLog(sup, { rootId: actor.rootId, actorId: second! }, (l) => l.some((e) => e.type === 'job/notified'));
    expect(foldJobLog(log)).toMatchObject({ phase: 'cancelled', attempts: 0 });
    expect(ofType(log, 'job/started')).toEqual([]);
    expect((await rt.ports.directory.get(second!))?.labels.queuePosition).toBeUndefined();
    await sup.send(interruptMessage(first!));
    await waitForLog(sup, { rootId: actor.rootId, actorId: first! }, (l) => l.some((e) => e.type === 'job/notified'));
    await expect(readFile(join(world.ws, 'never.txt'), 'utf8')).rejects.toThrow();
  });

  it('jobs naming the same resource run one at a time, though the host has room for both', async () => {
    await rm(join(world.ws, 'db.log'), { force: true });
    const job = (name: string) => ({ name: 'start_job', arguments: { name, command: `echo start >> db.log; sleep 0.5; echo end >> db.log`, resources: ['db'] } });
    const rt = await world.rts.open({ modelFor: treeModels({ main: [{ tool_calls: [job('m1'), job('m2')] }, call('wait_jobs', {}), call('wait_jobs', {}), answer('both ran')] }) });
    // the store that orders a tree's conflicting calls (a host's is KV resource_leases)
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), resourceLeases: createMemoryResourceLeases() } });
    const { actor, ended } = await startTurn(sup, 'migrate twice', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    for (const id of jobIdsOf(await readLog(sup, actor.rootId, actor.actorId))) {
      expect(foldJobLog(await waitForLog(sup, { rootId: actor.rootId, actorId: id }, (l) => l.some((e) => e.type === 'job/notified')))!.phase).toBe('completed');
    }
    expect(await readFile(join(world.ws, 'db.log'), 'utf8')).toBe('start\nend\nstart\nend\n');
  });

  it('bad input: an unknown job ID and a command the policy denies are clear errors, and nothing starts', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          call('job_status', { job_id: 'job_01ABCDEFGHJKMNPQRSTVWXYZ00' }),
          call('cancel_job', { job_id: 'nope' }),
          call('start_job', { name: 'push', command: 'git push origin main' }),
          answer('could not'),
        ],
      }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed({ policy: staticPolicy([{ command: 'git push', decision: 'deny', reason: 'pushing is for people' }]) }) } });
    const { actor, ended } = await startTurn(sup, 'try', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const results = ofType(log, 'tool/result').map((e) => [e.data.ok, e.data.error?.code, e.data.output]);
    expect(results[0]).toEqual([false, 'job.not_found', expect.stringContaining('no job job_01ABCDEFGHJKMNPQRSTVWXYZ00')]);
    expect(results[1]).toEqual([false, 'invalid_call', expect.stringContaining('expected a job ID')]);
    expect(ofType(log, 'policy/decided').at(-1)!.data).toMatchObject({ decision: 'deny', reason: expect.stringContaining('pushing is for people') });
    expect(jobIdsOf(log)).toEqual([]);
    expect((await rt.ports.directory.list()).filter((e) => e.kind === 'job' && e.parentId === actor.actorId)).toEqual([]);
  });
});

async function until(cond: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

