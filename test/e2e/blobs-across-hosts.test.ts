// What a log names outlives the host that wrote it. Two `actorloop host` processes with data dirs
// of their own (each its own LMDB) on one nats-server: host A runs a turn whose first step writes
// a 100 KB file (its `write_file` arguments, over 64 KiB of model output, go to the blob store)
// and whose second reads it back (an output over the observation budget: an artifact); A is
// SIGKILLed in step 3; host B takes the agent over, reads the artifact back (`artifact_read`)
// and finishes the turn; `verify` from a third data dir passes. The same turn with the data dir's
// LMDB deleted before `resume` finishes too. Real processes, a real server, real LMDB.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { parseEvents, show, type CliProcesses } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { until } from '../helpers/processes.js';
import { submitTask } from '../helpers/submit.js';

const stack = useCliStack();

/** 100 KB of numbered lines: the file step 1 writes and step 2 reads. */
const BIG = Array.from({ length: 2_000 }, (_, i) => `line ${String(i).padStart(4, '0')} ${'x'.repeat(40)}`).join('\n') + '\n';

/** Steps 1 and 2 of the turn; step 3's response is a slow one the first host dies in. */
function firstSteps(): Array<Record<string, unknown>> {
  return [
    { tool_calls: [{ id: 'call_write', name: 'write_file', arguments: { path: 'big.txt', content: BIG } }] },
    { tool_calls: [{ id: 'call_read', name: 'read_file', arguments: { path: 'big.txt' } }] },
  ];
}

/** The rest of the script once the artifact's ID is known: read it back, then answer. */
function lastSteps(artifactId: string): Array<Record<string, unknown>> {
  return [
    { tool_calls: [{ id: 'call_artifact', name: 'artifact_read', arguments: { id: artifactId, grep: 'line 1999' } }] },
    { content: 'The file holds 2,000 lines.' },
  ];
}

/** The result of the call the model named `providerId` (the log's call IDs are the runtime's). */
function resultOf(log: ActorEvent[], providerId: string): Extract<ActorEvent, { type: 'tool/result' }> | undefined {
  const call = log.find((e) => e.type === 'tool/call' && e.data.providerId === providerId)?.call;
  return log.find((e): e is Extract<ActorEvent, { type: 'tool/result' }> => e.type === 'tool/result' && call !== undefined && e.call === call);
}

/** Runtime call IDs of the calls the model named `providerId`. */
function callsOf(log: ActorEvent[], providerId: string): string[] {
  return log.flatMap((e) => (e.type === 'tool/call' && e.data.providerId === providerId && e.call ? [e.call] : []));
}

/** The artifact step 2's read left, from the log. */
function artifactOf(log: ActorEvent[]): string {
  const read = resultOf(log, 'call_read');
  const id = read?.data.artifact?.id;
  if (!id) throw new Error(`step 2's read left no artifact: ${JSON.stringify(read)}`);
  return id;
}

/** The turn after a takeover or a resume: it completed, the artifact read back, the file whole. */
async function expectFinished(log: ActorEvent[], ws: string): Promise<void> {
  expect(log.at(-1), JSON.stringify(log.slice(-3))).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'The file holds 2,000 lines.' } });
  const readBack = resultOf(log, 'call_artifact');
  expect(readBack?.data).toMatchObject({ ok: true });
  expect(readBack!.data.output).toContain('line 1999');
  expect(log.filter((e) => e.type === 'actor/stopped' || (e.type === 'turn/end' && e.data.outcome === 'failed'))).toEqual([]);
  expect(await readFile(join(ws, 'big.txt'), 'utf8')).toBe(BIG);
  // the write ran once: one tool/start of it in the whole log
  const writes = callsOf(log, 'call_write');
  expect(writes).toHaveLength(1);
  expect(log.filter((e) => e.type === 'tool/start' && e.call === writes[0])).toHaveLength(1);
}

async function eventsOf(cli: CliProcesses, agentId: string, common: string[]): Promise<ActorEvent[]> {
  return parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
}

test('a host with another data dir takes over a turn whose model output and artifact the first host stored: it finishes, and verify passes from a third data dir', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const cli = stack.cli(onTestFinished, dataCli);
  const common = stack.flags(dataCli);
  const script = join(dataCli, 'script.json');
  // step 3 waits long enough for the kill; the host that takes over reads the script again
  await writeFile(script, JSON.stringify({ responses: [...firstSteps(), { content: 'never sent', delay_ms: 60_000 }] }));

  const a = stack.cli(onTestFinished, dataA).start(['host', '--name', 'blob-a', '--lease-ttl', '4000', ...stack.flags(dataA)]);
  await a.waitFor(/hosting agents/);
  const agentId = await submitTask({ natsUrl: stack.nats.url, dataDir: dataCli, ws, model: `scripted:${script}`, task: 'write and read a big file' });
  const early = await until('step 3 under way on host A', async () => {
    const log = await eventsOf(cli, agentId, common);
    return log.some((e) => e.type === 'attempt/start' && log.filter((s) => s.type === 'step/start').length >= 3) ? log : null;
  }, 60_000);
  a.child.kill('SIGKILL');
  await a.exited;
  await writeFile(script, JSON.stringify({ responses: [...firstSteps(), ...lastSteps(artifactOf(early))] }));

  // B never saw A's LMDB: everything the log names comes from the bus
  const b = stack.cli(onTestFinished, dataB).start(['host', '--name', 'blob-b', '--lease-ttl', '4000', ...stack.flags(dataB)]);
  const log = await until(() => `the turn to end on host B\n${b.stderr()}`, async () => {
    const l = await eventsOf(cli, agentId, common);
    // a blob the host cannot find stops the agent for good (said on its stderr): no use waiting on
    if (b.stderr().includes('store.blob_missing')) throw new Error(`host B stopped the agent:\n${b.stderr()}`);
    return l.some((e) => e.type === 'turn/end') ? l : null;
  }, 60_000);
  await expectFinished(log, ws);
  expect(log.some((e) => e.type === 'recovery/continuation')).toBe(true);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
  b.child.kill('SIGTERM');
  expect((await b.exited).code, b.stderr()).toBe(0);
}, 150_000);

test('the data dir\'s LMDB deleted after a kill mid-turn: resume finishes the turn from the log and the bus\'s blobs', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [...firstSteps(), { content: 'never sent' }] }));
  // killed as step 3 starts: steps 1 and 2 (the big write, the read) are committed
  const run = await cli.run(['run', 'write and read a big file', '--model', `scripted:${script}`, '--cwd', ws, '--approve', 'auto-edit', '--fault', 'after:step/start@3', ...common], { timeoutMs: 60_000 });
  expect(run.signal, show(run)).toBe('SIGKILL');
  const agentId = run.stdout.split('\n')[0]!;
  await writeFile(script, JSON.stringify({ responses: [...firstSteps(), ...lastSteps(artifactOf(await eventsOf(cli, agentId, common)))] }));

  await rm(join(dataDir, 'lmdb'), { recursive: true, force: true });
  const resumed = await cli.run(['resume', agentId, '--json', ...common], { timeoutMs: 60_000 });
  expect(resumed.code, show(resumed)).toBe(0);
  await expectFinished(await eventsOf(cli, agentId, common), ws);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
}, 150_000);
