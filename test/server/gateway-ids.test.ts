// Every ID the gateway is given is checked before it reaches the bus, over real HTTP and a real
// WebSocket on a real nats-server: a malformed one is 400 / -32602 with one line, a well-formed one
// nobody knows 404 / the not-found code; a 5,000-character one never becomes a subject (the
// gateway's NATS connection stays up); a malformed percent-escape is 400; nothing of this logs an
// error or a stack. One socket holds a bounded number of subscriptions.
import { writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_SUBSCRIPTIONS_PER_SOCKET, RPC_ERRORS } from '../../src/protocol/gateway.js';
import { newId } from '../../src/protocol/ids.js';
import type { Gateway } from '../../src/server/gateway.js';
import { tempDir } from '../helpers/nats.js';
import { openGatewayFixture, RpcClient, type GatewayFixture } from './gateway-fixture.js';

let fx: GatewayFixture;
let gw: Gateway;
let rpc: RpcClient;
/** Every line the gateway logged, parsed. */
const logged: Array<{ level: number; msg: string; err?: { stack?: string } }> = [];
/** The gateway runtime's NATS connection's status changes (a disconnect, a reconnect…). */
const natsStatus: string[] = [];
/** An agent the directory holds (with no log yet: enough to subscribe to). */
const known = newId('agent');
const unknown = newId('agent');

beforeAll(async () => {
  fx = await openGatewayFixture();
  void (async () => {
    for await (const s of fx.rt.bus.nc.status()) natsStatus.push(s.type);
  })();
  const now = new Date().toISOString();
  await fx.rt.bus.directory.put({ actorId: known, kind: 'agent', parentId: null, rootId: known, status: 'idle', title: 'known', workspace: '/tmp', createdAt: now, updatedAt: now, labels: {} });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') logged.push(JSON.parse(line));
      done();
    },
  });
  // a page to serve: its paths are decoded to find a file
  const pageDir = await tempDir('page');
  fx.dirs.push(pageDir);
  await writeFile(join(pageDir, 'index.html'), '<!doctype html><title>page</title>');
  gw = await fx.gateway({ logger: pino({ level: 'debug' }, sink), pageDir });
  rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
}, 60_000);

afterAll(async () => {
  await rpc?.close();
  await fx?.stop();
}, 60_000);

/** A GET sent byte for byte as written (no client normalizes its path), and its answer. */
function rawGet(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gw.port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => (body += s));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

/** No line the gateway logged is an error, and none carries a stack. */
function expectNothingLogged(): void {
  expect(logged.filter((l) => l.level >= 50 || l.err?.stack !== undefined)).toEqual([]);
}

const MALFORMED = ['agt_*', 'agt_>', '../../etc', '%00', 'constructor', '__proto__', 'toString', 'agt_01abcdefghjkmnpqrstvwxyz01', `agt_${'A'.repeat(5000)}`];

describe('HTTP', () => {
  test.each(MALFORMED.map((id) => [id.length > 40 ? `a ${id.length}-character ID` : id, id]))('%s in a path is 400 with one line and its code, for the actor and its events', async (_what, id) => {
    for (const path of [`/v1/actors/${encodeURIComponent(id)}`, `/v1/actors/${encodeURIComponent(id)}/events`]) {
      const r = await rawGet(path);
      expect(r.status, `${path}: ${r.body}`).toBe(400);
      const { error } = JSON.parse(r.body);
      expect(error.code).toBe('protocol.bad_id');
      expect(error.message).toMatch(/is not an agent ID: .*\(an agent ID is agt_<ULID>: 26 characters of 0-9 and A-Z but I, L, O and U\)$/);
      expect(error.message).not.toContain('\n');
    }
    expectNothingLogged();
  });

  test('?root= that is not an agent ID is 400', async () => {
    const r = await rawGet('/v1/actors?root=agt_*');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.message).toContain('"agt_*" is not an agent ID');
  });

  test('a well-formed ID nobody knows is 404, naming it', async () => {
    for (const path of [`/v1/actors/${unknown}`, `/v1/actors/${unknown}/events`]) {
      const r = await rawGet(path);
      expect(r.status, r.body).toBe(404);
      expect(JSON.parse(r.body).error).toMatchObject({ code: 'actor.not_found', message: expect.stringContaining(unknown) });
    }
  });

  test('a malformed percent-escape is 400, in an actor path and in a page path', async () => {
    for (const path of ['/v1/actors/%E0%A4%A', '/%E0%A4%A', '/assets/%ZZ']) {
      const r = await rawGet(path);
      expect(r.status, `${path}: ${r.body}`).toBe(400);
      expect(JSON.parse(r.body).error.message).not.toContain('internal');
    }
    // a well-formed escape is still decoded to the file it names
    expect(await rawGet('/%69ndex.html')).toMatchObject({ status: 200, body: '<!doctype html><title>page</title>' });
    expectNothingLogged();
  });

  test('50 requests with a 5,000-character ID are each 400, the gateway keeps its NATS connection, and another client is answered', async () => {
    const long = `agt_${'A'.repeat(5000)}`;
    const before = natsStatus.length;
    const answers = await Promise.all(Array.from({ length: 50 }, () => rawGet(`/v1/actors/${long}`)));
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(400));
    // the same over RPC, from one client
    const rpcAnswers = await Promise.all(Array.from({ length: 50 }, () => rpc.answer('actor.inspect', { agentId: long })));
    expect(rpcAnswers.map((a) => a.error?.code)).toEqual(Array(50).fill(RPC_ERRORS.invalidParams));
    const other = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const list = await other.call('actors.list');
      expect(list.actors.map((a: { id: string }) => a.id)).toEqual([known]);
      expect((await other.call('actor.inspect', { agentId: known })).actor.id).toBe(known);
    } finally {
      await other.close();
    }
    expect(natsStatus.slice(before)).toEqual([]);
    expect(fx.rt.bus.nc.isClosed()).toBe(false);
    expectNothingLogged();
  });
});

describe('JSON-RPC', () => {
  const cases: Array<[string, (id: string) => Record<string, unknown>, string]> = [
    ['actor.inspect', (id) => ({ agentId: id }), 'agentId'],
    ['events.subscribe', (id) => ({ agentId: id }), 'agentId'],
    ['machines.subscribe', (id) => ({ agentIds: [known, id] }), 'agentIds.1'],
    ['inbox.send', (id) => ({ agentId: id, kind: 'steer', content: 'hi' }), 'agentId'],
    ['turn.interrupt', (id) => ({ agentId: id }), 'agentId'],
    ['goal.control', (id) => ({ agentId: id, action: 'pause' }), 'agentId'],
    ['turn.submit', (id) => ({ agentId: id, task: 'go on' }), 'agentId'],
    ['actors.list', (id) => ({ rootId: id }), 'rootId'],
    ['fault.kill', (id) => ({ agentId: id }), 'agentId'],
    ['approval.respond', (id) => ({ agentId: id, approvalId: newId('approval'), decision: 'approve' }), 'agentId'],
    ['ask.answer', (id) => ({ agentId: id, questionId: newId('question'), text: 'red' }), 'agentId'],
  ];

  test.each(cases)('%s with a malformed agent ID is -32602, saying what is wrong in the message', async (method, params, path) => {
    for (const id of MALFORMED) {
      const a = await rpc.answer(method, params(id));
      expect(a.error, `${method} ${id.slice(0, 40)}`).toMatchObject({ code: RPC_ERRORS.invalidParams });
      expect(a.error!.message).toMatch(new RegExp(`^invalid params for ${method.replace('.', '\\.')}: ${path.replace('.', '\\.')}: ".*is not an agent ID`));
      expect(a.error!.message).not.toContain('\n');
    }
    expectNothingLogged();
  });

  test('an approval or question ID that is a name every object has, or malformed, is -32602', async () => {
    for (const id of ['constructor', '__proto__', 'toString', 'apr_*', 'q_NOPE']) {
      const approval = await rpc.answer('approval.respond', { agentId: known, approvalId: id, decision: 'approve' });
      expect(approval.error).toMatchObject({ code: RPC_ERRORS.invalidParams, message: expect.stringContaining('is not an approval ID') });
      const question = await rpc.answer('ask.answer', { agentId: known, questionId: id, optionId: 'red' });
      expect(question.error).toMatchObject({ code: RPC_ERRORS.invalidParams, message: expect.stringContaining('is not a question ID') });
    }
  });

  test('a well-formed ID nobody knows has the not-found code, naming what is not found', async () => {
    for (const [method, params] of [
      ['actor.inspect', { agentId: unknown }],
      ['events.subscribe', { agentId: unknown }],
      ['machines.subscribe', { agentIds: [unknown] }],
      ['turn.interrupt', { agentId: unknown }],
      ['goal.control', { agentId: unknown, action: 'pause' }],
      ['inbox.send', { agentId: unknown, kind: 'steer', content: 'hi' }],
    ] as const) {
      const a = await rpc.answer(method, params);
      expect(a.error, method).toMatchObject({ code: RPC_ERRORS.notFound, data: { code: 'actor.not_found' } });
      expect(a.error!.message).toContain(unknown);
    }
    // an approval the agent never asked for: not found too
    const approval = await rpc.answer('approval.respond', { agentId: known, approvalId: newId('approval'), decision: 'approve' });
    expect(approval.error).toMatchObject({ code: RPC_ERRORS.notFound, data: { code: 'gateway.approval_not_found' } });
    expectNothingLogged();
  });
});

describe('subscriptions per socket', () => {
  test(`1,000 events.subscribe on one socket: ${MAX_SUBSCRIPTIONS_PER_SOCKET} are opened, the rest refused with their code; unsubscribing frees a slot; another client is answered`, async () => {
    const greedy = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
    const other = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const answers = await Promise.all(Array.from({ length: 1000 }, () => greedy.answer('events.subscribe', { agentId: known })));
      const opened = answers.filter((a) => a.result).map((a) => a.result.subscription as string);
      const refused = answers.filter((a) => a.error);
      expect(opened).toHaveLength(MAX_SUBSCRIPTIONS_PER_SOCKET);
      expect(refused).toHaveLength(1000 - MAX_SUBSCRIPTIONS_PER_SOCKET);
      expect(refused[0]!.error).toMatchObject({
        code: RPC_ERRORS.tooManySubscriptions,
        message: expect.stringContaining(`holds ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions, the most one may`),
        data: { code: 'gateway.too_many_subscriptions', limit: MAX_SUBSCRIPTIONS_PER_SOCKET },
      });
      // machines.subscribe shares the cap
      expect((await greedy.answer('machines.subscribe', { agentIds: [known] })).error?.code).toBe(RPC_ERRORS.tooManySubscriptions);
      // another client, on its own socket, is answered while the greedy one holds its subscriptions
      expect((await other.call('actor.inspect', { agentId: known })).actor.id).toBe(known);
      expect((await other.call('events.subscribe', { agentId: known })).subscription).toEqual(expect.any(String));

      await greedy.call('events.unsubscribe', { subscription: opened[0] });
      const again = await greedy.answer('events.subscribe', { agentId: known });
      expect(again.result?.subscription, JSON.stringify(again.error)).toEqual(expect.any(String));
      expect((await greedy.answer('events.subscribe', { agentId: known })).error?.code).toBe(RPC_ERRORS.tooManySubscriptions);
    } finally {
      await greedy.close();
      await other.close();
    }
  }, 60_000);

  test('one machines.subscribe may not name more actors than a socket may subscribe to', async () => {
    const a = await rpc.answer('machines.subscribe', { agentIds: Array(MAX_SUBSCRIPTIONS_PER_SOCKET + 1).fill(known) });
    expect(a.error?.code).toBe(RPC_ERRORS.invalidParams);
  });
});
