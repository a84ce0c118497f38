// The operator's reads over real HTTP and a real WebSocket: a real nats-server, a real
// `actorloop host` running scripted agents (dist/: `npm run build` first), the gateway in-process
// with the liveness ports. The runs list (order, task, status, sums, filters, pages that hold their
// place while runs arrive), what needs a person (a child's approval, a root's question), the
// actor's summary of a turn that stopped or failed, and bad queries.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { tempDir } from '../helpers/nats.js';
import { openGatewayFixture, RpcClient, until, type GatewayFixture } from './gateway-fixture.js';

const HOST = 'run-reads-host';
const usage = { input_tokens: 40, output_tokens: 4 };
// every task of this file holds it, so a text filter finds this file's runs alone
const TAG = `rr${Math.random().toString(36).slice(2, 8)}`;

let fx: GatewayFixture;
let gw: Gateway;
let rpc: RpcClient;
let ws: string;
let scripts: string;

beforeAll(async () => {
  fx = await openGatewayFixture();
  await fx.host(HOST);
  gw = await fx.gateway({ liveness: { leases: fx.rt.leases, hosts: fx.rt.hosts } });
  rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
  ws = await tempDir('run-reads-ws');
  scripts = await tempDir('run-reads-scripts');
  fx.dirs.push(ws, scripts);
  await writeFile(join(ws, 'notes.txt'), 'a note\n');
}, 60_000);

afterAll(async () => {
  await rpc?.close();
  await fx?.stop();
}, 60_000);

async function script(name: string, body: unknown): Promise<string> {
  const file = join(scripts, `${name}.json`);
  await writeFile(file, JSON.stringify(body));
  return `scripted:${file}`;
}

const get = async (path: string, base = gw.url): Promise<{ status: number; body: any }> => {
  const res = await fetch(`${base}${path}`);
  return { status: res.status, body: await res.json() };
};

/** The run of `id` as `GET /v1/runs` lists it (its task holds TAG). */
async function runOf(id: string): Promise<any> {
  const { body } = await get(`/v1/runs?q=${TAG}&limit=200`);
  return body.runs.find((r: { id: string }) => r.id === id) ?? null;
}

/** Waits until the run of `id` is past busy and reads `status`. */
function settled(id: string, status = 'completed'): Promise<any> {
  return until(`run ${id} to be ${status}`, async () => {
    const r = await runOf(id);
    return r && r.status === status && r.endedAt !== null ? r : null;
  }, 40_000);
}

async function submit(task: string, model: string, extra: Record<string, unknown> = {}): Promise<string> {
  const { agentId } = await rpc.call('turn.submit', { task, model, cwd: ws, ...extra });
  return agentId as string;
}

describe('the runs list', () => {
  const ids: { alpha: string; beta: string; gamma: string } = { alpha: '', beta: '', gamma: '' };

  test('roots newest first, each with its first task line, the run status, the tree\'s tokens and children, and its times', async () => {
    ids.alpha = await submit(`Alpha ${TAG} task\nwith a second line`, await script('alpha', { responses: [{ content: 'alpha done', usage }] }));
    await settled(ids.alpha);
    const tree = await script('beta', {
      agents: {
        main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'say hello', name: 'helper', mode: 'foreground' } }], usage }, { content: 'the helper said hello', usage }] },
        helper: { responses: [{ content: 'hello', usage }] },
      },
    });
    ids.beta = await submit(`Beta ${TAG} task`, tree);
    await settled(ids.beta);
    ids.gamma = await submit(`Gamma ${TAG} task`, await script('gamma', { responses: [{ content: 'gamma done', usage }] }));
    const gamma = await settled(ids.gamma);

    const { status, body } = await get(`/v1/runs?q=${TAG}`);
    expect(status).toBe(200);
    expect(body.runs.map((r: { id: string }) => r.id)).toEqual([ids.gamma, ids.beta, ids.alpha]);
    expect(body.total).toBe(3);
    expect(body.next).toBeNull();
    const [g, b, a] = body.runs;
    expect(a).toMatchObject({ id: ids.alpha, name: 'main', task: `Alpha ${TAG} task`, status: 'completed', waitingOn: [], tokens: 44, children: 0, workspace: ws });
    expect(b).toMatchObject({ id: ids.beta, task: `Beta ${TAG} task`, status: 'completed', tokens: 132, children: 1 });
    expect(g).toEqual(gamma);
    for (const r of body.runs) {
      expect(Date.parse(r.startedAt)).not.toBeNaN();
      expect(r.durationMs).toBe(Date.parse(r.endedAt) - Date.parse(r.startedAt));
      expect(r.durationMs).toBeGreaterThanOrEqual(0);
      // the scripted model has no price: unknown, never 0
      expect(r.costUsd).toBeNull();
      expect(r.streamSeq).toBeGreaterThan(0);
    }
    // the directory's newest-first order is the runs' start order
    expect(b.startedAt >= a.startedAt && g.startedAt >= b.startedAt).toBe(true);
    // every root of the directory is a run; no subagent is
    const all = (await get('/v1/runs?limit=200')).body;
    const actors = (await get('/v1/actors')).body.actors as Array<{ id: string; parentId: string | null }>;
    expect(all.runs.map((r: { id: string }) => r.id).sort()).toEqual(actors.filter((x) => x.parentId === null).map((x) => x.id).sort());
  }, 120_000);

  test('filters by status and by text (ID, name or task, any case); total counts what the filter keeps', async () => {
    const completed = (await get(`/v1/runs?q=${TAG}&status=completed`)).body;
    expect(completed.runs.map((r: { id: string }) => r.id)).toEqual([ids.gamma, ids.beta, ids.alpha]);
    const none = (await get(`/v1/runs?q=${TAG}&status=failed,waiting`)).body;
    expect(none).toEqual({ runs: [], next: null, total: 0 });
    const beta = (await get(`/v1/runs?q=${encodeURIComponent(`BETA ${TAG.toUpperCase()}`)}`)).body;
    expect(beta.runs.map((r: { id: string }) => r.id)).toEqual([ids.beta]);
    expect(beta.total).toBe(1);
    const byId = (await get(`/v1/runs?q=${ids.alpha.slice(-12).toLowerCase()}`)).body;
    expect(byId.runs.map((r: { id: string }) => r.id)).toEqual([ids.alpha]);
    const rpcBeta = await rpc.call('runs.list', { q: `beta ${TAG}`, status: ['completed'] });
    expect(rpcBeta).toEqual(beta);
  }, 60_000);

  test('pages of one walk every run exactly once, also when a new run starts between pages', async () => {
    const whole = (await get('/v1/runs?limit=200')).body;
    expect(whole.total).toBeGreaterThanOrEqual(3);
    const walked: string[] = [];
    let cursor: string | null = null;
    let page = 0;
    let arrived = '';
    do {
      const { status, body } = await get(`/v1/runs?limit=1${cursor ? `&before=${cursor}` : ''}`);
      expect(status).toBe(200);
      expect(body.runs).toHaveLength(1);
      walked.push(body.runs[0].id);
      cursor = body.next;
      if (page++ === 0) {
        // a run arriving now is newer than every run on the pages to come: none repeats, none is skipped
        arrived = await submit(`Delta ${TAG} task`, await script('delta', { responses: [{ content: 'delta done', usage }] }));
        await until('the new run to be listed', async () => (await get('/v1/runs?limit=200')).body.runs.some((r: { id: string }) => r.id === arrived));
      }
    } while (cursor !== null);
    expect(walked).toEqual(whole.runs.map((r: { id: string }) => r.id));
    expect(walked).not.toContain(arrived);
    const first = (await get('/v1/runs?limit=1')).body;
    expect(first.runs[0].id).toBe(arrived);
    expect(first.total).toBe(whole.total + 1);
    // over JSON-RPC the same pages
    const rpcFirst = await rpc.call('runs.list', { limit: 2 });
    const httpFirst = (await get('/v1/runs?limit=2')).body;
    expect(rpcFirst.runs.map((r: { id: string }) => r.id)).toEqual(httpFirst.runs.map((r: { id: string }) => r.id));
    expect(rpcFirst.next).toBe(httpFirst.next);
    const rpcSecond = await rpc.call('runs.list', { limit: 2, before: rpcFirst.next });
    expect(rpcSecond.runs.map((r: { id: string }) => r.id)).toEqual((await get(`/v1/runs?limit=2&before=${httpFirst.next}`)).body.runs.map((r: { id: string }) => r.id));
    await settled(arrived);
  }, 90_000);

  test('a secret in a task is redacted in the list, and a text filter does not find it', async () => {
    const secret = 'sk-proj-0123456789abcdefghijklmnopqrstuv';
    const id = await submit(`Secret ${TAG} key ${secret}`, await script('secret', { responses: [{ content: 'noted', usage }] }));
    const run = await settled(id);
    expect(run.task).toContain('[REDACTED');
    expect(run.task).not.toContain('0123456789abcdefghij');
    expect((await get('/v1/runs?q=0123456789abcdefghij')).body.total).toBe(0);
    expect((await rpc.call('runs.list', { q: '0123456789abcdefghij' })).total).toBe(0);
  }, 60_000);
});

describe('what needs a person', () => {
  test('a child waiting on an approval: the run reads waiting and names it; /v1/pending lists it with its plan digest and preview', async () => {
    const model = await script('tree-approval', {
      agents: {
        main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'write out.txt', name: 'writer', mode: 'foreground' } }], usage }, { content: 'the writer wrote it', usage }] },
        writer: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'out.txt', content: 'hello\n' } }], usage }, { content: 'wrote out.txt', usage }] },
      },
    });
    const rootId = await submit(`Approval ${TAG} tree`, model, { approve: 'ask' });
    const run = await until('the run to wait on the child\'s approval', async () => {
      const r = await runOf(rootId);
      return r?.status === 'waiting' && r.waitingOn.length > 0 ? r : null;
    }, 40_000);
    const childId = (await get(`/v1/actors/${rootId}`)).body.children[0] as string;
    expect(childId).toMatch(/^agt_/);
    const approvalId = (await get(`/v1/actors/${childId}`)).body.pendingApprovals[0].approvalId as string;
    expect(run.waitingOn).toEqual([{ actorId: childId, name: 'writer', kind: 'approval', id: approvalId }]);
    expect(run.endedAt).toBeNull();
    expect(run.durationMs).toBeNull();
    expect(run.children).toBe(1);
    // the root itself reads running: it waits on its child, the child on a person
    expect((await get(`/v1/actors/${rootId}`)).body.actor.status).toBe('running');
    expect((await get(`/v1/runs?q=${TAG}&status=waiting`)).body.runs.map((r: { id: string }) => r.id)).toEqual([rootId]);

    const all = (await get('/v1/pending')).body;
    const item = all.items.find((i: { approval?: { approvalId: string } }) => i.approval?.approvalId === approvalId);
    expect(item).toMatchObject({ actorId: childId, actorName: 'writer', rootId, kind: 'approval', approval: { tool: 'write_file', callId: expect.any(String) } });
    expect(item.approval.planDigest).toMatch(/\S/);
    expect(item.approval.preview.kind).toBe('diff');
    expect(item.approval.preview.text).toContain('+hello');
    expect(item.approval.arguments).toContain('out.txt');
    expect(Date.parse(item.approval.expiresAt)).toBeGreaterThan(Date.now());
    const mine = (await get(`/v1/pending?root=${rootId}`)).body;
    expect(mine).toEqual({ items: [item] });
    // a child's ID names its tree too; over JSON-RPC the same
    expect((await get(`/v1/pending?root=${childId}`)).body).toEqual(mine);
    expect(await rpc.call('pending.list', { rootId })).toEqual(mine);
    expect((await rpc.call('pending.list')).items).toEqual(all.items);
    // the run over JSON-RPC is the run over HTTP
    const rpcRun = (await rpc.call('runs.list', { q: `approval ${TAG}` })).runs[0];
    expect(rpcRun).toEqual(await runOf(rootId));

    await rpc.call('approval.respond', { agentId: childId, approvalId, decision: 'approve' });
    const done = await settled(rootId);
    expect(done.waitingOn).toEqual([]);
    expect((await get(`/v1/pending?root=${rootId}`)).body).toEqual({ items: [] });
  }, 90_000);

  test('a question: the run waits on it, /v1/pending lists it oldest first with its options', async () => {
    const ask = (q: string) => ({ name: 'ask_user', arguments: { question: q, options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } });
    const first = await submit(`First ${TAG} question`, await script('ask-1', { responses: [{ tool_calls: [ask('Which colour first?')] }, { content: 'Blue it is.' }] }));
    await until('the first question', async () => (await runOf(first))?.status === 'waiting');
    const second = await submit(`Second ${TAG} question`, await script('ask-2', { responses: [{ tool_calls: [ask('Which colour second?')] }, { content: 'Red it is.' }] }));
    const run = await until('the second question', async () => {
      const r = await runOf(second);
      return r?.status === 'waiting' ? r : null;
    });
    const questionId = (await get(`/v1/actors/${second}`)).body.pendingQuestions[0].questionId as string;
    expect(run.waitingOn).toEqual([{ actorId: second, name: 'main', kind: 'question', id: questionId }]);
    const items = (await get('/v1/pending')).body.items.filter((i: { rootId: string }) => i.rootId === first || i.rootId === second);
    expect(items.map((i: { rootId: string; kind: string }) => [i.rootId, i.kind])).toEqual([[first, 'question'], [second, 'question']]);
    expect(items[1]).toMatchObject({ actorId: second, actorName: 'main', question: { questionId, question: 'Which colour second?', allowFreeText: expect.any(Boolean), sensitive: false } });
    expect(items[1].question.options).toEqual([{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }]);
    for (const [agentId, optionId] of [[first, 'blue'], [second, 'red']] as const) {
      const qid = (await get(`/v1/actors/${agentId}`)).body.pendingQuestions[0].questionId;
      await rpc.call('ask.answer', { agentId, questionId: qid, optionId });
      await settled(agentId);
    }
  }, 90_000);

  test('an unknown root is 404 (actor.not_found), over JSON-RPC code 3', async () => {
    const r = await get('/v1/pending?root=agt_01J00000000000000000000000');
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('actor.not_found');
    const a = await rpc.answer('pending.list', { rootId: 'agt_01J00000000000000000000000' });
    expect(a.error).toMatchObject({ code: 3, data: { code: 'actor.not_found' } });
  });
});

describe("the actor's summary", () => {
  test('a turn stopped by its step budget says so in words, with its task, times, workspace and holder', async () => {
    const model = await script('steps', { responses: [{ tool_calls: [{ name: 'read_file', arguments: { path: 'notes.txt' } }], usage }, { content: 'never reached', usage }] });
    const agentId = await submit(`Read the notes ${TAG}\nthen answer`, model, { maxSteps: 1 });
    await settled(agentId, 'stopped');
    const { body } = await get(`/v1/actors/${agentId}`);
    expect(body.lastTurn).toMatchObject({ outcome: 'stopped', reason: 'step_budget' });
    expect(body.lastTurn.error.code).toBe('step_budget');
    expect(body.lastTurn.error.message).toContain('maxSteps 1');
    expect(Date.parse(body.lastTurn.endedAt)).toBeGreaterThanOrEqual(Date.parse(body.startedAt));
    expect(body.task).toBe(`Read the notes ${TAG}\nthen answer`);
    // the runs list says why too
    const runs = await get(`/v1/runs?q=${encodeURIComponent(agentId)}`);
    expect(runs.body.runs).toMatchObject([{ id: agentId, status: 'stopped', reason: 'step_budget' }]);
    expect(body.workspace).toBe(ws);
    expect((await runOf(agentId)).task).toBe(`Read the notes ${TAG}`);
    const held = await until('the host to hold it', async () => {
      const d = (await get(`/v1/actors/${agentId}`)).body;
      return d.holder?.host === HOST ? d.holder : null;
    });
    expect(held.alive).toBe(true);
    expect(Date.parse(held.expiresAt)).toBeGreaterThan(0);
    expect(await rpc.call('actor.inspect', { agentId })).toMatchObject({ lastTurn: body.lastTurn, task: body.task, startedAt: body.startedAt });
    // a gateway that reads no leases names no holder
    const blind = await fx.gateway();
    expect((await get(`/v1/actors/${agentId}`, blind.url)).body.holder).toBeNull();
  }, 60_000);

  test('a turn failed on a request too big for the model: the model\'s own words', async () => {
    const agentId = await submit(`Overflow ${TAG}`, await script('overflow', { responses: [{ error: { type: 'context_overflow' } }] }));
    await settled(agentId, 'failed');
    const { body } = await get(`/v1/actors/${agentId}`);
    // nothing closed to compact: the step cannot be made to fit, in the provider's words
    expect(body.lastTurn.reason).toMatch(/^context_cannot_fit: nothing closed is left to compact/);
    expect(body.lastTurn.error.code).toBe('context_overflow');
    expect(body.lastTurn.error.message).toMatch(/\S/);
    expect(body.lastTurn.reason).toContain(body.lastTurn.error.message);
  }, 60_000);

  test('a completed turn has no error', async () => {
    const { body } = await get(`/v1/runs?q=${TAG}&status=completed&limit=1`);
    const detail = (await get(`/v1/actors/${body.runs[0].id}`)).body;
    expect(detail.lastTurn.outcome).toBe('completed');
    expect(detail.lastTurn.error).toBeNull();
  });
});

describe('bad queries', () => {
  test.each([
    ['limit=0', 'limit: takes a whole number from 1 to 200'],
    ['limit=201', 'limit: takes a whole number from 1 to 200'],
    ['limit=many', 'limit: takes a whole number from 1 to 200'],
    ['status=sleeping', 'status: "sleeping" is not a status: give a comma-separated list of idle, running, waiting'],
    ['before=not%20a%20cursor', 'before: takes the `next` cursor of the previous page'],
  ])('GET /v1/runs?%s is 400 naming the parameter', async (query, words) => {
    const r = await get(`/v1/runs?${query}`);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('gateway.bad_query');
    expect(r.body.error.message).toContain(words);
  });

  test('a cursor this gateway did not give is 400 naming before; a bad root is 400', async () => {
    const forged = Buffer.from('yesterday|agt_x', 'utf8').toString('base64url');
    const r = await get(`/v1/runs?before=${forged}`);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('gateway.bad_cursor');
    expect(r.body.error.message).toContain('before: ');
    const root = await get('/v1/pending?root=nobody');
    expect(root.status).toBe(400);
    expect(root.body.error.message).toContain('root');
  });

  test('over JSON-RPC: -32602 naming the parameter; an unknown one is refused', async () => {
    const bad = await rpc.answer('runs.list', { limit: 0 });
    expect(bad.error!.code).toBe(-32602);
    expect(bad.error!.message).toBe('invalid params for runs.list: limit: takes a whole number from 1 to 200');
    const status = await rpc.answer('runs.list', { status: 'sleeping' });
    expect(status.error!.data[0].path).toEqual(['status']);
    const unknown = await rpc.answer('runs.list', { page: 2 });
    expect(unknown.error!.code).toBe(-32602);
  });

  test('GET /v1/schema publishes the new schemas', async () => {
    const { body } = await get('/v1/schema');
    expect(Object.keys(body.schemas)).toEqual(expect.arrayContaining([
      'RunsQuery', 'RunSummary', 'RunsResponse', 'PendingQuery', 'PendingItem', 'PendingResponse', 'rpc.runs.list.params', 'rpc.runs.list.result', 'rpc.pending.list.result',
    ]));
    expect(body.schemas.RunsResponse.properties.runs.type).toBe('array');
    expect(body.schemas.ActorDetail.required).toEqual(expect.arrayContaining(['task', 'startedAt', 'workspace', 'holder']));
  });
});
