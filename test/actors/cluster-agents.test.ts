// Design §6 on a cluster: 20 agents run the tool loop on a 3-node JetStream cluster with
// replicas = 3 while the LOGS stream leader is SIGKILLed and restarted, and then the node this
// host is connected to. Every turn completes, every log verifies, no effect runs twice and no
// inbox message is lost. nats-server 2.9.10 here (before 2.9.21: the compare-and-set race of
// replicated streams is not exercised, since one host writes each log).
import { appendFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { openBus } from '../../src/bus/connection.js';
import { STREAMS } from '../../src/bus/subjects.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { hasCode } from '../../src/protocol/errors.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { verifyLog } from '../../src/verify/verify.js';
import { startTestCluster, type TestCluster } from '../helpers/nats-cluster.js';
import { tempDir } from '../helpers/nats.js';
import { openTestRuntime, readLog, turnRequest, type NatsTestRuntime } from '../helpers/runtime.js';
import { message, ofType } from './harness.js';

const AGENTS = 20;
const CALLS = 8;

/** Every run of the tool, by workspace: an effect that must happen once per call. */
const runs = new Map<string, string[]>();

const appendTool: ToolDefinition<{ line: string }> = {
  name: 'append',
  version: '1',
  description: 'Append a line to effects.log',
  input: z.strictObject({ line: z.string() }),
  level: 'write',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (_input, { workspace }) => [{ key: `path:${workspace}/effects.log`, mode: 'write' }],
  async execute(input, ctx) {
    runs.set(ctx.workspace, [...(runs.get(ctx.workspace) ?? []), input.line]);
    await appendFile(join(ctx.workspace, 'effects.log'), `${input.line}\n`);
    return { ok: true, output: `appended ${input.line}` };
  },
};

const script: ScriptResponse[] = [
  ...Array.from({ length: CALLS }, (_, i): ScriptResponse => ({ tool_calls: [{ name: 'append', arguments: { line: `l${i}` } }], delay_ms: 400 })),
  { content: 'done' },
  // the follow-up turn's model call outlasts the restart of the LOGS leader on a loaded machine:
  // the turns are still running when the host's own node dies
  { content: 'again', delay_ms: 20_000 },
];

let cluster: TestCluster;
let rt: NatsTestRuntime;
const workspaces: string[] = [];

beforeAll(async () => {
  cluster = await startTestCluster();
  // the deployment's streams, made with three copies by a command that names the setting
  const setup = await tempDir('cluster-setup');
  const bus = await openBus({ natsUrl: cluster.url, dataDir: setup, logger: pino({ level: 'silent' }), replicas: { replicas: 3, scale: true } });
  await bus.close();
  await rm(setup, { recursive: true, force: true });
  rt = await openTestRuntime({ natsUrl: cluster.url, script, tools: [appendTool] });
}, 60_000);
afterAll(async () => {
  await rt?.close();
  await cluster?.stop();
  for (const ws of workspaces) await rm(ws, { recursive: true, force: true });
});

/** Sends until the inbox acknowledges: a publish unanswered during an election is sent again with the same ID. */
async function sendSure(send: (m: InboxMessage) => Promise<unknown>, m: InboxMessage): Promise<void> {
  for (;;) {
    try {
      await send(m);
      return;
    } catch (err) {
      if (!hasCode(err, 'bus.publish_unknown')) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

it('20 agents through a LOGS leader kill and the kill of the host\'s own node: every turn completes, once', async () => {
  const sup = rt.supervisor();
  expect((await rt.bus.jsm.streams.info(STREAMS.logs)).config.num_replicas).toBe(3);
  const agents: Array<{ actorId: string; rootId: string; ws: string; first: Promise<TurnEnded>; second?: Promise<TurnEnded>; followUp: string }> = [];
  for (let i = 0; i < AGENTS; i++) {
    const ws = await tempDir('ws');
    workspaces.push(ws);
    const actorId = `agt_cluster_${i}_${Date.now().toString(36)}`;
    const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'append', workspace: ws, labels: {} });
    const first = actor.whenTurnEnds();
    first.catch(() => {});
    await sendSure((m) => sup.send(m), message(actorId, 'append eight lines', { request: turnRequest(ws) }));
    agents.push({ actorId, rootId: actor.rootId, ws, first, followUp: '' });
  }
  await new Promise((r) => setTimeout(r, 1_000));

  const leader = await cluster.streamLeader(STREAMS.logs);
  await cluster.kill(leader);
  // a follow-up for each agent while the leader is gone: none may be lost
  for (const a of agents) {
    const m = message(a.actorId, 'once more', { request: turnRequest(a.ws) });
    a.followUp = m.id;
    await sendSure((x) => sup.send(x), m);
  }
  await new Promise((r) => setTimeout(r, 2_000));
  await cluster.restart(leader);
  await cluster.waitHealthy();

  const connected = cluster.nodeAt(rt.bus.nc.getServer()).name;
  const secondKillAt = Date.now();
  await cluster.kill(connected);
  await new Promise((r) => setTimeout(r, 3_000));
  await cluster.restart(connected);

  const firsts = await Promise.all(agents.map((a) => a.first));
  for (const f of firsts) expect(f).toMatchObject({ outcome: 'completed' });
  // every follow-up was taken and answered in a turn of its own
  const deadline = Date.now() + 90_000;
  for (const a of agents) {
    for (;;) {
      const log = await readLog(sup, a.rootId, a.actorId).catch(() => null);
      if (log && ofType(log, 'turn/end').length >= 2) break;
      if (Date.now() > deadline) throw new Error(`the follow-up of ${a.actorId} was not answered`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  const lastEnds: number[] = [];
  for (const a of agents) {
    const log = await readLog(sup, a.rootId, a.actorId);
    lastEnds.push(Date.parse(log.at(-1)!.at));
    expect(verifyLog(log, { complete: true }), a.actorId).toEqual([]);
    expect(log.map((e) => e.seq)).toEqual(log.map((_e, i) => i + 1));
    expect(ofType(log, 'turn/end').map((e) => e.data.outcome)).toEqual(['completed', 'completed']);
    const received = ofType(log, 'inbox/received').map((e) => e.data.messageId);
    expect(received).toContain(a.followUp);
    expect(new Set(received).size).toBe(received.length);
    // each call ran exactly once, in order
    const want = Array.from({ length: CALLS }, (_, i) => `l${i}`);
    expect(runs.get(a.ws)).toEqual(want);
    expect((await readFile(join(a.ws, 'effects.log'), 'utf8')).split('\n').filter(Boolean)).toEqual(want);
    expect(ofType(log, 'tool/start')).toHaveLength(CALLS);
  }
  // the turns were still running when the host's own node died
  expect(Math.max(...lastEnds)).toBeGreaterThan(secondKillAt);
}, 170_000);
