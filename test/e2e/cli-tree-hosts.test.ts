// A tree of agents on `actorloop host` processes through a host's SIGKILL: the tree is handed to
// host A (the only host when it starts), A is killed while its three children run — or by its own
// fault right after a child's turn/end, its notice not sent — and host B, started once the tree
// runs on A, takes every agent of the tree over when A's leases lapse and finishes it: every
// child's notice arrives and is included once. Real processes, one nats-server of this file's
// own (hosts claim any agent with work on their server), a data dir per host. A foreground spawn
// survives the same kill: its call's result is the child's answer from the host that took over.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { AGENT_ID, type RunningCli } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { until } from '../helpers/processes.js';
import { readTreeState, treeViolations, type TreeState } from '../helpers/tree-logs.js';

const stack = useCliStack();
// a failed test's hosts die with it: one left running would take the next test's tree
afterEach(() => stack.pool.killAll());

/** Starts the CLI on the file's server in the background (killed after the file's tests). */
function startCli(args: string[], dataDir: string): RunningCli {
  return stack.fileCli(dataDir).start([...args, ...stack.flags(dataDir)]);
}

/** `actorloop host` with a 2 s lease TTL (a takeover comes soon after a kill), up once it says so. */
async function startHost(name: string, faults: string[] = []): Promise<RunningCli> {
  const dataDir = await stack.dir(`tree-${name}`);
  const h = startCli(['host', '--name', name, '--lease-ttl', '2000', ...faults.flatMap((f) => ['--fault', f])], dataDir);
  await until(`${name} up`, async () => h.stderr().includes('hosting agents'));
  return h;
}

function ofType<T extends ActorEvent['type']>(log: readonly ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

function describeTree(t: TreeState): string {
  return [...t.logs].map(([id, log]) => `${id}: ${log.map((e) => `${e.type}@${e.epoch}`).join(' ')}`).join('\n');
}

const NAMES = ['alpha', 'beta', 'gamma'];

/**
 * A root that spawns three background children in one step and waits for them; each child
 * answers after `delays[i]` ms (slow: the kill lands while they run).
 */
async function treeScript(delays: number[]): Promise<string> {
  const dir = await stack.dir('tree-script');
  const wait: ScriptResponse = { tool_calls: [{ name: 'wait_agents', arguments: { timeout_seconds: 60 } }] };
  const agents: Record<string, { responses: ScriptResponse[] }> = {
    main: {
      responses: [
        { tool_calls: NAMES.map((name) => ({ name: 'spawn_agent', arguments: { task: `${name}: look into your part`, name, mode: 'background' } })) },
        wait, wait, wait,
        { content: 'parent: merged alpha, beta and gamma' },
      ],
    },
  };
  NAMES.forEach((name, i) => (agents[name] = { responses: [{ content: `${name}: found it`, delay_ms: delays[i]! }] }));
  const script = join(dir, 'tree.json');
  await writeFile(script, JSON.stringify({ agents }));
  return script;
}

/** Hands a tree to the live hosts (`run` without --in-process) and returns the `run` following it, with the root's ID. */
async function handOver(script: string): Promise<{ run: RunningCli; rootId: string; dataDir: string }> {
  const [ws, dataDir] = [await stack.dir('tree-ws'), await stack.dir('tree-cli')];
  const run = startCli(['run', 'investigate with three helpers', '--model', `scripted:${script}`, '--approve', 'auto-edit', '--cwd', ws, '--json'], dataDir);
  const rootId = await until('the root ID', async () => {
    const id = run.stderr().split('\n')[0]!;
    return AGENT_ID.test(id) ? id : null;
  });
  return { run, rootId, dataDir };
}

/** What the takeover must leave: a verified tree, the root's turn completed, three notices each arrived and included once. */
function expectFinished(t: TreeState, epochA: number): void {
  expect(treeViolations(t), describeTree(t)).toEqual([]);
  const root = t.logs.get(t.rootId)!;
  expect(root.at(-1), describeTree(t)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  // the root was taken over too: the rest of its turn is a later incarnation's
  expect(ofType(root, 'recovery/continuation').length + ofType(root, 'actor/rehydrated').length).toBeGreaterThan(0);
  expect(root.at(-1)!.epoch).toBeGreaterThan(epochA);
  const children = [...t.logs].filter(([id]) => id !== t.rootId);
  expect(children.map(([, log]) => ofType(log, 'turn/start')[0]!.data.settings.agentName).sort()).toEqual(NAMES);
  const notices = ofType(root, 'inbox/received').filter((e) => e.data.kind === 'subagent_completed');
  for (const [childId, log] of children) {
    const notified = ofType(log, 'subagent/notified');
    expect(notified, describeTree(t)).toHaveLength(1);
    expect(ofType(log, 'turn/end')).toHaveLength(1);
    expect(notices.filter((n) => n.data.messageId === notified[0]!.data.messageId), childId).toHaveLength(1);
  }
  expect(notices).toHaveLength(3);
}

test('SIGKILL of the host running three children: the other host takes the tree over and finishes it, no notice lost or taken twice', async () => {
  const script = await treeScript([2_500, 2_500, 2_500]);
  const a = await startHost('tree-a');
  const { run, rootId, dataDir } = await handOver(script);
  // the tree runs on A alone; B comes up once every child's model call is open
  const before = await until('three children mid-turn on host A', async () => {
    const t = await readTreeState(stack.nats.url, dataDir, rootId);
    const kids = [...t.logs].filter(([id]) => id !== rootId);
    return kids.length === 3 && kids.every(([, log]) => log.some((e) => e.type === 'attempt/start')) ? t : null;
  });
  const epochA = before.logs.get(rootId)![0]!.epoch;
  // killed before B starts: a loaded machine's process start could outlast the children's answers
  a.child.kill('SIGKILL');
  await a.exited;
  const b = await startHost('tree-b');

  const t = await until('the root\'s turn to end under host B', async () => {
    const s = await readTreeState(stack.nats.url, dataDir, rootId);
    return s.logs.get(rootId)!.some((e) => e.type === 'turn/end') ? s : null;
  }, 45_000).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${describeTree(await readTreeState(stack.nats.url, dataDir, rootId))}\n--- host B\n${b.stderr().slice(-3000)}`);
  });
  expectFinished(t, epochA);
  // every child was mid-turn on A: each was recovered under B
  for (const [id, log] of t.logs) if (id !== rootId) expect(ofType(log, 'actor/killed'), id).toHaveLength(1);
  // the `run` that handed the tree over follows the root to its end across the takeover
  expect(await run.exited, run.stderr()).toEqual({ code: 0, signal: null });
  b.child.kill('SIGTERM');
  expect(await b.exited).toEqual({ code: 0, signal: null });
}, 90_000);

test('a host SIGKILLed right after a child\'s turn/end, its notice not sent: the other host takes the child over and sends it', async () => {
  // alpha ends first; the kill comes with its turn/end committed and its notice owed
  const script = await treeScript([300, 2_500, 2_500]);
  const a = await startHost('notice-a', ['after:turn/end']);
  const { run, rootId, dataDir } = await handOver(script);
  await until('host A killed by its fault', async () => a.child.signalCode === 'SIGKILL');
  const before = await readTreeState(stack.nats.url, dataDir, rootId);
  const epochA = before.logs.get(rootId)![0]!.epoch;
  const [alphaId, alpha] = [...before.logs].find(([, log]) => log.some((e) => e.type === 'turn/end'))!;
  expect(ofType(alpha, 'turn/end')[0]!.data.noticeOwed, describeTree(before)).toBe(true);
  expect(ofType(alpha, 'subagent/notified'), describeTree(before)).toEqual([]);
  const b = await startHost('notice-b');

  const t = await until('the root\'s turn to end under host B', async () => {
    const s = await readTreeState(stack.nats.url, dataDir, rootId);
    return s.logs.get(rootId)!.some((e) => e.type === 'turn/end') ? s : null;
  }, 45_000);
  expectFinished(t, epochA);
  // the owed notice was sent by the incarnation on B, with no turn run again
  const after = t.logs.get(alphaId)!;
  expect(ofType(after, 'subagent/notified')[0]!.epoch).toBeGreaterThan(ofType(after, 'turn/end')[0]!.epoch);
  expect(await run.exited, run.stderr()).toEqual({ code: 0, signal: null });
  b.child.kill('SIGTERM');
  expect(await b.exited).toEqual({ code: 0, signal: null });
}, 90_000);

test('foreground delegation across a SIGKILL of the host running the child mid-turn: the spawn call\'s result is the child\'s answer from the host that took over', async () => {
  const dir = await stack.dir('tree-script');
  const script = join(dir, 'foreground.json');
  await writeFile(script, JSON.stringify({
    agents: {
      main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'find it', name: 'worker', mode: 'foreground' } }] }, { content: 'parent: done' }] },
      worker: { responses: [{ content: 'worker: the answer', delay_ms: 2_500 }] },
    },
  }));
  const a = await startHost('fg-a');
  const { run, rootId, dataDir } = await handOver(script);
  const before = await until('the child\'s model call open on host A', async () => {
    const t = await readTreeState(stack.nats.url, dataDir, rootId);
    return [...t.logs].some(([id, log]) => id !== rootId && log.some((e) => e.type === 'attempt/start')) ? t : null;
  });
  const epochA = before.logs.get(rootId)![0]!.epoch;
  a.child.kill('SIGKILL');
  await a.exited;
  const b = await startHost('fg-b');
  const t = await until('the root\'s turn to end under host B', async () => {
    const s = await readTreeState(stack.nats.url, dataDir, rootId);
    return s.logs.get(rootId)!.some((e) => e.type === 'turn/end') ? s : null;
  }, 45_000);
  expect(treeViolations(t), describeTree(t)).toEqual([]);
  const root = t.logs.get(rootId)!;
  expect(root.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  expect(root.at(-1)!.epoch).toBeGreaterThan(epochA);
  const call = ofType(root, 'tool/call').find((e) => e.data.name === 'spawn_agent')!;
  const result = ofType(root, 'tool/result').filter((e) => e.call === call.call);
  expect(result).toHaveLength(1);
  expect(result[0]!.data.output).toContain('worker: the answer');
  expect(await run.exited, run.stderr()).toEqual({ code: 0, signal: null });
  b.child.kill('SIGTERM');
  expect(await b.exited).toEqual({ code: 0, signal: null });
}, 90_000);

test('a tree run in-process and SIGKILLed after its spawn, then `resume <root>` with a host running: the host takes the whole tree and finishes it', async () => {
  const dir = await stack.dir('tree-script');
  const script = join(dir, 'handover.json');
  await writeFile(script, JSON.stringify({
    agents: {
      main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'find it', name: 'worker', mode: 'foreground' } }] }, { content: 'parent: done' }] },
      worker: { responses: [{ content: 'worker: the answer', delay_ms: 500 }] },
    },
  }));
  const [ws, dataDir] = [await stack.dir('tree-ws'), await stack.dir('tree-cli')];
  // a fault keeps the run in-process: it hosts the root and its child, and dies with both
  const run = startCli(['run', 'delegate it', '--model', `scripted:${script}`, '--approve', 'auto-edit', '--cwd', ws, '--json', '--fault', 'after:subagent/spawned'], dataDir);
  expect(await run.exited, run.stderr()).toEqual({ code: null, signal: 'SIGKILL' });
  const rootId = run.stderr().split('\n')[0]!;
  expect(rootId).toMatch(AGENT_ID);
  const h = await startHost('handover-host');
  const resumed = startCli(['resume', rootId, '--json'], dataDir);
  expect(await resumed.exited, resumed.stderr()).toEqual({ code: 0, signal: null });
  const t = await readTreeState(stack.nats.url, dataDir, rootId);
  expect(treeViolations(t), describeTree(t)).toEqual([]);
  const root = t.logs.get(rootId)!;
  expect(root.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  const call = ofType(root, 'tool/call').find((e) => e.data.name === 'spawn_agent')!;
  expect(ofType(root, 'tool/result').find((e) => e.call === call.call)?.data.output).toContain('worker: the answer');
  // the root was taken on by a later incarnation than the killed run's, and its child ended too
  expect(root.at(-1)!.epoch).toBeGreaterThan(root[0]!.epoch);
  const child = [...t.logs].find(([id]) => id !== rootId)![1];
  expect(ofType(child, 'subagent/notified')).toHaveLength(1);
  h.child.kill('SIGTERM');
  expect(await h.exited).toEqual({ code: 0, signal: null });
}, 90_000);

test('a run given -c max_subagent_depth=1 and handed to a host: the host spawns under the run\'s limit, not its own, and a child cannot spawn', async () => {
  const dir = await stack.dir('tree-script');
  const script = join(dir, 'depth.json');
  await writeFile(script, JSON.stringify({
    agents: {
      main: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'go deeper', name: 'mid', mode: 'foreground' } }] }, { content: 'parent: done' }] },
      mid: { responses: [{ tool_calls: [{ name: 'spawn_agent', arguments: { task: 'deeper still', name: 'deep', mode: 'foreground' } }] }, { content: 'mid: could not go deeper' }] },
      deep: { responses: [{ content: 'deep: here' }] },
    },
  }));
  // the host runs with the default depth (3): only the run says 1
  const h = await startHost('depth-host');
  const [ws, dataDir] = [await stack.dir('tree-ws'), await stack.dir('tree-cli')];
  const run = startCli(['run', 'go deep', '--model', `scripted:${script}`, '--approve', 'auto-edit', '--cwd', ws, '-c', 'max_subagent_depth=1', '--json'], dataDir);
  const rootId = await until('the root ID', async () => {
    const id = run.stderr().split('\n')[0]!;
    return AGENT_ID.test(id) ? id : null;
  });
  expect(await run.exited, run.stderr()).toEqual({ code: 0, signal: null });
  const t = await until('the child\'s notice', async () => {
    const s = await readTreeState(stack.nats.url, dataDir, rootId);
    return [...s.logs.values()].some((l) => l.some((e) => e.type === 'subagent/notified')) ? s : null;
  });
  const root = t.logs.get(rootId)!;
  expect(ofType(root, 'turn/start')[0]!.data.settings.treeLimits).toMatchObject({ maxDepth: 1 });
  // the child at the depth limit got no spawn tools: its spawn_agent is an unknown tool, and nothing deeper exists
  expect(t.logs.size, describeTree(t)).toBe(2);
  const midId = ofType(root, 'subagent/spawned')[0]!.data.childId;
  const mid = t.logs.get(midId)!;
  expect(ofType(mid, 'turn/start')[0]!.data.settings.tools).not.toContain('spawn_agent');
  expect(ofType(mid, 'tool/call')[0]!.data.status).toBe('unknown_tool');
  h.child.kill('SIGTERM');
  expect(await h.exited).toEqual({ code: 0, signal: null });
}, 90_000);
