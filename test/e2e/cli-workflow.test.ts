// Workflow runs from the CLI, on real processes and a real nats-server: a bad file is refused
// before anything is written (exit 2, no directory entry); a run handed to a host that is
// SIGKILLed right after node a's end is committed is taken over by another host from its log,
// which runs b and c once each and never a again (each node's command appends a line to a file).
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { openBus } from '../../src/bus/connection.js';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { createLogReader } from '../../src/store/jetstream-log.js';
import { show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { until } from '../helpers/processes.js';

const stack = useCliStack();

async function withProbe<T>(dataDir: string, fn: (bus: Awaited<ReturnType<typeof openBus>>) => Promise<T>): Promise<T> {
  const probe = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  try {
    return await fn(probe);
  } finally {
    await probe.close();
  }
}

const workflows = (dataDir: string): Promise<DirectoryEntry[]> =>
  withProbe(dataDir, async (b) => (await b.directory.list()).filter((e) => e.kind === 'workflow'));

const logOf = (runId: string, dataDir: string): Promise<ActorEvent[]> =>
  withProbe(dataDir, async (b) => {
    const out: ActorEvent[] = [];
    for await (const { event } of createLogReader({ js: b.js, jsm: b.jsm }).read(runId, runId)) out.push(event);
    return out;
  });

const lines = async (p: string): Promise<string[]> => (await readFile(p, 'utf8').catch(() => '')).split('\n').filter(Boolean);

test('a cycle, an unknown need, a node without run: a clear error naming node and field, exit 2, nothing started', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('cli');
  const cli = stack.cli(onTestFinished, dataDir);
  const bad: Array<[string, unknown, RegExp]> = [
    ['cycle', [{ id: 'a', run: 'shell', command: 'true', needs: ['b'] }, { id: 'b', run: 'shell', command: 'true', needs: ['a'] }], /node a: needs form a cycle a → b → a/],
    ['unknown', [{ id: 'a', run: 'shell', command: 'true', needs: ['nope'] }], /node a: needs names nope, which is not a node of this workflow/],
    ['norun', [{ id: 'a', command: 'true' }], /node a: run is missing/],
  ];
  for (const [name, nodes, message] of bad) {
    const file = join(ws, `${name}.json`);
    await writeFile(file, JSON.stringify({ name, nodes }));
    const r = await cli.run(['workflow', 'run', file, '--cwd', ws, ...stack.flags(dataDir)]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).toContain(`${name}.json`);
    expect(r.stdout).toBe('');
  }
  expect(await workflows(dataDir)).toEqual([]);
}, 60_000);

test('the policy holds inside a workflow: a node the rules deny, or one that would ask under --approve: exit 2 naming it, nothing started', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('cli');
  const cli = stack.cli(onTestFinished, dataDir);
  // a workspace's actorloop.toml may add deny rules even untrusted
  await writeFile(join(ws, 'actorloop.toml'), '[[policy.rules]]\ncommand = "git push"\ndecision = "deny"\nreason = "pushing is for people"\n');
  const file = join(ws, 'push.json');
  await writeFile(file, JSON.stringify({ name: 'push', nodes: [{ id: 'a', run: 'shell', command: 'true' }, { id: 'p', run: 'shell', command: 'git push', needs: ['a'] }] }));
  const denied = await cli.run(['workflow', 'run', file, '--cwd', ws, '--approve', 'full-auto', ...stack.flags(dataDir)]);
  expect(denied.code, show(denied)).toBe(2);
  expect(denied.stderr).toContain("push.json: node p's command is denied as a shell call would be: denied by policy rule 1 (pushing is for people)");
  const plain = join(ws, 'plain.json');
  await writeFile(plain, JSON.stringify({ name: 'plain', nodes: [{ id: 'a', run: 'shell', command: 'true' }] }));
  const asks = await cli.run(['workflow', 'run', plain, '--cwd', ws, '--approve', 'auto-edit', ...stack.flags(dataDir)]);
  expect(asks.code, show(asks)).toBe(2);
  expect(asks.stderr).toContain("node a's command would ask for approval");
  expect(asks.stderr).toContain('--approve full-auto');
  expect(asks.stdout).toBe('');
  expect(await workflows(dataDir)).toEqual([]);
}, 60_000);

test('kill -9 the host running a workflow right after a ended: another host runs b and c once each, never a again', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const [dataA, dataB, dataCli] = [await stack.dir('host-a'), await stack.dir('host-b'), await stack.dir('cli')];
  const file = join(ws, '..', `three-${Date.now()}.json`);
  stack.remove(file);
  const cmd = (n: string) => `echo run >> ${n}.txt`;
  await writeFile(file, JSON.stringify({
    name: 'three',
    nodes: [
      { id: 'a', run: 'shell', command: cmd('a') },
      { id: 'b', run: 'shell', command: cmd('b'), needs: ['a'] },
      { id: 'c', run: 'shell', command: cmd('c'), needs: ['a'] },
    ],
  }));
  // host A dies at the first node/ended it commits (a's): b and c are not started yet
  const hostA = stack.fileCli(dataA, { ACTORLOOP_FAULTS: 'after:node/ended' }).start(['host', '--name', 'host-a', '--lease-ttl', '2000', ...stack.flags(dataA)]);
  let hostB: ReturnType<ReturnType<typeof stack.fileCli>['start']> | null = null;
  onTestFinished(async () => {
    hostA.child.kill('SIGKILL');
    hostB?.child.kill('SIGKILL');
    await Promise.all([hostA.exited, hostB?.exited]);
  });
  await until('host A up', async () => hostA.stderr().includes('hosting agents'));
  const cli = stack.cli(onTestFinished, dataCli);
  const run = cli.start(['workflow', 'run', file, '--cwd', ws, '--approve', 'full-auto', ...stack.flags(dataCli)]);
  const runId = await until('the run ID', async () => /^(wf_\w+)$/m.exec(run.stdout())?.[1] ?? null);
  const killed = await hostA.exited;
  expect(killed.signal, hostA.stderr()).toBe('SIGKILL');
  const atKill = await logOf(runId, dataCli);
  expect(atKill.filter((e) => e.type === 'node/ended').map((e) => (e.data as { node: string }).node)).toEqual(['a']);
  expect(atKill.filter((e) => e.type === 'node/started').map((e) => (e.data as { node: string }).node)).toEqual(['a']);
  expect(await lines(join(ws, 'a.txt'))).toEqual(['run']);
  hostB = stack.fileCli(dataB).start(['host', '--name', 'host-b', '--lease-ttl', '2000', ...stack.flags(dataB)]);
  const done = await run.exited;
  expect(done.code, `${run.stdout()}\n${run.stderr()}\n${hostB.stderr()}`).toBe(0);
  for (const n of ['a', 'b', 'c']) expect(await lines(join(ws, `${n}.txt`)), n).toEqual(['run']);
  const log = await logOf(runId, dataCli);
  expect(log.filter((e) => e.type === 'node/started').map((e) => (e.data as { node: string }).node).sort()).toEqual(['a', 'b', 'c']);
  expect(log.filter((e) => e.type === 'node/ended').map((e) => (e.data as { node: string }).node)).toHaveLength(3);
  expect(log.at(-1)).toMatchObject({ type: 'workflow/ended', data: { outcome: 'succeeded', failed: [] } });
  // the nodes after the kill were run by the next holder, under a higher epoch
  const bStart = log.find((e) => e.type === 'node/started' && (e.data as { node: string }).node === 'b')!;
  expect(bStart.epoch).toBeGreaterThan(atKill.at(-1)!.epoch);
  const status = await cli.run(['workflow', runId, '--json', ...stack.flags(dataCli)]);
  expect(status.code, show(status)).toBe(0);
  const view = JSON.parse(status.stdout) as { status: string; nodes: Array<{ id: string; status: string; attempt: number; jobId: string }> };
  expect(view.status).toBe('succeeded');
  expect(view.nodes.map((n) => [n.id, n.status, n.attempt])).toEqual([['a', 'succeeded', 1], ['b', 'succeeded', 1], ['c', 'succeeded', 1]]);
  expect(await workflows(dataCli)).toMatchObject([{ actorId: runId, status: 'completed' }]);
}, 120_000);

test('workflow <runId> --cancel stops a running run: its running node\'s job is cancelled, the rest skipped, workflow run exits 1', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('cli');
  const cli = stack.cli(onTestFinished, dataDir);
  const file = join(ws, 'long.json');
  await writeFile(file, JSON.stringify({ name: 'long', nodes: [{ id: 'a', run: 'shell', command: 'sleep 30.0451' }, { id: 'b', run: 'shell', command: 'echo run >> b.txt', needs: ['a'] }] }));
  const run = cli.start(['workflow', 'run', file, '--cwd', ws, '--approve', 'full-auto', '--in-process', '--json', ...stack.flags(dataDir)]);
  const runId = await until('the run ID', async () => /^(wf_\w+)$/m.exec(run.stderr())?.[1] ?? null);
  await until('a running', async () => (await logOf(runId, dataDir)).some((e) => e.type === 'node/started'));
  const cancel = await cli.run(['workflow', runId, '--cancel', ...stack.flags(dataDir)]);
  expect(cancel.code, show(cancel)).toBe(0);
  expect(cancel.stdout).toMatch(new RegExp(`^cancel sent to ${runId} \\(msg_\\w+\\)`));
  const done = await run.exited;
  expect(done.code, `${run.stdout()}\n${run.stderr()}`).toBe(1);
  const log = await logOf(runId, dataDir);
  expect(log.at(-1)).toMatchObject({ type: 'workflow/ended', data: { outcome: 'cancelled' } });
  await expect(readFile(join(ws, 'b.txt'), 'utf8')).rejects.toThrow();
  const again = await cli.run(['workflow', runId, '--cancel', ...stack.flags(dataDir)]);
  expect(again.code, show(again)).toBe(0);
  expect(again.stderr).toContain('already ended cancelled: nothing to cancel');
}, 60_000);
