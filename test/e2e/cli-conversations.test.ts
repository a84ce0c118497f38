// Conversations (issue 16, part 1): `run --continue <agent>` and `run --last` start the next turn
// of an existing agent with its history, after a turn that completed and after one stopped by
// --max-steps; `resume --last`; a task sent while a turn runs waits for it; `runs` has a header,
// the workspace and the last task, and `--limit`.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { AGENT_ID, lines, parseEvents, parseRuns, show, type CliProcesses, type CliResult, type RunningCli } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

async function setup(onTestFinished: (fn: () => Promise<void>) => void, script: unknown) {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const file = join(dataDir, 'script.json');
  await writeFile(file, JSON.stringify(script));
  await writeFile(join(ws, 'notes.txt'), 'the meeting moved to Thursday\n');
  const cli = stack.cli(onTestFinished, dataDir);
  return { ws, dataDir, cli, model: `scripted:${file}`, common: stack.flags(dataDir) };
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/**
 * Starts a `run` (with `--json`) whose first model call is slow and returns once that call is in
 * flight: stderr's first line names the agent, and `request/prepared` is on stdout as it commits.
 * Polling `runs` instead could outlast turn 1 on a loaded machine (each poll is a process start).
 */
async function startSlowRun(cli: CliProcesses, args: string[]): Promise<{ running: RunningCli; agentId: string }> {
  const running = cli.start([...args, '--json']);
  const agentId = (await running.waitFor(/^agt_[0-9A-HJKMNP-TV-Z]{26}$/m))[0];
  await running.waitFor(/"type":"request\/prepared"/);
  return { running, agentId };
}

function ofType<T extends ActorEvent['type']>(events: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return events.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/** The bodies of the requests a run's events name as prepared, from the blob store of the data dir. */
async function preparedBodies(dataDir: string, events: ActorEvent[]): Promise<string[]> {
  const lmdb = openLmdbStore(dataDir);
  try {
    const blobs = createLmdbBlobStore(lmdb);
    return await Promise.all(ofType(events, 'request/prepared').map(async (e) => (await blobs.getText(e.data.digest))!));
  } finally {
    await lmdb.close();
  }
}

describe('run --continue and --last', () => {
  test('after a completed turn, --continue starts turn 2 whose first request holds turn 1; --last and resume --last find the agent', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, {
      responses: [
        { content: 'The capital of France is Paris.' },
        { content: 'Paris has about 2.1 million people.' },
        { content: 'Yes: the Seine.' },
      ],
    });
    const first = await cli.run(['run', 'What is the capital of France?', '--model', model, '--cwd', ws, '--json', ...common]);
    expectExit(expect, first, 0);
    const agentId = lines(first.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    // a fresh run names itself as send and --continue do
    expect(ofType(parseEvents(first.stdout), 'inbox/received').map((e) => e.data.from)).toEqual(['client:cli']);

    const second = await cli.run(['run', '--continue', agentId, 'And how many people live there?', '--json', ...common]);
    expectExit(expect, second, 0);
    // the same agent, and only its next turn's events
    expect(lines(second.stderr)[0]).toBe(agentId);
    expect(second.stderr).toContain('turn 2, with the history so far; turn 1 ended completed');
    const turn2 = parseEvents(second.stdout);
    expect(ofType(turn2, 'turn/start')).toHaveLength(1);
    expect(ofType(turn2, 'turn/start')[0]!.data.source).toBe('user_message');
    expect(turn2.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'Paris has about 2.1 million people.' } });
    // the new turn's first request holds the earlier history, then the new task
    const [body] = await preparedBodies(dataDir, turn2);
    const q1 = body!.indexOf('What is the capital of France?');
    const a1 = body!.indexOf('The capital of France is Paris.');
    const q2 = body!.indexOf('And how many people live there?');
    expect(q1).toBeGreaterThan(-1);
    expect(a1).toBeGreaterThan(q1);
    expect(q2).toBeGreaterThan(a1);

    // --last: the latest agent of the workspace given by --cwd (from another directory)
    const third = await cli.run(['run', '--last', '--cwd', ws, 'Does a river run through it?', ...common]);
    expectExit(expect, third, 0);
    expect(lines(third.stdout)[0]).toBe(agentId);
    expect(third.stdout).toContain('Yes: the Seine.');
    const resumed = await cli.run(['resume', '--last', '--cwd', ws, ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stderr).toContain(`${agentId} has no open turn to resume: its last turn ended completed`);

    // runs: a header, the workspace, the last task; one row for the agent with its three turns
    const runs = await cli.run(['runs', ...common]);
    expectExit(expect, runs, 0);
    const [header, ...rows] = lines(runs.stdout);
    expect(header).toMatch(/^AGENT\s+STATUS\s+TURNS\s+UPDATED\s+WORKSPACE\s+LAST TASK$/);
    const row = rows.find((r) => r.startsWith(agentId))!;
    expect(row).toMatch(/completed\s+3\s/);
    expect(row).toContain(ws);
    expect(row).toContain('Does a river run through it?');
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  test('a turn stopped by --max-steps is continued by --last: the new turn sees the tool result and finishes', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, {
      responses: [
        { content: 'Reading the notes.', tool_calls: [{ name: 'read_file', arguments: { path: 'notes.txt' } }] },
        { content: 'The meeting is on Thursday.' },
      ],
    });
    const first = await cli.run(['run', 'When is the meeting?', '--model', model, '--cwd', ws, '--max-steps', '1', '--json', ...common]);
    expectExit(expect, first, 4);
    const agentId = lines(first.stderr)[0]!;
    expect(parseEvents(first.stdout).at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'stopped' } });

    // from the workspace itself, as a person would type it
    const next = await cli.run(['run', '--last', 'Go on.', '--json', ...common], { cwd: ws });
    expectExit(expect, next, 0);
    expect(lines(next.stderr)[0]).toBe(agentId);
    const turn2 = parseEvents(next.stdout);
    expect(turn2.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'The meeting is on Thursday.' } });
    // the budget of the last turn carries on: one step again, enough for the answer
    expect(ofType(turn2, 'turn/start')[0]!.data.settings.budgets.maxSteps).toBe(1);
    const [body] = await preparedBodies(dataDir, turn2);
    expect(body).toContain('When is the meeting?');
    expect(body).toContain('the meeting moved to Thursday');
    expect(body!.indexOf('Go on.')).toBeGreaterThan(body!.indexOf('the meeting moved to Thursday'));
    // a flag of the continuing command is a setting of the new turn
    const third = await cli.run(['run', '--continue', agentId, 'Anything else?', '--max-steps', '3', '-c', 'approval_mode="auto-edit"', '--json', ...common]);
    // the script has no third answer: the turn fails, and its settings are what was asked (a -c
    // override of a recorded setting counts as a flag does)
    const settings = ofType(parseEvents(third.stdout), 'turn/start')[0]?.data.settings;
    expect(settings?.budgets.maxSteps, show(third)).toBe(3);
    expect(settings?.approvalMode).toBe('auto-edit');
    expect(ofType(turn2, 'turn/start')[0]!.data.settings.approvalMode).toBe('ask');
  });

  test('a task sent while a turn runs waits for it as a follow-up, and the command follows the turn that takes it', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, {
      // slow enough that the agent is still in turn 1 when a second CLI process starts on a busy machine
      responses: [{ content: 'first answer', delay_ms: 10_000 }, { content: 'second answer' }],
    });
    const { running, agentId } = await startSlowRun(cli, ['run', 'slow question', '--model', model, '--cwd', ws, ...common]);
    const next = await cli.run(['run', '--continue', agentId, 'quick question', '--json', ...common]);
    expectExit(expect, next, 0);
    expect(next.stderr).toContain('this task is queued as a follow-up and starts turn 2 when that one ends');
    const events = parseEvents(next.stdout);
    const ends = ofType(events, 'turn/end').map((e) => e.data.answer);
    // the running turn's end is shown on the way; the command ends with the turn that took the task
    expect(ends).toEqual(['first answer', 'second answer']);
    expect(ofType(events, 'turn/start').at(-1)!.data.source).toBe('follow_up');
    expectExit(expect, await running.ended, 0);
  });

  test('a follow-up sent with --no-follow while run hosts the turn: run ends with turn 1 and says resume carries the next on; resume does', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, {
      // turn 2 is slow too, so it is still open when the run that hosts it stops
      responses: [{ content: 'first answer', delay_ms: 6_000 }, { content: 'second answer', delay_ms: 4_000 }],
    });
    const { running, agentId } = await startSlowRun(cli, ['run', 'slow question', '--model', model, '--cwd', ws, ...common]);
    const sent = await cli.run(['send', agentId, 'and then?', '--follow-up', '--no-follow', ...common]);
    expectExit(expect, sent, 0);
    const run = await running.ended;
    expectExit(expect, run, 0);
    // the turn it left is named, with the command that carries it on
    expect(run.stderr).toContain(`${agentId}: turn 2 (a follow-up) started as this command ended; nothing runs it now: actorloop resume ${agentId}`);
    // runs and tree say so too: the turn is open and nothing runs it, so it is not `running`
    const runs = await cli.run(['runs', ...common]);
    expectExit(expect, runs, 0);
    const row = lines(runs.stdout).find((l) => l.startsWith(agentId))!;
    expect(row.split(/\s{2,}/)[1], show(runs)).toBe('released');
    expect(runs.stderr).toContain(`${agentId}: let go with work open; nothing runs it now: actorloop resume ${agentId}`);
    expect(parseRuns((await cli.run(['runs', '--json', ...common])).stdout).find((r) => r.actorId === agentId)?.status).toBe('released');
    const tree = await cli.run(['tree', agentId, ...common]);
    expectExit(expect, tree, 0);
    expect(lines(tree.stdout)[0], show(tree)).toContain(`main  ${agentId}  released, nothing runs it · step 1`);
    expect(tree.stdout).not.toMatch(/running/);
    expect(lines(tree.stdout).some((l) => l.startsWith(`resume:  actorloop resume ${agentId}`)), show(tree)).toBe(true);
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    expect(parseEvents(resumed.stdout).at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'second answer' } });
  });

  test('mistakes are one line each: an unknown agent, no agent in the workspace, resume with nothing to name', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished, { responses: [] });
    const unknown = await cli.run(['run', '--continue', 'agt_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'hello', ...common]);
    expectExit(expect, unknown, 3);
    expect(unknown.stderr).not.toMatch(/\n\s+at /);
    const none = await cli.run(['run', '--last', '--cwd', ws, 'hello', ...common]);
    expectExit(expect, none, 3);
    expect(lines(none.stderr)[0]).toContain(`no agent has run in ${ws} with this data dir`);
    const which = await cli.run(['resume', ...common]);
    expectExit(expect, which, 2);
    expect(lines(which.stderr)[0]).toContain('resume needs the agent to resume');
    const both = await cli.run(['run', '--continue', 'agt_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--last', 'hello', ...common]);
    expectExit(expect, both, 2);
  });
});

describe('runs', () => {
  test('--limit shows the newest agents and says how many there are', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, { responses: [{ content: 'one' }] });
    // a data dir of its own, so the count is this test's; the server is shared, so a second bus
    // would list other tests' agents: the JSON rows are filtered to this workspace instead
    const a = await cli.run(['run', 'first task\nwith a second line', '--model', model, '--cwd', ws, ...common]);
    const b = await cli.run(['run', 'second task', '--model', model, '--cwd', ws, ...common]);
    expectExit(expect, a, 0);
    expectExit(expect, b, 0);
    const newest = lines(b.stdout)[0]!;
    const limited = await cli.run(['runs', '--limit', '1', ...common]);
    expectExit(expect, limited, 0);
    expect(lines(limited.stdout)).toHaveLength(2);
    expect(lines(limited.stdout)[1]).toContain(newest);
    expect(limited.stderr).toMatch(/^1 of \d+ agents shown; --limit \d+ shows them all/);
    const mine = parseRuns((await cli.run(['runs', '--json', ...common])).stdout).filter((r) => r.workspace === ws);
    expect(mine).toHaveLength(2);
    const all = await cli.run(['runs', '--limit', '50', ...common]);
    // the task's first line only
    expect(all.stdout).toContain('first task');
    expect(all.stdout).not.toContain('with a second line');
    void dataDir;
  });
});
