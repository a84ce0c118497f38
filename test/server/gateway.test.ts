// The gateway's protocol over real HTTP and a real WebSocket: the gateway in-process on a free
// port over a client runtime, a real nats-server, and a real `actorloop host` process running
// scripted agents (dist/: `npm run build` first). Reads, the event stream and its resume, every
// RPC method, JSON-RPC's errors, the schema, and that no secret reaches a response.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STREAMS } from '../../src/bus/subjects.js';
import { gatewayCommands } from '../../src/cli/gateway-runtime.js';
import type { Gateway } from '../../src/server/gateway.js';
import { DEMO_SCRIPT, demoWorkspace } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { openGatewayFixture, readSse, RpcClient, until, type GatewayFixture, type HostProcess } from './gateway-fixture.js';

const SECRET = 'sk-proj-0123456789abcdefghijklmnopqrstuv';

let fx: GatewayFixture;
let gw: Gateway;
let rpc: RpcClient;
let host: HostProcess;
let ws: string;
let scripts: string;

beforeAll(async () => {
  fx = await openGatewayFixture();
  host = await fx.host('gateway-host-a');
  // a tree below runs auto-edit, looser than the fixture config's `ask`
  gw = await fx.gateway({ commands: gatewayCommands(fx.rt, { allowLooserPolicy: true }) });
  rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
  ws = await demoWorkspace();
  scripts = await tempDir('scripts');
  fx.dirs.push(ws, scripts);
  await writeFile(join(ws, 'secret.txt'), `OPENAI_API_KEY=${SECRET}\n`);
}, 60_000);

afterAll(async () => {
  await rpc?.close();
  await fx?.stop();
}, 60_000);

async function script(name: string, responses: unknown[]): Promise<string> {
  const file = join(scripts, `${name}.json`);
  await writeFile(file, JSON.stringify({ responses }));
  return `scripted:${file}`;
}

const get = async (path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; text: string }> => {
  const res = await fetch(`${gw.url}${path}`, { headers });
  const text = await res.text();
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the answer
  }
  return { status: res.status, body, text };
};

/** The log of an agent's tree as the reader has it: the truth an event stream must match. */
async function treeLog(rootId: string): Promise<Array<{ id: string; streamSeq: number }>> {
  const out: Array<{ id: string; streamSeq: number }> = [];
  for await (const e of fx.rt.reader.readTree(rootId)) out.push({ id: e.event.id, streamSeq: e.streamSeq });
  return out;
}

async function turnEnded(agentId: string): Promise<string> {
  return until(`${agentId}'s turn to end`, async () => {
    const d = await get(`/v1/actors/${agentId}`);
    return d.body?.lastTurn?.outcome ?? null;
  }, 30_000);
}

describe('reads', () => {
  test('GET /v1/machines: the five machines with their states and transitions', async () => {
    const { status, body } = await get('/v1/machines');
    expect(status).toBe(200);
    expect(body.machines.map((m: { id: string }) => m.id)).toEqual(['agent', 'turn', 'step', 'attempt', 'tool-call']);
    const tool = body.machines[4];
    expect(tool.initial).toBe('validating');
    expect(tool.states.awaiting_approval.states.waiting).toBeDefined();
    expect(tool.states.awaiting_approval.on['approval/granted']).toEqual(['rechecking']);
  });

  test('GET /v1/schema: every request and response as JSON Schema', async () => {
    const { status, body } = await get('/v1/schema');
    expect(status).toBe(200);
    expect(body.version).toBe('v1');
    const submit = body.schemas['rpc.turn.submit.params'];
    expect(submit.type).toBe('object');
    expect(submit.required).toContain('task');
    expect(body.schemas.ActorsResponse.properties.actors.type).toBe('array');
    expect(Object.keys(body.schemas)).toEqual(expect.arrayContaining(['rpc.fault.kill.params', 'rpc.events.subscribe.result', 'notification.events.event']));
  });

  test('an unknown actor is 404 with its code; an unknown route too', async () => {
    const r = await get('/v1/actors/agt_01J00000000000000000000000');
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('actor.not_found');
    expect((await get('/v1/nothing')).status).toBe(404);
  });
});

describe('JSON-RPC errors', () => {
  test('malformed JSON is -32700, a non-request -32600, an unknown method -32601, bad params -32602 with the issues', async () => {
    const parse = await rpc.sendRaw('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(parse.error!.code).toBe(-32700);
    expect(parse.id).toBeNull();
    const invalid = await rpc.sendRaw(JSON.stringify({ jsonrpc: '1.0', id: 'x', method: 'actors.list' }));
    expect(invalid.error!.code).toBe(-32600);
    expect(invalid.id).toBe('x');
    const unknown = await rpc.answer('actors.destroy', {});
    expect(unknown.error!.code).toBe(-32601);
    const bad = await rpc.answer('inbox.send', { agentId: 'agt_01J00000000000000000000000', kind: 'shout', content: '' });
    expect(bad.error!.code).toBe(-32602);
    expect(bad.error!.data.map((i: { path: string[] }) => i.path[0]).sort()).toEqual(['content', 'kind']);
  });

  test('an actorloop error is an application error (code ≥ 1) with its own code in data', async () => {
    const a = await rpc.answer('actor.inspect', { agentId: 'agt_01J00000000000000000000000' });
    expect(a.error!.code).toBeGreaterThanOrEqual(1);
    expect(a.error!.data.code).toBe('actor.not_found');
  });

  test('fault.kill without --allow-faults is refused', async () => {
    const a = await rpc.answer('fault.kill', { agentId: 'agt_01J00000000000000000000000' });
    expect(a.error!.code).toBe(2);
    expect(a.error!.data.code).toBe('gateway.faults_disabled');
    expect(a.error!.message).toContain('--allow-faults');
  });
});

describe('an agent that needs an approval, driven through the gateway', () => {
  let agentId: string;

  test('turn.submit returns the IDs at once; the tree and the actor show the approval it waits on', async () => {
    const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: unknown[] };
    const model = await script('demo', demo.responses);
    const submitted = await rpc.call('turn.submit', { task: `Fix the slug test. (the key is ${SECRET})`, model, cwd: ws, approve: 'ask' });
    agentId = submitted.agentId;
    expect(agentId).toMatch(/^agt_/);
    expect(submitted.messageId).toMatch(/^msg_/);
    // the approval is asked, then the actor parks for it: the wait is the log's word, not a guess
    const detail = await until('the approval', async () => {
      const d = await get(`/v1/actors/${agentId}`);
      return d.body?.pendingApprovals?.length > 0 && d.body.actor.status === 'waiting' ? d.body : null;
    }, 30_000);
    const approval = detail.pendingApprovals[0];
    expect(approval.tool).toBe('write_file');
    expect(approval.planDigest).toMatch(/\S/);
    expect(approval.arguments).toContain('slug.js');
    expect(detail.actor.status).toBe('waiting');
    expect(detail.actor.waitingFor).toEqual({ kind: 'approval', ids: [approval.approvalId] });
    const { body } = await get('/v1/actors');
    const mine = body.actors.find((a: { id: string }) => a.id === agentId);
    expect(mine).toMatchObject({ id: agentId, parentId: null, rootId: agentId, name: 'main', kind: 'agent', status: 'waiting', depth: 0 });
    expect(mine.tokens).toBeGreaterThan(0);
    const listed = await rpc.call('actors.list');
    expect(listed.actors.find((a: { id: string }) => a.id === agentId).status).toBe('waiting');
    const inspected = await rpc.call('actor.inspect', { agentId });
    expect(inspected.pendingApprovals[0].approvalId).toBe(approval.approvalId);
  }, 60_000);

  test('events.subscribe sends the log from a cursor; machines.subscribe the active states; approval.respond finishes the turn', async () => {
    const log = await treeLog(agentId);
    const cursor = log[Math.floor(log.length / 2)]!.streamSeq;
    const sub = await rpc.call('events.subscribe', { agentId, afterStreamSeq: cursor, tree: true });
    const machines = await rpc.call('machines.subscribe', { agentIds: [agentId] });
    const states = () => rpc.notifications.filter((n) => n.method === 'machines.state' && n.params.subscription === machines.subscription);
    const waiting = await until('the machine states to show the approval', () => states().find((n) => n.params.active.agent === 'turn.waiting_approval'));
    expect(Object.values(waiting.params.active)).toContain('awaiting_approval.waiting');
    const detail = (await get(`/v1/actors/${agentId}`)).body;
    await rpc.call('approval.respond', { agentId, approvalId: detail.pendingApprovals[0].approvalId, decision: 'approve' });
    expect(await turnEnded(agentId)).toBe('completed');
    const full = await treeLog(agentId);
    const mine = () => rpc.notifications.filter((n) => n.method === 'events.event' && n.params.subscription === sub.subscription);
    await until('every event after the cursor', () => mine().length >= full.filter((e) => e.streamSeq > cursor).length);
    expect(mine().map((n) => n.params.event.id)).toEqual(full.filter((e) => e.streamSeq > cursor).map((e) => e.id));
    expect(mine().every((n) => n.params.actor === agentId && typeof n.params.streamSeq === 'number')).toBe(true);
    await rpc.call('events.unsubscribe', { subscription: sub.subscription });
    await rpc.call('machines.unsubscribe', { subscription: machines.subscription });
    const again = await rpc.answer('events.unsubscribe', { subscription: sub.subscription });
    expect(again.error!.code).toBe(-32602);
  }, 60_000);

  test('SSE: a dropped connection resumed with Last-Event-ID has no gap and no duplicate; its consumer is gone', async () => {
    const full = await treeLog(agentId);
    // commits of several events: a cut inside one would lose the rest of it on resume
    expect(new Set(full.map((e) => e.streamSeq)).size).toBeLessThan(full.length);
    const consumers = async () => (await fx.rt.bus.jsm.consumers.list(STREAMS.logs).next()).length;
    const before = await consumers();
    const first = await readSse(`${gw.url}/v1/actors/${agentId}/events?after=0`, {}, (es) => es.length >= Math.floor(full.length / 2));
    expect(first.status).toBe(200);
    expect(first.body.startsWith('retry: 1000')).toBe(true);
    const lastId = first.events[first.events.length - 1]!.id!;
    // the reader's consumer goes with the client: none is left behind
    await until('the dropped stream to stop its consumer', async () => (await consumers()) <= before);
    const rest = await readSse(`${gw.url}/v1/actors/${agentId}/events?after=0`, { 'Last-Event-ID': lastId }, (es) => first.events.length + es.length >= full.length);
    const ids = [...first.events, ...rest.events].map((e) => JSON.parse(e.data).id);
    expect(ids).toEqual(full.map((e) => e.id));
    const streamSeqs = [...first.events, ...rest.events].map((e) => Number(e.id));
    expect(streamSeqs).toEqual(full.map((e) => e.streamSeq));
    const firstEvent = first.events[0]!;
    expect(firstEvent.event).toBe(JSON.parse(firstEvent.data).type);
    await until('the second stream to stop its consumer', async () => (await consumers()) <= before);
    const bad = await get(`/v1/actors/${agentId}/events`, { 'Last-Event-ID': 'yesterday' });
    expect(bad.status).toBe(400);
  }, 60_000);

  test('SSE: an idle stream carries heartbeat comments; closing the gateway ends it', async () => {
    const beating = await fx.gateway({ heartbeatMs: 50 });
    const full = await treeLog(agentId);
    const r = await readSse(`${beating.url}/v1/actors/${agentId}/events?after=${full[full.length - 1]!.streamSeq}`, {}, (_es, body) => body.includes(': heartbeat\n\n'));
    expect(r.events).toEqual([]);
    expect(r.body).toContain(': heartbeat');
    const ac = new AbortController();
    const res = await fetch(`${beating.url}/v1/actors/${agentId}/events?after=0`, { signal: ac.signal });
    const reading = res.text().catch(() => 'ended');
    await beating.close();
    expect(typeof (await reading)).toBe('string');
    ac.abort();
  }, 60_000);

  test('no secret reaches a response: the task, the directory title and a tool output that held a key', async () => {
    const model = await script('secret', [
      { tool_calls: [{ name: 'read_file', arguments: { path: 'secret.txt' } }] },
      { content: `The file holds ${SECRET}.` },
    ]);
    const { agentId: id } = await rpc.call('turn.submit', { task: `Read secret.txt; my key is ${SECRET}`, model, cwd: ws, approve: 'ask' });
    expect(await turnEnded(id)).toBe('completed');
    // the log itself holds the key somewhere (the task): the gateway is what redacts it
    let raw = '';
    for await (const e of fx.rt.reader.readTree(id)) raw += JSON.stringify(e.event);
    expect(raw).toContain(SECRET);
    const sse = await readSse(`${gw.url}/v1/actors/${id}/events?tree=1`, {}, (es) => es.some((e) => e.event === 'turn/end'));
    const bodies = [sse.body, (await get('/v1/actors')).text, (await get(`/v1/actors/${id}`)).text, JSON.stringify(await rpc.call('actor.inspect', { agentId: id }))];
    for (const b of bodies) {
      expect(b).not.toContain(SECRET);
      expect(b).not.toContain('0123456789abcdefghijklmnopqrstuv');
    }
    expect(sse.body).toContain('[REDACTED');
    expect(sse.events.some((e) => JSON.parse(e.data).type === 'tool/end' || JSON.parse(e.data).type === 'tool/result')).toBe(true);
  }, 60_000);
});

describe('person messages', () => {
  const ask = { name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } };

  async function asking(): Promise<{ agentId: string; questionId: string }> {
    const model = await script(`ask-${Math.random().toString(36).slice(2)}`, [{ tool_calls: [ask] }, { content: 'Blue it is.' }, { content: 'Noted.' }]);
    const { agentId } = await rpc.call('turn.submit', { task: 'Pick a colour with me.', model, cwd: ws });
    const questionId = await until('the question', async () => (await get(`/v1/actors/${agentId}`)).body?.pendingQuestions?.[0]?.questionId);
    return { agentId, questionId };
  }

  test('ask.answer answers the question and the turn completes with it', async () => {
    const { agentId, questionId } = await asking();
    const wrong = await rpc.answer('ask.answer', { agentId, questionId, optionId: 'green' });
    expect(wrong.error!.code).toBe(1);
    const { messageId } = await rpc.call('ask.answer', { agentId, questionId, optionId: 'blue' });
    expect(messageId).toMatch(/^msg_/);
    expect(await turnEnded(agentId)).toBe('completed');
    const detail = (await get(`/v1/actors/${agentId}`)).body;
    expect(detail.lastTurn.answer).toBe('Blue it is.');
    expect(detail.pendingQuestions).toEqual([]);
  }, 60_000);

  test('turn.interrupt cancels the open turn; with none open it says so', async () => {
    const { agentId } = await asking();
    const { messageId } = await rpc.call('turn.interrupt', { agentId });
    expect(messageId).toMatch(/^msg_/);
    expect(await turnEnded(agentId)).toBe('cancelled');
    const none = await rpc.answer('turn.interrupt', { agentId });
    expect(none.error!.data.code).toBe('gateway.no_open_turn');
  }, 60_000);

  test('inbox.send: each kind is an inbox message the agent receives, a follow-up a turn of its own', async () => {
    const { agentId, questionId } = await asking();
    const steer = await rpc.call('inbox.send', { agentId, kind: 'steer', content: 'prefer dark colours' });
    const inject = await rpc.call('inbox.send', { agentId, kind: 'inject', content: 'the walls are white' });
    await rpc.call('ask.answer', { agentId, questionId, optionId: 'blue' });
    expect(await turnEnded(agentId)).toBe('completed');
    const follow = await rpc.call('inbox.send', { agentId, kind: 'follow_up', content: 'and the door?' });
    await until('the follow-up turn', async () => (await get(`/v1/actors/${agentId}`)).body?.turns === 2 && (await get(`/v1/actors/${agentId}`)).body?.lastTurn);
    const received = new Map<string, string>();
    for await (const e of fx.rt.reader.read(agentId, agentId)) {
      if (e.event.type === 'inbox/received') received.set(e.event.data.messageId, `${e.event.data.kind} ${e.event.data.from}`);
    }
    expect(received.get(steer.messageId)).toBe('steer client:gateway');
    expect(received.get(inject.messageId)).toBe('inject client:gateway');
    expect(received.get(follow.messageId)).toBe('follow_up client:gateway');
    const unknown = await rpc.answer('inbox.send', { agentId: 'agt_01J00000000000000000000000', kind: 'steer', content: 'hi' });
    expect(unknown.error!.data.code).toBe('actor.not_found');
  }, 60_000);
});

describe('a tree', () => {
  test('the actors list a child under its parent; the tree stream holds both logs in commit order, each event naming its actor', async () => {
    const usage = { input_tokens: 40, output_tokens: 4 };
    const file = join(scripts, 'tree.json');
    await writeFile(file, JSON.stringify({
      agents: {
        main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'write notes.txt', name: 'writer', mode: 'foreground' } }], usage }, { content: 'the writer wrote it', usage }] },
        writer: { responses: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage }, { content: 'wrote notes.txt', usage }] },
      },
    }));
    const { agentId: rootId } = await rpc.call('turn.submit', { task: 'Have a writer write notes.txt.', model: `scripted:${file}`, cwd: ws, approve: 'auto-edit' });
    expect(await turnEnded(rootId)).toBe('completed');
    const { body } = await get('/v1/actors');
    const tree = body.actors.filter((a: { rootId: string }) => a.rootId === rootId);
    expect(tree.map((a: { name: string; depth: number }) => [a.name, a.depth])).toEqual([['main', 0], ['writer', 1]]);
    const writer = tree[1];
    expect(writer).toMatchObject({ parentId: rootId, kind: 'subagent', status: 'completed' });
    expect((await get(`/v1/actors/${rootId}`)).body.children).toEqual([writer.id]);
    const full = await treeLog(rootId);
    const all = await readSse(`${gw.url}/v1/actors/${rootId}/events?tree=1`, {}, (es) => es.length >= full.length);
    expect(all.events.map((e) => JSON.parse(e.data).id)).toEqual(full.map((e) => e.id));
    expect(new Set(all.events.map((e) => JSON.parse(e.data).actor))).toEqual(new Set([rootId, writer.id]));
    const own = await readSse(`${gw.url}/v1/actors/${writer.id}/events`, {}, (es) => es.some((e) => e.event === 'turn/end'));
    expect(own.events.length).toBeGreaterThan(0);
    expect(own.events.every((e) => JSON.parse(e.data).actor === writer.id)).toBe(true);
  }, 60_000);
});

describe('fault.kill with --allow-faults', () => {
  test('a host without --allow-faults refuses the order (code 2), and stays up', async () => {
    const faulty = await fx.gateway({ allowFaults: true });
    const client = await RpcClient.open(`${faulty.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const model = await script('held', [{ content: 'held' }]);
      const { agentId } = await client.call('turn.submit', { task: 'Be held.', model, cwd: ws });
      await turnEnded(agentId);
      await until('host A to hold the agent', async () => (await fx.rt.leases.get(agentId, Date.now()))?.host === 'gateway-host-a');
      const refused = await client.answer('fault.kill', { agentId, point: 'after:tool/start' });
      expect(refused.error).toMatchObject({ code: 2, data: { code: 'host.faults_disabled', host: 'gateway-host-a', pid: host.child.pid } });
      expect(refused.error!.message).toBe('host gateway-host-a takes no fault orders: start it with `actorloop host --allow-faults`');
      expect(host.child.exitCode).toBeNull();
      expect(host.child.signalCode).toBeNull();
    } finally {
      await client.close();
    }
  }, 60_000);

  test('a bad point is -32602 listing the points; nth needs a named point', async () => {
    const faulty = await fx.gateway({ allowFaults: true });
    const client = await RpcClient.open(`${faulty.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const bad = await client.answer('fault.kill', { agentId: 'agt_01J00000000000000000000000', point: 'tool.before_start' });
      expect(bad.error!.code).toBe(-32602);
      const [issue] = bad.error!.data;
      expect(issue.path).toEqual(['point']);
      expect(issue.values).toEqual(expect.arrayContaining(['after:tool/start', 'before:notice-ack', 'now']));
      expect(issue.message).toContain('one of: after:turn/start, ');
      const nth = await client.answer('fault.kill', { agentId: 'agt_01J00000000000000000000000', nth: 2 });
      expect(nth.error!.code).toBe(-32602);
      expect(nth.error!.data[0].message).toBe('nth needs a named point (not now)');
    } finally {
      await client.close();
    }
  });

  test('now: the host holding the agent (--allow-faults) answers, then SIGKILLs itself', async () => {
    // host A drains, releasing what it holds: the next agent goes to the host that takes orders
    host.child.kill('SIGTERM');
    expect(await host.exited).toEqual({ code: 0, signal: null });
    const c = await fx.host('gateway-host-c', ['--allow-faults']);
    const faulty = await fx.gateway({ allowFaults: true });
    const client = await RpcClient.open(`${faulty.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const model = await script('slow', [{ content: 'thinking', delay_ms: 60_000 }]);
      const { agentId } = await client.call('turn.submit', { task: 'Take your time.', model, cwd: ws });
      await until('a lease on the agent', async () => fx.rt.leases.get(agentId, Date.now()));
      const killed = await client.call('fault.kill', { agentId });
      expect(killed).toEqual({ status: 'killed', hostId: 'gateway-host-c', pid: c.child.pid, point: 'now' });
      expect(await c.exited).toEqual({ code: null, signal: 'SIGKILL' });
      // nobody holds it now that its holder is gone (once the lease lapses): a clear error
      await until('the lease to lapse', async () => !(await fx.rt.leases.get(agentId, Date.now())), 20_000);
      const none = await client.answer('fault.kill', { agentId });
      expect(none.error).toMatchObject({ code: 1, data: { code: 'gateway.not_hosted' } });
    } finally {
      await client.close();
    }
  }, 60_000);
});
