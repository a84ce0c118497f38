// `fault.kill` at a named point, the real thing end to end: a nats-server, `actorloop serve
// --allow-faults`, `actorloop host --allow-faults` processes on one data dir (the fault record
// host A leaves is read by host B when it recovers the agent), a JSON-RPC client over a real
// WebSocket. The gateway orders host A over the bus to die at `after:tool/start`; a follow-up turn
// with a tool call kills it there, host B takes over and completes the turn, the log's
// `actor/killed` names the point and `verify` passes; host B, without --allow-faults, refuses.
// On the data dir's embedded server (which runs with authorization) a client login may give a
// fault order and a host login may not. A `run --in-process` holding the agent takes no orders.
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { expect, test } from 'vitest';
import { embeddedPaths, readEmbeddedState } from '../../src/bus/embedded.js';
import { hostKey } from '../../src/bus/hosts.js';
import { readEmbeddedAuth } from '../../src/bus/nats-auth.js';
import { faultSubject } from '../../src/bus/subjects.js';
import { parseEvents, show, type Exit } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { ownerAuth } from '../helpers/serve-output.js';
import { RpcClient, until } from '../server/gateway-fixture.js';

const usage = { input_tokens: 40, output_tokens: 4 };
const stack = useCliStack();

interface Started { proc: ChildProcess; out: () => string; err: () => string; exited: Promise<Exit> }

/** Starts the CLI as a long-running process on `dataDir` (and the test server unless `embedded`), killed after the file's tests. */
function start(args: string[], dataDir: string, embedded = false): Started {
  const p = stack.fileCli(dataDir).start([...args, ...(embedded ? ['--data-dir', dataDir] : stack.flags(dataDir))]);
  return { proc: p.child, out: p.stdout, err: p.stderr, exited: p.exited };
}

test('fault.kill at after:tool/start: host A dies at that point of the next turn, host B carries it to the end, actor/killed names the point, verify passes', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('fault-kill');
  const ws = await stack.workspace();
  const model = join(dataDir, 'script.json');
  // turn 1 answers; turn 2 lists the workspace (host A dies once that call's tool/start is committed), then answers
  await writeFile(model, JSON.stringify({ responses: [
    { content: 'ready', usage },
    { tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }], usage },
    { content: 'listed it', usage },
  ] }));
  const a = start(['host', '--name', 'fk-host-a', '--lease-ttl', '2000', '--allow-faults'], dataDir);
  await until('host A to start', () => a.err().includes('hosting agents'), 30_000);
  expect(a.err()).toContain('fault orders allowed');
  const serve = start(['serve', '--port', '0', '--allow-faults'], dataDir);
  await until('serve to print its URL', () => serve.out().includes('\n'), 30_000);
  const url = serve.out().split('\n')[0]!;
  const rpc = await RpcClient.open(`${url.replace('http', 'ws')}v1/rpc`, ownerAuth(dataDir));
  onTestFinished(() => rpc.close());
  const inspect = () => rpc.call('actor.inspect', { agentId });

  const { agentId } = await rpc.call('turn.submit', { task: 'Get ready.', model: `scripted:${model}`, cwd: ws });
  await until('turn 1 to complete on host A', async () => (await inspect()).lastTurn?.outcome === 'completed', 30_000);

  const armed = await rpc.call('fault.kill', { agentId, point: 'after:tool/start' });
  expect(armed).toEqual({ status: 'armed', hostId: 'fk-host-a', pid: a.proc.pid, point: 'after:tool/start' });
  expect(a.proc.exitCode).toBeNull();
  // host B takes no fault orders; it takes the agent over once A's lease lapses
  const b = start(['host', '--name', 'fk-host-b', '--lease-ttl', '2000'], dataDir);
  await until('host B to start', () => b.err().includes('hosting agents'), 30_000);

  await rpc.call('turn.submit', { agentId, task: 'List the workspace.' });
  expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
  expect(a.err()).toContain('fault after:tool/start: killing this process');
  await until('turn 2 to complete on host B', async () => {
    const d = await inspect();
    return d.turns === 2 && d.lastTurn?.outcome === 'completed' && d.lastTurn.answer === 'listed it';
  }, 60_000);

  const cli = stack.cli(onTestFinished, dataDir);
  const events = parseEvents((await cli.run(['events', agentId, '--json', '--nats', stack.nats.url, '--data-dir', dataDir])).stdout);
  const killed = events.filter((e) => e.type === 'actor/killed');
  expect(killed).toHaveLength(1);
  expect(killed[0]).toMatchObject({ data: { point: 'after:tool/start', detectedBy: 'fault record (kill)' } });
  // the call A started is in the log once, before the kill; B recovered it and the step went on
  const killedAt = events.indexOf(killed[0]!);
  expect(events.slice(0, killedAt).filter((e) => e.type === 'tool/start')).toHaveLength(1);
  expect(events.slice(killedAt).some((e) => e.type === 'actor/rehydrated')).toBe(true);
  const verify = await cli.run(['verify', agentId, '--nats', stack.nats.url, '--data-dir', dataDir]);
  expect(verify.code, show(verify)).toBe(0);

  // B holds it now and takes no orders: the refusal comes back as a JSON-RPC error
  const refused = await rpc.answer('fault.kill', { agentId, point: 'after:turn/start' });
  expect(refused.error).toMatchObject({ code: 2, data: { code: 'host.faults_disabled', host: 'fk-host-b', pid: b.proc.pid } });
  expect(refused.error!.message).toContain('actorloop host --allow-faults');
  serve.proc.kill('SIGTERM');
  b.proc.kill('SIGTERM');
  expect(await serve.exited).toEqual({ code: 0, signal: null });
  expect(await b.exited).toEqual({ code: 0, signal: null });
}, 150_000);

test('a host killed the instant a follow-up turn starts (after:turn/start): another host takes the agent on and the turn completes', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('fault-turn-start');
  const ws = await stack.workspace();
  const model = join(dataDir, 'script.json');
  await writeFile(model, JSON.stringify({ responses: [{ content: 'ready', usage }, { content: 'carried on', usage }] }));
  const a = start(['host', '--name', 'ts-host-a', '--lease-ttl', '2000', '--allow-faults'], dataDir);
  await until('host A to start', () => a.err().includes('hosting agents'), 30_000);
  const serve = start(['serve', '--port', '0', '--allow-faults'], dataDir);
  await until('serve to print its URL', () => serve.out().includes('\n'), 30_000);
  const rpc = await RpcClient.open(`${serve.out().split('\n')[0]!.replace('http', 'ws')}v1/rpc`, ownerAuth(dataDir));
  onTestFinished(() => rpc.close());
  const { agentId } = await rpc.call('turn.submit', { task: 'Get ready.', model: `scripted:${model}`, cwd: ws });
  const inspect = () => rpc.call('actor.inspect', { agentId });
  await until('turn 1 to complete on host A', async () => (await inspect()).lastTurn?.outcome === 'completed', 30_000);
  await rpc.call('fault.kill', { agentId, point: 'after:turn/start' });
  const b = start(['host', '--name', 'ts-host-b', '--lease-ttl', '2000'], dataDir);
  await until('host B to start', () => b.err().includes('hosting agents'), 30_000);
  // the directory must say `running` before the follow-up is taken, or no host looks at an agent
  // whose mail is gone (or delivered, unacked, waking nobody) and whose cache says `completed`
  await rpc.call('turn.submit', { agentId, task: 'Carry on.' });
  expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
  await until('turn 2 to complete on host B', async () => {
    const d = await inspect();
    return d.turns === 2 && d.lastTurn?.answer === 'carried on';
  }, 60_000);
  serve.proc.kill('SIGTERM');
  b.proc.kill('SIGTERM');
  await Promise.all([serve.exited, b.exited]);
}, 150_000);

test('on the embedded server a client login may give a host a fault order, a host login may not', async () => {
  const dataDir = await stack.dir('fault-auth');
  // the host owns the data dir's embedded server, which runs with authorization
  const h = start(['host', '--name', 'fk-auth-host', '--lease-ttl', '3000', '--allow-faults'], dataDir, true);
  await until('the host to start', () => h.err().includes('hosting agents'), 30_000);
  const state = (await readEmbeddedState(embeddedPaths(dataDir).stateFile))!;
  const auth = (await readEmbeddedAuth(embeddedPaths(dataDir).dir))!;
  expect(state.auth).toBe(true);
  const order = JSON.stringify({ actorId: 'agt_01J00000000000000000000000', point: 'now', orderId: 'o1' });
  const subject = faultSubject(hostKey('fk-auth-host'));

  const client = await connect({ servers: state.url, reconnect: false, user: auth.client.user, pass: auth.client.pass });
  try {
    // heard and answered (it holds no such agent, so nothing is killed)
    const reply = (await client.request(subject, order, { timeout: 5_000 })).json();
    expect(reply).toMatchObject({ armed: false, hostId: 'fk-auth-host', code: 'host.not_holding' });
  } finally {
    await client.close();
  }
  const host = await connect({ servers: state.url, reconnect: false, user: auth.host.user, pass: auth.host.pass });
  try {
    await expect(host.request(subject, order, { timeout: 3_000 })).rejects.toThrow(/permissions violation for publish/i);
  } finally {
    await host.close();
  }
  expect(h.proc.exitCode).toBeNull();
  h.proc.kill('SIGTERM');
  expect(await h.exited).toEqual({ code: 0, signal: null });
}, 60_000);

test('an agent hosted in a command\'s own process (run --in-process) takes no fault orders: a clear error, and the command lives on', async () => {
  const dataDir = await stack.dir('fault-inproc');
  const ws = await stack.workspace();
  const model = join(dataDir, 'script.json');
  await writeFile(model, JSON.stringify({ responses: [{ content: 'slowly', delay_ms: 30_000, usage }] }));
  const serve = start(['serve', '--port', '0', '--allow-faults'], dataDir);
  await until('serve to print its URL', () => serve.out().includes('\n'), 30_000);
  const url = serve.out().split('\n')[0]!;
  const run = start(['run', 'answer slowly', '--model', `scripted:${model}`, '--cwd', ws, '--in-process'], dataDir);
  await until('the run to print its agent', () => /^agt_/m.test(run.out()), 30_000);
  const agentId = /^(agt_\S+)$/m.exec(run.out())![1]!;
  const rpc = await RpcClient.open(`${url.replace('http', 'ws')}v1/rpc`, ownerAuth(dataDir));
  try {
    await until('the run to hold the agent', async () => (await rpc.call('actor.inspect', { agentId })).openAttempt !== null, 30_000);
    const refused = await rpc.answer('fault.kill', { agentId });
    expect(refused.error).toMatchObject({ code: 1, data: { code: 'gateway.not_a_fault_host' } });
    expect(refused.error!.message).toContain('takes no fault orders');
    expect(run.proc.exitCode).toBeNull();
    expect(run.proc.signalCode).toBeNull();
  } finally {
    await rpc.close();
  }
  run.proc.kill('SIGKILL');
  serve.proc.kill('SIGTERM');
  expect(await serve.exited).toEqual({ code: 0, signal: null });
}, 60_000);
