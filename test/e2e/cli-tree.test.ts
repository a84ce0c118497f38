// Seeing a tree of agents from the CLI, and a subagent's approval reaching the person: a real
// `actorloop host` on a real nats-server hosts a scripted tree (`main` spawns `writer` in the
// foreground; `writer` calls write_file under `--approve ask`); `run` hands the root to the host,
// follows it and names the waiting subagent with the line that answers it; `approve` from another
// CLI process answers it; `tree`, `events --tree` and `runs` read the tree back.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, test, type ExpectStatic } from 'vitest';
import { AGENT_ID, cliEnv, lines, parseEvents, parseRuns, show, type CliResult, type RunningCli } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import type { TreeView } from '../../src/client/tree.js';

const HOST = 'tree-host';

const stack = useCliStack();
let host: RunningCli;

const usage = { input_tokens: 40, output_tokens: 4 };
/** The tree's models by agent name: `main` spawns `writer` and waits for it; `writer` writes a file. */
const TREE_SCRIPT = {
  agents: {
    main: {
      responses: [
        { tool_calls: [{ name: 'spawn_agent', arguments: { task: 'write notes.txt', name: 'writer', mode: 'foreground' } }], usage },
        { content: 'the writer wrote notes.txt', usage },
      ],
    },
    writer: {
      responses: [
        { tool_calls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello\n' } }], usage },
        { content: 'wrote notes.txt', usage },
      ],
    },
  },
};

beforeAll(async () => {
  const dataDir = await stack.dir('host');
  host = stack.fileCli(dataDir).start(['host', '--name', HOST, '--lease-ttl', '10000', ...stack.flags(dataDir)]);
  await until('the host to start', () => host.stderr().includes('hosting agents'));
});

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; host stderr:\n${host?.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/** Starts `actorloop <args>` (or `command`, a whole command line of its own) and returns at once; it dies with the test. */
function start(args: string[], env: NodeJS.ProcessEnv, onTestFinished: (fn: () => Promise<void>) => void, command?: string[]): RunningCli & { kill(signal: NodeJS.Signals): void } {
  const p = stack.pool.forTest({ onTestFinished }, env).start(args, command ? { command } : {});
  return { ...p, kill: (signal) => p.child.kill(signal) };
}

describe('a tree of agents on a host', () => {
  test('a subagent needing approval is named on its root\'s run with the approve line; approve answers it, and tree, events --tree and runs read the tree', async ({ expect, onTestFinished }) => {
    const ws = await stack.dir('ws');
    const dataDir = await stack.dir('cli');
    const scratch = await stack.dir('script');
    const scriptPath = join(scratch, 'tree.json');
    await writeFile(scriptPath, JSON.stringify(TREE_SCRIPT));
    const env = cliEnv(dataDir);
    const cli = stack.pool.forTest({ onTestFinished }, env);
    const common = stack.flags(dataDir);

    const run = start(['run', 'have a writer write notes.txt', '--model', `scripted:${scriptPath}`, '--approve', 'ask', '--cwd', ws, ...common], env, onTestFinished);
    // the root's run names the subagent, what it asks, and the command that answers it
    const approveLine = /^approve: (actorloop approve (agt_\S+) (apr_\S+) .*)$/m;
    await until('the run to name the waiting subagent', () => approveLine.test(run.stderr()) || run.stdout().includes('completed'));
    const [, , childId, approvalId] = approveLine.exec(run.stderr())!;
    const rootId = lines(run.stdout())[0]!;
    expect(rootId).toMatch(AGENT_ID);
    expect(childId).toMatch(AGENT_ID);
    expect(childId).not.toBe(rootId);
    expect(run.stderr()).toContain(`subagent writer (${childId}) needs approval ${approvalId}`);
    expect(run.stderr()).toContain('write_file (version 1) asks for approval');
    expect(run.stderr()).toContain('+hello');
    expect(run.stderr()).toContain(`approve: actorloop approve ${childId} ${approvalId} --data-dir ${dataDir} --nats ${stack.nats.url}`);

    // while it waits, the tree says so; a follower of the tree goes on until the tree is settled
    const waiting = await cli.run(['tree', rootId, '--json', ...common]);
    expectExit(expect, waiting, 0);
    const before = JSON.parse(waiting.stdout) as TreeView;
    expect(before.agents.map((a) => [a.name, a.actorId, a.status, a.waitingFor])).toEqual([
      ['main', rootId, 'running', null],
      ['writer', childId, 'waiting', { kind: 'approval', ids: [approvalId] }],
    ]);
    // `runs` lists the run as waiting: it goes on when a person answers, not by itself
    const runsWaiting = parseRuns((await cli.run(['runs', '--json', ...common])).stdout);
    expect(runsWaiting.find((r) => r.actorId === rootId)?.status).toBe('waiting');
    const waitingText = await cli.run(['tree', rootId, ...common]);
    expect(lines(waitingText.stdout)).toEqual([
      `main      ${rootId}  running · step 1 · ▸ spawn_agent · 44 tokens · cost unknown`,
      `  writer  ${childId}  waiting for approval ${approvalId} · step 1 · 44 tokens · cost unknown`,
      'total: 2 agents · 88 tokens · cost unknown',
      `approve: actorloop approve ${childId} ${approvalId} --data-dir ${dataDir} --nats ${stack.nats.url}`,
    ]);
    const follower = start(['tree', rootId, '--follow', ...common], env, onTestFinished);
    // on a terminal (`script` gives it one) the tree is redrawn in place
    const tty = start([], env, onTestFinished, ['script', '-qfec', ['node', 'bin/actorloop.js', 'tree', rootId, '--follow', ...common].join(' '), '/dev/null']);
    const liveEvents = start(['events', rootId, '--tree', '--follow', '--json', ...common], env, onTestFinished);
    await until('the followers to show the tree', () => follower.stdout().includes('total: ') && tty.stdout().includes('total: ') && liveEvents.stdout().includes('"actor/parked"'));

    // without a terminal the run ends as a parked agent's does once the tree can only wait for a
    // person (exit 5); the host keeps the tree
    const ran = await run.ended;
    expectExit(expect, ran, 5);
    // answered from another CLI process, by the subagent's own ID
    const approved = await cli.run(['approve', childId!, approvalId!, ...common]);
    expectExit(expect, approved, 0);
    expect(approved.stdout).toContain('wrote notes.txt');
    // the host finishes the root with its child's answer
    let rootTurnEnd: ReturnType<typeof parseEvents>[number] | undefined;
    for (let i = 0; i < 200 && !rootTurnEnd; i++) {
      rootTurnEnd = parseEvents((await cli.run(['events', rootId, '--json', ...common])).stdout).find((e) => e.type === 'turn/end');
      if (!rootTurnEnd) await new Promise((r) => setTimeout(r, 100));
    }
    expect(rootTurnEnd, 'the root to end on its host').toBeDefined();
    expect((rootTurnEnd!.data as { answer: string }).answer).toContain('the writer wrote notes.txt');
    expect(await readFile(join(ws, 'notes.txt'), 'utf8')).toBe('hello\n');

    const onTty = await tty.ended;
    expectExit(expect, onTty, 0);
    // three lines drawn (two agents and the total): each redraw moves up over them and clears
    expect(onTty.stdout).toContain('\x1b[3F\x1b[J');
    const lastDraw = onTty.stdout.split('\x1b[3F\x1b[J').at(-1)!;
    expect(lastDraw).toMatch(new RegExp(`^main {6}${rootId}  completed`));
    expect(lastDraw).toContain(`  writer  ${childId}  completed`);
    const followed = await follower.ended;
    expectExit(expect, followed, 0);
    // a line per change (no terminal), the tree first and its total once it is settled
    expect(lines(followed.stdout)[0]).toMatch(new RegExp(`^main +${rootId}  running`));
    expect(followed.stdout).toMatch(new RegExp(`^writer  ${childId}  completed · 88 tokens`, 'm'));
    expect(lines(followed.stdout).at(-1)).toMatch(/^total: 2 agents · \d+ tokens · cost unknown$/);

    // the tree when it is done: both agents completed, in JSON and in text
    const done = await cli.run(['tree', rootId, '--json', ...common]);
    expectExit(expect, done, 0);
    const view = JSON.parse(done.stdout) as TreeView;
    expect(view.agents.map((a) => [a.name, a.actorId, a.parentId, a.depth, a.status])).toEqual([
      ['main', rootId, null, 0, 'completed'],
      ['writer', childId, rootId, 1, 'completed'],
    ]);
    expect(view.total).toMatchObject({ agents: 2, tokens: 4 * 44, costUsd: null });
    expect(view.settled).toBe(true);
    const text = await cli.run(['tree', rootId, ...common]);
    expectExit(expect, text, 0);
    expect(lines(text.stdout)).toEqual([
      `main      ${rootId}  completed · 88 tokens · cost unknown`,
      `  writer  ${childId}  completed · 88 tokens · cost unknown`,
      'total: 2 agents · 176 tokens · cost unknown',
    ]);
    // a subagent's ID: its root's tree, and which root that is
    const viaChild = await cli.run(['tree', childId!, ...common]);
    expectExit(expect, viaChild, 0);
    expect(viaChild.stdout).toBe(text.stdout);
    expect(viaChild.stderr).toBe(`${childId} is a subagent in the tree of ${rootId}; showing that tree\n`);

    // every log of the tree, in the order committed, each line led by its agent's name
    const merged = await cli.run(['events', rootId, '--tree', ...common]);
    expectExit(expect, merged, 0);
    const rows = lines(merged.stdout);
    expect(new Set(rows.map((r) => r.split(' ')[0]))).toEqual(new Set(['main', 'writer']));
    const at = (re: RegExp): number => rows.findIndex((r) => re.test(r));
    expect(at(/^main +\d+ .* subagent\/spawn_requested/)).toBeLessThan(at(/^writer +1 .* inbox\/received +subagent_task/));
    expect(at(/^writer .* actor\/parked/)).toBeLessThan(at(/^writer .* approval\/granted/));
    expect(at(/^writer .* turn\/end/)).toBeLessThan(at(/^main .* turn\/end/));
    const json = await cli.run(['events', rootId, '--tree', '--json', ...common]);
    expectExit(expect, json, 0);
    const events = parseEvents(json.stdout);
    // followed live, the same events in the same order; Ctrl-C ends it
    const rootEnd = (text: string): boolean => text.split('\n').some((l) => l.includes('"turn/end"') && l.includes(`"actor":"${rootId}"`));
    await until('the live tree events to reach the root\'s turn end', () => rootEnd(liveEvents.stdout()));
    liveEvents.kill('SIGINT');
    const live = await liveEvents.ended;
    expectExit(expect, live, 0);
    expect(parseEvents(live.stdout)).toEqual(events);
    expect(events).toHaveLength(rows.length);
    expect(new Set(events.map((e) => e.actor))).toEqual(new Set([rootId, childId]));
    // each agent's own log, in its own order, within the merge
    const own = parseEvents((await cli.run(['events', childId!, '--json', ...common])).stdout);
    expect(events.filter((e) => e.actor === childId)).toEqual(own);

    // runs lists the root alone, with the subagents of its tree
    const runs = await cli.run(['runs', '--json', ...common]);
    expectExit(expect, runs, 0);
    expect(parseRuns(runs.stdout).map((r) => r.actorId)).toEqual([rootId]);
    expect(lines(runs.stdout).map((l) => (JSON.parse(l) as { children: number }).children)).toEqual([1]);
    const table = await cli.run(['runs', ...common]);
    expect(lines(table.stdout)[0]).toMatch(/^AGENT +STATUS +TURNS +CHILDREN /);
    expect(lines(table.stdout)).toHaveLength(2);
  });

  test('a subagent of a run hosting its tree in-process: the run ends waiting (exit 5), approve hosts the tree and answers, resume finishes the root', async ({ expect, onTestFinished }) => {
    const ws = await stack.dir('ws');
    const dataDir = await stack.dir('cli');
    const scratch = await stack.dir('script');
    const scriptPath = join(scratch, 'tree.json');
    await writeFile(scriptPath, JSON.stringify(TREE_SCRIPT));
    const env = cliEnv(dataDir);
    const cli = stack.pool.forTest({ onTestFinished }, env);
    const common = stack.flags(dataDir);
    const run = start(['run', 'have a writer write notes.txt', '--in-process', '--model', `scripted:${scriptPath}`, '--approve', 'ask', '--cwd', ws, ...common], env, onTestFinished);
    const approveLine = /^approve: actorloop approve (agt_\S+) (apr_\S+) /m;
    await until('the run to name the waiting subagent', () => approveLine.test(run.stderr()) || run.stdout().includes('completed'));
    const [, childId, approvalId] = approveLine.exec(run.stderr())!;
    const rootId = lines(run.stdout())[0]!;
    // the tree can only wait for a person: the run ends (exit 5) and lets go of it
    const ran = await run.ended;
    expectExit(expect, ran, 5);
    // approved in-process: the command hosts the tree, the child writes and ends
    const approved = await cli.run(['approve', childId!, approvalId!, ...common]);
    expectExit(expect, approved, 0);
    expect(approved.stderr).not.toMatch(/is being run by/);
    expect(await readFile(join(ws, 'notes.txt'), 'utf8')).toBe('hello\n');
    // and the root takes its child's answer and finishes
    const resumed = await cli.run(['resume', rootId, ...common]);
    expectExit(expect, resumed, 0);
    const done = JSON.parse((await cli.run(['tree', rootId, '--json', ...common])).stdout) as TreeView;
    expect(done.agents.map((a) => [a.name, a.status])).toEqual([['main', 'completed'], ['writer', 'completed']]);
  });

  test('an unknown agent is one line and exit 3; --after with --tree is one line and exit 2', async ({ expect, onTestFinished }) => {
    const dataDir = await stack.dir('cli');
    const cli = stack.cli(onTestFinished, dataDir);
    const common = stack.flags(dataDir);
    for (const args of [['tree', 'agt_01J00000000000000000000000'], ['tree', 'agt_01J00000000000000000000000', '--follow'], ['events', 'agt_01J00000000000000000000000', '--tree']]) {
      const r = await cli.run([...args, ...common]);
      expectExit(expect, r, 3);
      expect(r.stdout).toBe('');
      expect(lines(r.stderr), show(r)).toEqual([
        'actorloop: no agent agt_01J00000000000000000000000 in this data dir. list agents with `actorloop runs`, and pass the same --data-dir and --nats as the run',
      ]);
    }
    const both = await cli.run(['events', 'agt_01J00000000000000000000000', '--tree', '--after', '3', ...common]);
    expectExit(expect, both, 2);
    expect(lines(both.stderr)).toHaveLength(1);
    expect(both.stderr).toMatch(/^actorloop: --after counts one agent's events, and --tree merges many/);
  });
});
