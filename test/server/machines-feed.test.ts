// The live inspection feed end to end, on the embedded nats-server with its authorization: a real
// `actorloop host` (which owns the server), a real `actorloop serve`, and a scripted agent that
// waits for an approval. While nobody watches, the host reports nothing on `inspect.>`; a
// `machines.subscribe` gets the log's state once, the host's states at once (its watch's hello),
// then the transitions of the approved call's step as the host's XState actor takes them,
// states the log alone never shows among them; the client login is refused the inspection
// subject, so no client can say what a host's machine did.
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, expect, test } from 'vitest';
import { embeddedPaths, readEmbeddedState } from '../../src/bus/embedded.js';
import { readEmbeddedAuth } from '../../src/bus/nats-auth.js';
import { inspectSubject } from '../../src/bus/subjects.js';
import { InspectionReportSchema, type InspectionReport } from '../../src/protocol/inspection.js';
import { lines, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { ownerAuth } from '../helpers/serve-output.js';
import { RpcClient, until } from './gateway-fixture.js';

const usage = { input_tokens: 30, output_tokens: 5 };
const SCRIPT = {
  responses: [
    { tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage },
    { content: 'wrote notes.txt', usage },
  ],
};

// no server of the file's own: the host starts the data dir's embedded one, with its authorization
const stack = useCliStack({ nats: false });
const conns: NatsConnection[] = [];

afterAll(async () => {
  for (const c of conns) await c.close().catch(() => {});
});

/** Starts the CLI on `dataDir` in the background, killed after the file's tests. */
function start(dataDir: string, args: string[]): { proc: ChildProcess; out: () => string; err: () => string; exited: Promise<unknown> } {
  const p = stack.fileCli(dataDir).start(args);
  return { proc: p.child, out: p.stdout, err: p.stderr, exited: p.exited };
}

test('machines.subscribe relays the host\'s live transitions of the watched actor; nothing is reported unwatched; a client cannot report', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('feed-data');
  const ws = await stack.dir('feed-ws');
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify(SCRIPT));

  // the host owns the embedded server (with authorization); serve and run find it in the data dir
  const host = start(dataDir, ['host', '--name', 'feed-host', '--lease-ttl', '5000']);
  await until('the host to start', () => host.err().includes('hosting agents'), 30_000);
  const state = (await readEmbeddedState(embeddedPaths(dataDir).stateFile))!;
  const auth = (await readEmbeddedAuth(embeddedPaths(dataDir).dir))!;
  expect(state.auth).toBe(true);

  // everything reported on the inspection subjects, heard with the client login
  const watcher = await connect({ servers: state.url, reconnect: false, user: auth.client.user, pass: auth.client.pass });
  conns.push(watcher);
  const heard: InspectionReport[] = [];
  watcher.subscribe(inspectSubject('*', '*'), { callback: (_err, m) => void heard.push(InspectionReportSchema.parse(m.json())) });
  await watcher.flush();

  // a turn nobody watches: it runs to its approval, and the host reports nothing of it
  const cli = stack.cli(onTestFinished, dataDir);
  const run = await cli.run(['run', 'write notes.txt', '--model', `scripted:${script}`, '--approve', 'ask', '--cwd', ws]);
  expect(run.code, show(run)).toBe(5);
  const agentId = lines(run.stdout)[0]!;
  expect(agentId).toMatch(/^agt_/);
  await watcher.flush();
  expect(heard).toEqual([]);

  const serve = start(dataDir, ['serve', '--port', '0']);
  await until('serve to print its URL', () => serve.out().includes('\n'), 30_000);
  const url = serve.out().split('\n')[0]!.replace(/\/$/, '');
  const rpc = await RpcClient.open(`${url.replace(/^http/, 'ws')}/v1/rpc`, ownerAuth(dataDir));
  onTestFinished(() => rpc.close());

  const { subscription } = await rpc.call('machines.subscribe', { agentIds: [agentId] });
  const mine = (method: string) => rpc.notifications.filter((n) => n.method === method && n.params.subscription === subscription).map((n) => n.params);
  // once, from the log: the agent waits for the approval
  const [fromLog] = await until('the state from the log', () => mine('machines.state').length > 0 && mine('machines.state'));
  expect(fromLog).toMatchObject({ actor: agentId, active: { agent: 'turn.waiting_approval' } });
  expect(Object.values(fromLog.active)).toContain('awaiting_approval.waiting');
  // the host answered the watch's hello with its actor's states now: it reports this actor from here on;
  // its agent machine waits where the log's fold says it does
  const hello = await until('the host to report the watched actor', () => mine('machines.transition').find((t) => t.eventType === null));
  expect(hello).toMatchObject({ actor: agentId, host: 'feed-host', active: { agent: 'turn.waiting_approval', step: 'tools' } });
  expect(Object.values(hello.active)).toContain('awaiting_approval.waiting');

  const detail = await rpc.call('actor.inspect', { agentId });
  await rpc.call('approval.respond', { agentId, approvalId: detail.pendingApprovals[0].approvalId, decision: 'approve' });
  await until('the turn\'s end reported live', () => mine('machines.transition').find((t) => t.eventType === 'turn/end'), 30_000);
  const live = mine('machines.transition');
  expect(live.every((t) => t.actor === agentId && t.host === 'feed-host' && typeof t.at === 'number')).toBe(true);
  const types = live.map((t) => t.eventType);
  for (const t of ['approval/granted', 'tool/start', 'tool/result', 'step/end', 'step/start', 'attempt/start', 'attempt/end', 'assistant/accepted', 'turn/end']) {
    expect(types).toContain(t);
  }
  // the second step as the host's machines took it, with states the committed events' fold never
  // names (it knows a step only as assembling, generating.attempting or tools): the attempt
  // streaming, the step accepting its answer, then ending; the approved call rechecking first
  const at = (type: string) => live.find((t) => t.eventType === type)!.active;
  expect(at('attempt/start')).toMatchObject({ attempt: 'streaming', step: 'generating.attempting', turn: 'stepping', agent: 'turn.running' });
  expect(at('request/prepared')).toMatchObject({ step: 'generating.launching' });
  expect(at('attempt/end')).toMatchObject({ step: 'accepting' });
  expect(at('attempt/end').attempt).toBeUndefined();
  expect(at('assistant/accepted')).toMatchObject({ step: 'ending' });
  expect(Object.values(at('approval/granted'))).toContain('rechecking');
  expect(at('approval/granted').agent).toBe('turn.running');
  expect(live.at(-1)).toMatchObject({ eventType: 'turn/end', active: { agent: 'idle' } });
  // what the gateway relayed is what the host put on the bus, in its order
  await until('the bus watcher to hear as much', () => heard.length >= live.length);
  expect(heard.slice(0, live.length).map((r) => r.event)).toEqual(types);

  // the client login may not report: the server refuses the publish, and nothing is delivered
  const errors: string[] = [];
  void (async () => {
    for await (const s of watcher.status()) if (s.type === 'error') errors.push(String(s.error));
  })();
  const before = heard.length;
  const forged: InspectionReport = { v: 1, actorId: agentId, rootId: agentId, event: 'tool/result', machines: { agent: 'idle', turn: null, step: null, attempt: null, calls: {} }, at: Date.now(), host: 'forger' };
  watcher.publish(inspectSubject(agentId, agentId), JSON.stringify(forged));
  // the server answers this connection in order: the refusal (or a delivery) comes before the pong
  await watcher.flush();
  await until('the server to refuse the publish', () => errors.length > 0);
  expect(errors.join('\n')).toMatch(/permissions violation for publish/i);
  expect(heard.length).toBe(before);
  expect(rpc.notifications.some((n) => n.params?.host === 'forger')).toBe(false);

  await rpc.call('machines.unsubscribe', { subscription });
  await rpc.close();
  serve.proc.kill('SIGTERM');
  await serve.exited;
  host.proc.kill('SIGTERM');
  await host.exited;
}, 120_000);
