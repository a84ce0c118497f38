// A tree of agents through kills, with real processes: the parent SIGKILLed between its spawn's
// two commits and after them, then `resume <root>` hosts the tree and it completes with one child
// per request; a parent killed after taking a child's notice and before its ack includes the
// notice once; the process hosting a child mid-turn killed under a foreground delegation, and the
// spawn call's result is still the child's answer; the host running three children killed, and a
// second host takes the tree over with every notice arriving and included once. Each tree is
// checked across its logs (test/helpers/tree-logs.ts) and each log by `verify`'s checks.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { AGENT_ID, lines, show, type RunningCli } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { until } from '../helpers/processes.js';
import { readTreeState, treeViolations, type TreeState } from '../helpers/tree-logs.js';

const stack = useCliStack();

const spawnCall = (name: string, mode: 'foreground' | 'background'): ScriptResponse => ({
  tool_calls: [{ name: 'spawn_agent', arguments: { task: `${name}: say what you found`, name, mode } }],
});
const answer = (content: string, delayMs = 0): ScriptResponse => ({ content, ...(delayMs > 0 ? { delay_ms: delayMs } : {}) });

/** A workspace, a data dir and a script of agents by name, for one test. */
async function setup(onTestFinished: (fn: () => Promise<void>) => void, agents: Record<string, ScriptResponse[]>) {
  const ws = await stack.dir('tree-ws');
  const dataDir = await stack.dir('tree-data');
  const script = join(dataDir, 'tree.json');
  await writeFile(script, JSON.stringify({ agents: Object.fromEntries(Object.entries(agents).map(([n, responses]) => [n, { responses }])) }));
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  const run = ['run', 'investigate with helpers', '--model', `scripted:${script}`, '--approve', 'auto-edit', '--cwd', ws, '--json'];
  return { ws, dataDir, cli, common, run };
}

/** Starts the CLI in the background (to be killed from outside; else after the file's tests), keeping what it writes. */
function startCli(args: string[], dataDir: string): RunningCli {
  return stack.fileCli(dataDir).start(args);
}

function ofType<T extends ActorEvent['type']>(log: readonly ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/** The tree's children (every log but the root's). */
function childLogs(t: TreeState): ActorEvent[][] {
  return [...t.logs].filter(([id]) => id !== t.rootId).map(([, log]) => log);
}

/** The tree as a failure message shows it: each log's event types. */
function describeTree(t: TreeState): string {
  return [...t.logs].map(([id, log]) => `${id}: ${log.map((e) => e.type).join(' ')}`).join('\n');
}

function rootOf(stderr: string): string {
  const id = lines(stderr)[0] ?? '';
  expect(id, stderr).toMatch(AGENT_ID);
  return id;
}

/** The output of the root's spawn_agent call (a foreground spawn's result is the child's answer). */
function spawnResult(root: readonly ActorEvent[]): string | null {
  const call = ofType(root, 'tool/call').find((e) => e.data.name === 'spawn_agent');
  const result = ofType(root, 'tool/result').findLast((e) => e.call === call?.call);
  return result?.data.output ?? null;
}

describe.concurrent('a tree through kills, in-process', () => {
  test.for(['after:subagent/spawn_requested', 'after:subagent/spawned'])(
    'SIGKILL at %s, then resume <root>: the tree completes with exactly one child for the request',
    { timeout: 90_000 },
    async (fault, { onTestFinished }) => {
      const s = await setup(onTestFinished, { main: [spawnCall('worker', 'foreground'), answer('parent: done')], worker: [answer('worker: found it')] });
      const crashed = await s.cli.run([...s.run, '--fault', fault, ...s.common]);
      expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
      const rootId = rootOf(crashed.stderr);
      const before = await readTreeState(stack.nats.url, s.dataDir, rootId);
      expect(ofType(before.logs.get(rootId)!, 'subagent/spawn_requested')).toHaveLength(1);
      expect(ofType(before.logs.get(rootId)!, 'subagent/spawned')).toHaveLength(fault === 'after:subagent/spawned' ? 1 : 0);

      const resumed = await s.cli.run(['resume', rootId, '--json', ...s.common]);
      expect(resumed.code, show(resumed)).toBe(0);
      const t = await readTreeState(stack.nats.url, s.dataDir, rootId);
      expect(treeViolations(t), describeTree(t)).toEqual([]);
      const root = t.logs.get(rootId)!;
      expect(root.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
      expect(ofType(root, 'actor/killed')).toHaveLength(1);
      // one child for the one request: one log, one entry, one inbox consumer
      expect(t.logs.size).toBe(2);
      expect(t.entries.filter((e) => e.actorId !== rootId)).toHaveLength(1);
      expect(t.consumers.filter((c) => c !== rootId)).toHaveLength(1);
      expect(spawnResult(root)).toContain('worker: found it');
      // the directory caches every status, the child's too (kept by the command that hosted it)
      expect(t.entries.map((e) => e.status)).toEqual(['completed', 'completed']);
    },
  );

  test('SIGKILL at before:notice-ack: the notice comes again after recovery and is included once', async ({ onTestFinished }) => {
    const s = await setup(onTestFinished, {
      main: [spawnCall('worker', 'background'), { tool_calls: [{ name: 'wait_agents', arguments: { timeout_seconds: 60 } }] }, answer('parent: merged')],
      worker: [answer('worker: found it')],
    });
    const crashed = await s.cli.run([...s.run, '--fault', 'before:notice-ack', ...s.common]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const rootId = rootOf(crashed.stderr);
    const before = await readTreeState(stack.nats.url, s.dataDir, rootId);
    const notices = ofType(before.logs.get(rootId)!, 'inbox/received').filter((e) => e.data.kind === 'subagent_completed');
    // taken into the parent's log, never acked
    expect(notices, describeTree(before)).toHaveLength(1);

    const resumed = await s.cli.run(['resume', rootId, '--json', ...s.common]);
    expect(resumed.code, show(resumed)).toBe(0);
    const t = await readTreeState(stack.nats.url, s.dataDir, rootId);
    expect(treeViolations(t), describeTree(t)).toEqual([]);
    const root = t.logs.get(rootId)!;
    expect(root.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    // the redelivery was dropped by its ID: one receipt, one inclusion (the wait took it)
    const received = ofType(root, 'inbox/received').filter((e) => e.data.kind === 'subagent_completed');
    expect(received.map((e) => e.data.messageId)).toEqual([notices[0]!.data.messageId]);
    const took = ofType(root, 'subagent/completed');
    const prepared = ofType(root, 'request/prepared').filter((e) => e.data.messageIds?.includes(notices[0]!.data.messageId));
    expect(took.length + prepared.length).toBe(1);
  }, 90_000);

  test('foreground delegation: the process hosting the child is killed mid-turn; after resume the spawn call returns the child\'s answer', async ({ onTestFinished }) => {
    // the child's answer is slow: the kill lands while its model call is open
    const s = await setup(onTestFinished, { main: [spawnCall('worker', 'foreground'), answer('parent: done')], worker: [answer('worker: the answer', 1_500)] });
    const run = startCli([...s.run, ...s.common], s.dataDir);
    let rootId = '';
    await until('the child\'s model call open', async () => {
      const id = run.stderr().split('\n')[0]!;
      if (!AGENT_ID.test(id)) return false;
      rootId = id;
      const t = await readTreeState(stack.nats.url, s.dataDir, rootId);
      return childLogs(t).some((log) => log.some((e) => e.type === 'attempt/start'));
    });
    run.child.kill('SIGKILL');
    await run.exited;
    const before = await readTreeState(stack.nats.url, s.dataDir, rootId);
    expect(childLogs(before).flat().some((e) => e.type === 'turn/end'), describeTree(before)).toBe(false);

    const resumed = await s.cli.run(['resume', rootId, '--json', ...s.common]);
    expect(resumed.code, show(resumed)).toBe(0);
    const t = await readTreeState(stack.nats.url, s.dataDir, rootId);
    expect(treeViolations(t), describeTree(t)).toEqual([]);
    const root = t.logs.get(rootId)!;
    expect(root.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    const [child] = childLogs(t);
    // the child was recovered by the resume (its attempt closed interrupted, then answered)
    expect(ofType(child!, 'actor/killed')).toHaveLength(1);
    expect(ofType(child!, 'turn/end').at(-1)).toMatchObject({ data: { outcome: 'completed' } });
    expect(spawnResult(root)).toContain('worker: the answer');
    expect(t.entries.map((e) => e.status)).toEqual(['completed', 'completed']);
  }, 90_000);
});
