// Where the agent machine waits for two approvals of one step, end to end: a real nats-server, a
// real `actorloop host` process running a scripted agent, the gateway in-process. The model asks
// for two writes in one step; each needs a person's approval. After every event of the log (the
// gateway's fold) and after every event the host's XState actor took (its live inspection, relayed
// by `machines.subscribe`), the agent machine must be in `turn.waiting_approval` while either
// approval is open and back in `turn.running` once both are answered, and the two must agree.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { followInspection } from '../../src/bus/inspection.js';
import { activeStates } from '../../src/server/machine-states.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent, pendingApprovals } from '../../src/store/projection.js';
import { tempDir } from '../helpers/nats.js';
import { openGatewayFixture, RpcClient, until, type GatewayFixture } from './gateway-fixture.js';

const usage = { input_tokens: 30, output_tokens: 5 };
const SCRIPT = {
  responses: [
    // the first turn only makes the agent, so the watch is on before anything is asked
    { content: 'ready', usage },
    {
      tool_calls: [
        { name: 'write_file', arguments: { path: 'one.txt', content: '1\n' } },
        { name: 'write_file', arguments: { path: 'two.txt', content: '2\n' } },
      ],
      usage,
    },
    { content: 'wrote both', usage },
  ],
};
/** Signals the host's actor takes that are not log events. */
const SIGNALS = new Set(['tick', 'recover', 'abort']);

let fx: GatewayFixture;
let rpc: RpcClient;
let ws: string;
let model: string;

beforeAll(async () => {
  fx = await openGatewayFixture();
  await fx.host('wait-host');
  // the hosts' live inspection, heard on the fixture's server, as `actorloop serve` wires it
  const gw = await fx.gateway({ inspection: { follow: (target, signal, onReport) => followInspection(fx.rt.bus.nc, target, { signal, onReport, logger: pino({ level: 'silent' }) }) } });
  rpc = await RpcClient.open(`${gw.url.replace('http', 'ws')}/v1/rpc`);
  ws = await tempDir('wait-ws');
  const scripts = await tempDir('wait-scripts');
  fx.dirs.push(ws, scripts);
  const file = join(scripts, 'two-writes.json');
  await writeFile(file, JSON.stringify(SCRIPT));
  model = `scripted:${file}`;
}, 60_000);

afterAll(async () => {
  await rpc?.close();
  await fx?.stop();
}, 60_000);

async function logOf(agentId: string): Promise<ActorEvent[]> {
  const out: ActorEvent[] = [];
  for await (const { event } of fx.rt.reader.read(agentId, agentId)) out.push(event);
  return out;
}

const agentOf = (t: { params: { active: Record<string, string> } }) => t.params.active.agent;

test('two approvals in one step: turn.waiting_approval while either is open, turn.running once both are answered, in the log\'s fold and the host\'s live report alike', async () => {
  const { agentId } = await rpc.call('turn.submit', { task: 'get ready', model, cwd: ws, approve: 'ask' });
  await until('the first turn to end', async () => (await rpc.call('actor.inspect', { agentId })).lastTurn?.outcome === 'completed', 30_000);
  const before = (await logOf(agentId)).length;

  const { subscription } = await rpc.call('machines.subscribe', { agentIds: [agentId] });
  const transitions = () => rpc.notifications.filter((n) => n.method === 'machines.transition' && n.params.subscription === subscription);
  const hello = await until('the host to report the watched actor', () => transitions().find((t) => t.params.eventType === null));
  expect(agentOf(hello)).toBe('idle');
  // what the host's actor took after the hello (log events; signals such as a timer's tick aside)
  const live = () => transitions().filter((t) => t.params.eventType !== null && !SIGNALS.has(t.params.eventType));

  await rpc.call('turn.submit', { agentId, task: 'write one.txt and two.txt', model, cwd: ws, approve: 'ask' });
  const detail = await until('both approvals to be asked', async () => {
    const d = await rpc.call('actor.inspect', { agentId });
    return d.pendingApprovals.length === 2 && d.actor.status === 'waiting' ? d : null;
  }, 30_000);
  const [first, second] = detail.pendingApprovals as Array<{ approvalId: string }>;
  await until('the host to report both requests', () => live().filter((t) => t.params.eventType === 'approval/requested').length === 2);
  expect(agentOf(live().at(-1)!)).toBe('turn.waiting_approval');

  await rpc.call('approval.respond', { agentId, approvalId: first!.approvalId, decision: 'approve' });
  const granted = await until('the host to take the first grant', () => live().find((t) => t.params.eventType === 'approval/granted'));
  // one approval is still open: the turn still waits
  expect(agentOf(granted)).toBe('turn.waiting_approval');
  await rpc.call('approval.respond', { agentId, approvalId: second!.approvalId, decision: 'approve' });
  await until('the host to report the turn\'s end', () => live().find((t) => t.params.eventType === 'turn/end'), 30_000);
  expect((await rpc.call('actor.inspect', { agentId })).lastTurn.outcome).toBe('completed');

  // the log, folded one event at a time as the gateway reads it
  const log = await logOf(agentId);
  const p = emptyProjection(agentId);
  const folded: Array<{ event: ActorEvent; agent: string; open: number; inTurn: boolean }> = [];
  for (const e of log) {
    foldEvent(p, structuredClone(e));
    folded.push({ event: e, agent: activeStates(p).agent!, open: pendingApprovals(p).length, inTurn: p.openTurn !== null });
  }
  for (const f of folded) expect(f.agent === 'turn.waiting_approval', `${f.event.type} at seq ${f.event.seq}`).toBe(f.open > 0);
  const requestedAt = folded.filter((f) => f.event.type === 'approval/requested').map((f) => f.event.seq);
  const grantedAt = folded.filter((f) => f.event.type === 'approval/granted').map((f) => f.event.seq);
  expect(requestedAt).toHaveLength(2);
  expect(grantedAt).toHaveLength(2);
  // from the first request to the last grant it waits; at the last grant it runs again
  for (const f of folded.filter((x) => x.event.seq >= requestedAt[0]! && x.event.seq < grantedAt[1]!)) expect(f.agent).toBe('turn.waiting_approval');
  expect(folded.find((f) => f.event.seq === grantedAt[1])!.agent).toBe('turn.running');
  expect(folded.find((f) => f.event.seq === grantedAt[0])!.agent).toBe('turn.waiting_approval');

  // the host's actor took the log's events of the second turn, in the log's order, one report each
  const after = folded.slice(before);
  const reports = live();
  expect(reports.map((t) => t.params.eventType)).toEqual(after.map((f) => f.event.type));
  // and after each, its agent machine was where the log's fold says (in a turn: out of one the
  // machine also knows `claiming`, which the committed events alone do not name)
  for (const [i, f] of after.entries()) {
    const got = agentOf(reports[i]!);
    if (f.inTurn || f.event.type === 'turn/end') expect(got, `${f.event.type} at seq ${f.event.seq}`).toBe(f.agent);
    if (f.open > 0) expect(got).toBe('turn.waiting_approval');
  }
  expect(reports.map(agentOf)).toContain('turn.waiting_approval');
  // at the end, the live report and the fold agree
  expect(agentOf(reports.at(-1)!)).toBe('idle');
  expect(folded.at(-1)!.agent).toBe('idle');

  await rpc.call('machines.unsubscribe', { subscription });
}, 120_000);
