// The gateway's jobs, over real HTTP and a real WebSocket against a real gateway on a real
// nats-server, on a tree written as the job host writes one (gateway-jobs-tree.ts): `GET /v1/jobs`
// lists a tree's jobs with their phase, name, owner, attempts, exit code, queue place and tail;
// `GET /v1/jobs/:id` answers a job's folded state; jobs are among their tree's actors, under their
// owner, as kind `job`; `job.cancel` puts an interrupt in the job's inbox on the person channel,
// and refuses an unknown job (not found) or one that ended (saying so) before anything is sent;
// `GET /v1/jobs/:id/output` relays a running job's live output (its live subject, core NATS) as
// SSE when the gateway is given the bus's live source, and says it relays none otherwise; with a
// token, every one of them wants it.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GATEWAY_SENDER } from '../../src/client/messages.js';
import { RPC_ERRORS } from '../../src/protocol/gateway.js';
import { jobIdOf } from '../../src/protocol/job-events.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { JobDetail, JobRpcParams, JobRpcResult, JobSummary } from '../../src/protocol/gateway-jobs.js';
import type { JobDetailRead, JobMethods } from '../../web/src/job-api.js';
import { createNatsJobOutputSource } from '../../src/server/job-output.js';
import { liveSubject } from '../../src/bus/subjects.js';
import { openGatewayFixture, readSse, RpcClient, type GatewayFixture } from './gateway-fixture.js';
import { DONE, lastPersonMessage, OWNER, QUEUED, RUNNING, writeJobTree } from './gateway-jobs-tree.js';

// the page's copy of the job protocol's shapes (web/ imports protocol types only) fits the gateway's:
// a drift fails tsc here
const pageFits = {
  cancelParams: {} as JobRpcParams<'job.cancel'> satisfies JobMethods['job.cancel']['params'],
  cancelParamsBack: {} as JobMethods['job.cancel']['params'] satisfies JobRpcParams<'job.cancel'>,
  cancelResult: {} as JobRpcResult<'job.cancel'> satisfies JobMethods['job.cancel']['result'],
  detail: {} as JobDetail satisfies JobDetailRead,
};
void pageFits;

const TOKEN = 'jobs-token-0123456789abcdef';
let fx: GatewayFixture;
let gw: Gateway;
let rpc: RpcClient;

beforeAll(async () => {
  fx = await openGatewayFixture();
  await writeJobTree(fx.rt);
  gw = await fx.gateway();
  rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
}, 60_000);

afterAll(async () => {
  await rpc?.close();
  await fx?.stop();
}, 60_000);

async function getJson(path: string, headers: Record<string, string> = {}, url = gw.url): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}${path}`, { headers });
  return { status: res.status, body: await res.json() };
}

describe('the job reads', () => {
  test('GET /v1/jobs?root= lists the tree\'s jobs, each with its phase, name, owner, attempts, exit code, queue place and tail', async () => {
    const { status, body } = await getJson(`/v1/jobs?root=${OWNER}`);
    expect(status).toBe(200);
    const jobs = body.jobs as JobSummary[];
    expect(jobs.map((j) => j.jobId)).toEqual([DONE, RUNNING, QUEUED]);
    const [done, running, queued] = jobs;
    expect(done).toMatchObject({
      name: 'build', ownerId: OWNER, rootId: OWNER, executor: 'shell', command: 'make build', phase: 'completed', reason: 'exited',
      attempts: 1, maxAttempts: 1, exitCode: 0, durationMs: 1500, queuePosition: null, tail: 'built 3 targets\n', notified: true, cancelRequested: false,
    });
    expect(Date.parse(done!.endedAt!)).toBeGreaterThanOrEqual(Date.parse(done!.startedAt!));
    expect(running).toMatchObject({ name: 'tests', command: 'npm test', phase: 'running', attempts: 1, maxAttempts: 2, exitCode: null, tail: null, endedAt: null, queuePosition: null });
    expect(running!.startedAt).not.toBeNull();
    expect(queued).toMatchObject({ name: 'lint', phase: 'pending', attempts: 0, queuePosition: 1, startedAt: null });
    // every tree's, without root
    expect(((await getJson('/v1/jobs')).body.jobs as JobSummary[]).map((j) => j.jobId).sort()).toEqual([DONE, QUEUED, RUNNING].sort());
  });

  test('GET /v1/jobs/:id answers the folded state; a malformed ID is a 400, an unknown job a 404', async () => {
    const { status, body } = await getJson(`/v1/jobs/${RUNNING}`);
    expect(status).toBe(200);
    const d = body as JobDetail;
    expect(d.job).toMatchObject({ jobId: RUNNING, phase: 'running', host: 'host-a', cwd: '/ws' });
    expect(d.state).toMatchObject({ jobId: RUNNING, ownerId: OWNER, phase: 'running', attempts: 1, host: 'host-a', retries: 1, idempotent: true, executor: { kind: 'shell', command: 'npm test', cwd: '/ws' } });
    expect((await getJson(`/v1/jobs/${DONE}`)).body.state.end).toMatchObject({ exitCode: 0, tail: 'built 3 targets\n' });
    expect((await getJson('/v1/jobs/job_nope')).status).toBe(400);
    const unknown = await getJson(`/v1/jobs/${jobIdOf('call_unknown')}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('gateway.job_not_found');
    // an agent's ID is no job's
    expect((await getJson(`/v1/jobs/${OWNER}`)).status).toBe(400);
  });

  test('jobs are among their tree\'s actors: kind job, named by their job name, under their owner, their status their phase\'s', async () => {
    const { body } = await getJson(`/v1/actors?root=${OWNER}`);
    const byId = new Map((body.actors as any[]).map((a) => [a.id, a]));
    expect(byId.get(OWNER)).toMatchObject({ kind: 'agent', depth: 0, status: 'running' });
    expect(byId.get(RUNNING)).toMatchObject({ kind: 'job', name: 'tests', parentId: OWNER, depth: 1, status: 'running' });
    expect(byId.get(DONE)).toMatchObject({ kind: 'job', name: 'build', parentId: OWNER, status: 'completed' });
    // as every client's tree shows a job (`jobTreeStatus`): running until it ends
    expect(byId.get(QUEUED)).toMatchObject({ kind: 'job', name: 'lint', parentId: OWNER, depth: 1, status: 'running' });
  });

  test('a run counts no job among its children, as `actorloop runs` does', async () => {
    const { body } = await getJson('/v1/runs');
    expect(body.runs.find((r: any) => r.id === OWNER)).toMatchObject({ children: 0, status: 'running' });
  });

  test('jobs.list and job.inspect answer what the routes do', async () => {
    const listed = await rpc.call<{ jobs: JobSummary[] }>('jobs.list', { rootId: OWNER });
    expect(listed.jobs.map((j) => j.jobId)).toEqual([DONE, RUNNING, QUEUED]);
    const inspected = await rpc.call<JobDetail>('job.inspect', { jobId: QUEUED });
    expect(inspected.job).toMatchObject({ name: 'lint', queuePosition: 1 });
    // the job schemas are published beside the rest
    const schema = await getJson('/v1/schema');
    expect(Object.keys(schema.body.schemas)).toEqual(expect.arrayContaining(['rpc.job.cancel.params', 'rpc.jobs.list.result', 'JobSummary']));
  });
});

describe('job.cancel', () => {
  test('puts an interrupt from the gateway in the running job\'s inbox, on the person channel', async () => {
    const r = await rpc.call<{ messageId: string; jobId: string }>('job.cancel', { jobId: RUNNING });
    expect(r.jobId).toBe(RUNNING);
    expect(r.messageId).toMatch(/^msg_/);
    const msg = await lastPersonMessage(fx.rt, RUNNING);
    expect(msg).toMatchObject({ id: r.messageId, to: RUNNING, from: GATEWAY_SENDER, kind: 'interrupt' });
  });

  test('a queued job may be cancelled too', async () => {
    // no host holds it: the gateway hands it to the live hosts first, as it does an agent nobody holds
    const r = await rpc.call<{ messageId: string }>('job.cancel', { jobId: QUEUED });
    expect((await lastPersonMessage(fx.rt, QUEUED))?.id).toBe(r.messageId);
  });

  test('refuses a job that ended, saying it ended and how, and sends nothing', async () => {
    const a = await rpc.answer('job.cancel', { jobId: DONE });
    expect(a.error?.code).toBe(RPC_ERRORS.application);
    expect(a.error?.data?.code).toBe('gateway.job_ended');
    expect(a.error?.message).toContain('already ended completed: there is nothing to cancel');
    expect(await lastPersonMessage(fx.rt, DONE)).toBeNull();
  });

  test('refuses an unknown job as not found, and an ID that is not a job\'s as invalid params', async () => {
    const unknown = jobIdOf('call_nobody');
    const a = await rpc.answer('job.cancel', { jobId: unknown });
    expect(a.error?.code).toBe(RPC_ERRORS.notFound);
    expect(a.error?.data?.code).toBe('gateway.job_not_found');
    expect(a.error?.message).toContain(`no job ${unknown}`);
    expect(await lastPersonMessage(fx.rt, unknown)).toBeNull();
    const agent = await rpc.answer('job.cancel', { jobId: OWNER });
    expect(agent.error?.code).toBe(RPC_ERRORS.invalidParams);
    const extra = await rpc.answer('job.cancel', { jobId: RUNNING, force: true });
    expect(extra.error?.code).toBe(RPC_ERRORS.invalidParams);
  });
});

describe('GET /v1/jobs/:id/output', () => {
  test('relays the running job\'s live output as SSE job/output events, after a ready; a message of another shape is skipped', async () => {
    const g = await fx.gateway({ jobOutput: createNatsJobOutputSource(fx.rt.bus.nc) });
    const subject = liveSubject(OWNER, RUNNING);
    let published = false;
    const r = await readSse(`${g.url}/v1/jobs/${RUNNING}/output`, {}, (events) => {
      if (!published && events.some((e) => e.event === 'ready')) {
        published = true;
        fx.rt.bus.nc.publish(subject, JSON.stringify({ type: 'job/output', text: 'ok 1 - parses\n' }));
        fx.rt.bus.nc.publish(subject, 'not json');
        fx.rt.bus.nc.publish(subject, JSON.stringify({ type: 'text_delta', text: 'a model delta' }));
        fx.rt.bus.nc.publish(subject, JSON.stringify({ type: 'job/output', text: 'ok 2 - folds\n' }));
      }
      return events.filter((e) => e.event === 'job/output').length >= 2;
    });
    expect(r.status).toBe(200);
    expect(r.events.filter((e) => e.event === 'job/output').map((e) => JSON.parse(e.data).text)).toEqual(['ok 1 - parses\n', 'ok 2 - folds\n']);
  });

  test('a gateway given no live source says it relays none; an unknown job is a 404 first', async () => {
    const none = await getJson(`/v1/jobs/${RUNNING}/output`);
    expect(none.status).toBe(404);
    expect(none.body.error.code).toBe('gateway.no_live_output');
    const unknown = await getJson(`/v1/jobs/${jobIdOf('call_unknown')}/output`);
    expect(unknown.body.error.code).toBe('gateway.job_not_found');
  });
});

describe('with a token', () => {
  test('the job routes and job.cancel want it, as every other /v1 route and method does', async () => {
    const g = await fx.gateway({ token: TOKEN });
    expect((await getJson(`/v1/jobs?root=${OWNER}`, {}, g.url)).status).toBe(401);
    expect((await getJson(`/v1/jobs/${RUNNING}`, {}, g.url)).status).toBe(401);
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect((await getJson(`/v1/jobs/${RUNNING}`, auth, g.url)).status).toBe(200);
    await expect(RpcClient.open(`${g.url.replace('http', 'ws')}/v1/rpc`)).rejects.toThrow(/401/);
    const c = await RpcClient.open(`${g.url.replace('http', 'ws')}/v1/rpc`, auth);
    try {
      const r = await c.call<{ messageId: string }>('job.cancel', { jobId: RUNNING });
      expect((await lastPersonMessage(fx.rt, RUNNING))?.id).toBe(r.messageId);
    } finally {
      await c.close();
    }
  });
});
