// Two host processes on one nats-server: an agent with work is claimed by one of them; SIGKILL
// that host mid-turn and the other takes the agent over once the lease lapses, recovers it and
// finishes the turn; the log verifies. Real processes, a real nats-server, separate data dirs
// (each host has its own LMDB: the second one rehydrates from the log alone).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { openBus } from '../../src/bus/connection.js';
import { createKvLeaseStore, type Lease } from '../../src/bus/leases.js';
import { Kvm } from '@nats-io/kv';
import { newId } from '../../src/protocol/ids.js';
import { DEMO_SCRIPT, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { until } from '../helpers/processes.js';
import { submitTask } from '../helpers/submit.js';

const stack = useCliStack();

/** Starts `actorloop host` in the background (killed after the file's tests); its stderr is kept for the failure message. */
function startHost(name: string, dataDir: string) {
  const h = stack.fileCli(dataDir).start(['host', '--name', name, '--lease-ttl', '2000', ...stack.flags(dataDir)]);
  return { child: h.child, stderr: h.stderr, exited: h.exited.then((e) => e.code) };
}

test('kill -9 the host running an agent mid-turn: the other host takes it over and finishes', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli);
  const common = stack.flags(dataCli);
  // the demo's script, slowed so a kill lands mid-turn
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<Record<string, unknown>> };
  const script = join(ws, '..', `slow-${newId('message')}.json`);
  await writeFile(script, JSON.stringify({ responses: demo.responses.map((r) => ({ ...r, delay_ms: 400 })) }));
  stack.remove(script);

  const a = startHost('host-a', dataA);
  const b = startHost('host-b', dataB);
  await until('both hosts up', async () => a.stderr().includes('hosting agents') && b.stderr().includes('hosting agents'));

  const agentId = await submit(dataCli, ws, script);

  const events = async () => parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  // one host claims the agent and runs a few steps
  const firstEpochEvents = await until('the turn under way', async () => {
    const log = await events();
    return log.filter((e) => e.type === 'step/start').length >= 2 ? log : null;
  });
  const epoch1 = firstEpochEvents[0]!.epoch;
  // which host holds the agent: its lease says (the epoch of the log is the lease revision)
  const lease = await leaseOf(agentId, dataCli);
  const holder = lease?.host;
  // renewals move the revision on; the log keeps the revision the lease was taken at
  expect(lease?.epoch).toBeGreaterThanOrEqual(epoch1);
  expect(['host-a', 'host-b']).toContain(holder);
  const victim = holder === 'host-a' ? a : b;
  const survivor = victim === a ? b : a;
  victim.child.kill('SIGKILL');
  await victim.exited;

  // the survivor takes over after the lease lapses, recovers and finishes
  const log = await until('the turn to end', async () => {
    const l = await events();
    return l.some((e) => e.type === 'turn/end') ? l : null;
  }, 30_000);
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  const later = log.filter((e) => e.epoch > epoch1);
  expect(later.length, survivor.stderr()).toBeGreaterThan(0);
  expect(later.map((e) => e.type)).toContain('recovery/continuation');
  // the survivor notes the kill first; no fault named a point, and its data dir has no record anyway
  expect(later[0]).toMatchObject({
    type: 'actor/killed',
    data: { point: null, detectedBy: 'recovery found open work and no actor/released', epoch: epoch1, lastSeq: later[0]!.seq - 1 },
  });
  // epochs never go back: everything after the takeover carries the new epoch
  const firstLater = log.findIndex((e) => e.epoch > epoch1);
  expect(log.slice(firstLater).every((e) => e.epoch > epoch1)).toBe(true);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
  expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toContain('/\\s+/g');

  // SIGTERM drains the survivor: it exits 0
  survivor.child.kill('SIGTERM');
  expect(await survivor.exited).toBe(0);
}, 90_000);

test('a zombie host (SIGSTOP past its lease) is fenced: the other host takes over, the zombie starts nothing and stops the agent', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli);
  const common = stack.flags(dataCli);
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<Record<string, unknown>> };
  const script = join(ws, '..', `slow-${newId('message')}.json`);
  await writeFile(script, JSON.stringify({ responses: demo.responses.map((r) => ({ ...r, delay_ms: 500 })) }));
  stack.remove(script);
  const a = startHost('zombie-a', dataA);
  const b = startHost('zombie-b', dataB);
  await until('both hosts up', async () => a.stderr().includes('hosting agents') && b.stderr().includes('hosting agents'));
  const agentId = await submit(dataCli, ws, script);
  const events = async () => parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  const before = await until('the turn under way', async () => {
    const log = await events();
    return log.filter((e) => e.type === 'step/start').length >= 2 ? log : null;
  });
  const epoch1 = before[0]!.epoch;
  const holder = (await leaseOf(agentId, dataCli))?.host;
  const zombie = holder === 'zombie-a' ? a : b;
  const survivor = zombie === a ? b : a;

  zombie.child.kill('SIGSTOP');
  // the survivor takes over once the lease lapses and runs the turn to its end
  const log = await until('the turn to end under the survivor', async () => {
    const l = await events();
    return l.some((e) => e.type === 'turn/end') ? l : null;
  }, 30_000);
  expect(log.some((e) => e.epoch > epoch1)).toBe(true);
  zombie.child.kill('SIGCONT');
  // the zombie learns its lease is gone (or its next append is refused) and stops the agent
  await until('the zombie to stop the agent', async () => /lease lost|another writer appended/.test(zombie.stderr()), 15_000);
  const after = await events();
  // nothing from the zombie after the takeover: every later event carries the new epoch
  const firstLater = after.findIndex((e) => e.epoch > epoch1);
  expect(after.slice(firstLater).every((e) => e.epoch > epoch1)).toBe(true);
  expect(after.length).toBe(log.length);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
  for (const h of [survivor, zombie]) h.child.kill('SIGTERM');
  expect(await survivor.exited).toBe(0);
  expect(await zombie.exited).toBe(0);
}, 90_000);

test('SIGTERM drains a host mid-turn: it commits actor/released, and the agent resumed after it notes no kill', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const [dataA, dataCli] = [await stack.dir('host-a'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli);
  const common = stack.flags(dataCli);
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<Record<string, unknown>> };
  const script = join(ws, '..', `slow-${newId('message')}.json`);
  // slow enough that the turn is still open when the drain lands, even on a loaded machine
  await writeFile(script, JSON.stringify({ responses: demo.responses.map((r) => ({ ...r, delay_ms: 1_500 })) }));
  stack.remove(script);
  const a = startHost('drain-a', dataA);
  await until('the host up', async () => a.stderr().includes('hosting agents'));
  const agentId = await submit(dataCli, ws, script);
  const events = async () => parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  await until('the turn under way', async () => ((await events()).filter((e) => e.type === 'step/start').length >= 2 ? true : null));

  a.child.kill('SIGTERM');
  expect(await a.exited, a.stderr()).toBe(0);
  const drained = await events();
  expect(drained.some((e) => e.type === 'turn/end')).toBe(false);
  expect(drained.at(-1)).toMatchObject({ type: 'actor/released', data: { reason: 'host drain-a drained' } });

  // the lease was released: resume takes the agent at once and finishes the turn
  const resumed = await cli.run(['resume', agentId, '--json', ...common]);
  expect(resumed.code, show(resumed)).toBe(0);
  const log = await events();
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  expect(log.filter((e) => e.type === 'actor/killed')).toEqual([]);
  expect(log.filter((e) => e.type === 'actor/released')).toHaveLength(1);
  expect(log.filter((e) => e.type === 'recovery/started')).toHaveLength(1);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
}, 90_000);

/** Submits work the way a client does: a directory entry and a message in the agent's inbox. */
function submit(dataDir: string, ws: string, script: string): Promise<string> {
  return submitTask({ natsUrl: stack.nats.url, dataDir, ws, model: `scripted:${script}` });
}

/** The live lease on the agent: which host holds it, at which revision. */
async function leaseOf(agentId: string, dataDir: string): Promise<Lease | null> {
  const probe = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  try {
    const leases = createKvLeaseStore(await new Kvm(probe.js).open('leases'), { ttlMs: 2_000 });
    return await leases.get(agentId, Date.now());
  } finally {
    await probe.close();
  }
}
