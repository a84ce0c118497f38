// Two `actorloop host` processes on a 3-node JetStream cluster (replicas = 3, ACTORLOOP_REPLICAS),
// each connected to a node of its own and with a data dir of its own, take over each other's
// agents when the other is SIGKILLed mid-turn; the logs verify from a third data dir that reaches
// the cluster through the comma-separated NATS_URL list. nats-server 2.9.10 here.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openBus } from '../../src/bus/connection.js';
import { publishInbox } from '../../src/bus/inbox.js';
import { createKvLeaseStore } from '../../src/bus/leases.js';
import { STREAMS } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { DEMO_SCRIPT, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { startTestCluster, type TestCluster } from '../helpers/nats-cluster.js';
import { until } from '../helpers/processes.js';

const stack = useCliStack({ nats: false });
let cluster: TestCluster;
const REPLICAS = { ACTORLOOP_REPLICAS: '3' };

beforeAll(async () => {
  cluster = await startTestCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

/** `actorloop host` on one node of the cluster, with its own data dir. */
function startHost(name: string, dataDir: string, node: string) {
  const h = stack.fileCli(dataDir, REPLICAS).start(['host', '--name', name, '--lease-ttl', '2000', '--nats', cluster.node(node).url, '--data-dir', dataDir]);
  return { name, child: h.child, stderr: h.stderr, exited: h.exited.then((e) => e.code) };
}

test('hosts on different nodes and data dirs take over each other\'s agents after a SIGKILL', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli, REPLICAS);
  const common = ['--nats', cluster.url, '--data-dir', dataCli];
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<Record<string, unknown>> };
  const script = join(ws, '..', `slow-${newId('message')}.json`);
  await writeFile(script, JSON.stringify({ responses: demo.responses.map((r) => ({ ...r, delay_ms: 1_500 })) }));
  stack.remove(script);
  const events = async (agentId: string) => parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  const underWay = (agentId: string) => until(`${agentId} under way`, async () => {
    const log = await events(agentId);
    return log.filter((e) => e.type === 'step/start').length >= 2 ? log : null;
  }, 60_000);
  const ended = (agentId: string) => until(`${agentId} to end`, async () => {
    const l = await events(agentId);
    return l.some((e) => e.type === 'turn/end') ? l : null;
  }, 60_000);

  // Both hosts up first (a host can take seconds to start on a loaded machine, longer than a turn).
  // The other host is paused (SIGSTOP) while the work is submitted, so the one meant to die claims it.
  let a = startHost('host-a', dataA, 'n1');
  const b = startHost('host-b', dataB, 'n2');
  await until('both hosts up', async () => a.stderr().includes('hosting agents') && b.stderr().includes('hosting agents'), 60_000);
  // the first command of this data dir on a 2.9.10 cluster with replicas = 3 says what it risks, once
  expect(a.stderr()).toMatch(/nats-server 2\.9\.10 with replicas = 3: .*zombie host/);

  // round 1: A takes the agent; A dies; B (another node, another data dir) finishes it
  b.child.kill('SIGSTOP');
  const first = await submit(dataCli, ws, script);
  const before1 = await underWay(first);
  b.child.kill('SIGCONT');
  expect(await holderOf(first, dataCli)).toBe('host-a');
  a.child.kill('SIGKILL');
  await a.exited;
  const log1 = await ended(first);
  expect(log1.at(-1), b.stderr()).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  expect(log1.some((e) => e.epoch > before1[0]!.epoch && e.type === 'recovery/continuation')).toBe(true);

  // round 2: A comes back on its node (same data dir: no second warning); B takes the next agent, dies, and A finishes it
  a = startHost('host-a', dataA, 'n1');
  await until('host-a up again', async () => a.stderr().includes('hosting agents'), 60_000);
  expect(a.stderr()).not.toMatch(/zombie host/);
  a.child.kill('SIGSTOP');
  const second = await submit(dataCli, ws, script);
  const before2 = await underWay(second);
  a.child.kill('SIGCONT');
  expect(await holderOf(second, dataCli)).toBe('host-b');
  b.child.kill('SIGKILL');
  await b.exited;
  const log2 = await ended(second);
  expect(log2.at(-1), a.stderr()).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  expect(log2.some((e) => e.epoch > before2[0]!.epoch && e.type === 'recovery/continuation')).toBe(true);

  for (const agentId of [first, second]) {
    const verify = await cli.run(['verify', agentId, ...common]);
    expect(verify.code, show(verify)).toBe(0);
  }
  const probe = await openBus({ natsUrl: cluster.url, dataDir: dataCli, logger: pino({ level: 'silent' }) });
  try {
    expect((await probe.jsm.streams.info(STREAMS.logs)).config.num_replicas).toBe(3);
  } finally {
    await probe.close();
  }
  // doctor on the URL list: every server answers, and the replicas line names the cluster and the risk
  const doctor = await cli.run(['doctor', '--json', '--model', `scripted:${script}`, ...common]);
  const checks = doctor.stdout.trim().split('\n').map((l) => JSON.parse(l) as { check: string; status: string; detail: string });
  expect(checks.find((c) => c.check === 'nats-server'), doctor.stdout).toMatchObject({ status: 'ok', detail: expect.stringContaining('all 3 NATS servers answer') });
  expect(checks.find((c) => c.check === 'replicas')).toMatchObject({ status: 'warning', detail: expect.stringMatching(/replicas = 3: before 2\.9\.21/) });
  a.child.kill('SIGTERM');
  expect(await a.exited).toBe(0);
}, 170_000);

/** Submits work the way a client does: a directory entry and a message in the agent's inbox. */
async function submit(dataDir: string, ws: string, script: string): Promise<string> {
  const bus = await openBus({ natsUrl: cluster.url, dataDir, logger: pino({ level: 'silent' }), replicas: { replicas: 3, scale: true } });
  const agentId = newId('agent');
  const now = new Date().toISOString();
  try {
    await bus.directory.put({
      actorId: agentId, kind: 'agent', parentId: null, rootId: agentId, status: 'running', title: 'fix it', workspace: ws,
      createdAt: now, updatedAt: now, labels: {},
    });
    await publishInbox(bus.js, {
      id: newId('message'), from: 'client:test', to: agentId, kind: 'user_message', target: 'next_turn', wakeup: true,
      content: 'fix the failing test', sentAt: now,
      request: {
        model: `scripted:${script}`, baseUrl: null, workspace: ws, tools: null, instructions: null, approvalMode: 'auto-edit',
        maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
      },
    }, 'person');
  } finally {
    await bus.close();
  }
  return agentId;
}

/** Which host holds the agent's live lease. */
async function holderOf(agentId: string, dataDir: string): Promise<string | undefined> {
  const probe = await openBus({ natsUrl: cluster.url, dataDir, logger: pino({ level: 'silent' }) });
  try {
    const leases = createKvLeaseStore(await new Kvm(probe.js).open('leases'), { ttlMs: 2_000 });
    return (await leases.get(agentId, Date.now()))?.host;
  } finally {
    await probe.close();
  }
}
