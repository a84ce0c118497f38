// Goals through the real CLI: `run --goal` goes on in goal_continuation turns while each makes
// progress, until the model completes the goal; `goal` shows it and a person pauses, resumes and
// cancels it through the agent's inbox; kills after a goal/updated and between a turn's end and
// its continuation resume to one continuation; bad input is one line and exit 2.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent, EventOf, EventType } from '../../src/protocol/events.js';
import { AGENT_ID, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';
import { parseRuns } from '../helpers/cli.js';

const stack = useCliStack();

const write = (path: string) => ({ tool_calls: [{ name: 'write_file', arguments: { path, content: `${path}\n` } }], usage: { input_tokens: 100, output_tokens: 10 } });
const say = (content: string) => ({ content, usage: { input_tokens: 50, output_tokens: 5 } });

/** Three turns, each writes a note; the third asks to complete the goal, then answers. */
const THREE_TURNS = {
  responses: [
    write('n1.md'), say('first note'),
    write('n2.md'), say('second note'),
    write('n3.md'),
    { tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'three notes written', expected_revision: 0 } }], usage: { input_tokens: 80, output_tokens: 8 } },
    say('all three notes are written'),
  ],
};

const setup = (onTestFinished: TestEnd, script: unknown) => stack.setup(onTestFinished, { script });

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends EventType>(events: ActorEvent[], type: T): EventOf<T>[] {
  return events.filter((e) => e.type === type) as unknown as EventOf<T>[];
}

/** The agent's whole log, as `actorloop events --json` prints it. */
async function logOf(cli: { run(a: string[]): Promise<CliResult> }, agentId: string, common: string[]): Promise<ActorEvent[]> {
  const r = await cli.run(['events', agentId, '--json', ...common]);
  if (r.code !== 0) throw new Error(show(r));
  return parseEvents(r.stdout);
}

describe('goals from the CLI', () => {
  test('run --goal continues over three turns, each making progress; the third completes the goal', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, THREE_TURNS);
    const run = await cli.run(['run', 'write the notes', '--goal', 'three notes in the workspace', '--goal-tokens', '100000', '--model', model, '--cwd', ws, '--approve', 'auto-edit', '--json', ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation', 'goal_continuation']);
    expect(ofType(events, 'goal/created')[0]!.data).toMatchObject({ objective: 'three notes in the workspace', budget: { tokens: 100000 }, maxIdleTurns: 2 });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'all three notes are written' } });
    for (const n of ['n1.md', 'n2.md', 'n3.md']) expect(await readFile(join(ws, n), 'utf8')).toBe(`${n}\n`);

    const shown = await cli.run(['goal', agentId, ...common]);
    expectExit(expect, shown, 0);
    expect(lines(shown.stdout)[0]).toMatch(/^goal goal_\w+ · complete \(three notes written\) · revision 2$/);
    // every attempt's tokens: 3 × (110 + 55) + 88
    expect(shown.stdout).toContain('583 of 100,000 tokens');
    const json = JSON.parse((await cli.run(['goal', agentId, '--json', ...common])).stdout);
    expect(json).toMatchObject({ phase: 'complete', revision: 2, usage: { tokens: 583 } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('goal pause | resume | cancel: a person\'s change the agent commits; a change its phase does not allow is refused', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, { responses: [say('nothing to do yet')] });
    // one idle turn blocks it (max_idle_turns = 1): the agent is idle with a goal a person can change
    const run = await cli.run(['run', 'think', '--goal', 'think hard', '--model', model, '--cwd', ws, '-c', 'max_idle_turns=1', ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stdout)[0]!;
    expect((await cli.run(['goal', agentId, ...common])).stdout).toContain('· blocked (no_progress) · revision 1');

    const resumed = await cli.run(['goal', agentId, 'resume', ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stdout).toContain('· active (resume by a person) · revision 2');
    expect(resumed.stderr).toContain('the goal is active again');
    const paused = await cli.run(['goal', agentId, 'pause', ...common]);
    expectExit(expect, paused, 0);
    expect(paused.stdout).toContain('· paused (pause by a person) · revision 3');
    expectExit(expect, await cli.run(['goal', agentId, 'resume', ...common]), 0);
    const cancelled = await cli.run(['goal', agentId, 'cancel', ...common]);
    expectExit(expect, cancelled, 0);
    expect(cancelled.stdout).toContain('· cancelled (cancel by a person) · revision 5');

    const refused = await cli.run(['goal', agentId, 'pause', ...common]);
    expectExit(expect, refused, 2);
    expect(lines(refused.stderr)).toHaveLength(1);
    expect(lines(refused.stderr)[0]).toMatch(new RegExp(`^actorloop: ${agentId} refused to pause its goal: a cancelled goal cannot be paused\\. actorloop goal ${agentId} .*shows the goal as it is now$`));

    const log = await logOf(cli, agentId, common);
    const updates = ofType(log, 'goal/updated');
    expect(updates.map((u) => [u.data.revision, u.data.phase, u.data.by])).toEqual([
      [1, 'blocked', 'runtime'], [2, 'active', 'person'], [3, 'paused', 'person'], [4, 'active', 'person'], [5, 'cancelled', 'person'],
    ]);
    // each person's change came in on the person channel, from the CLI
    const received = ofType(log, 'inbox/received').filter((e) => e.data.kind === 'goal_control');
    expect(received.map((e) => e.data.from)).toEqual(Array(5).fill('client:cli'));
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('goal pause while the run\'s turn runs: the agent hosted by the run takes it, and no continuation follows', async ({ expect, onTestFinished }) => {
    // the first answer waits, so the pause lands while the turn is open
    const script = { responses: [{ ...write('n1.md'), delay_ms: 8000 }, say('first note'), write('n2.md'), say('unused')] };
    const { ws, cli, model, common } = await setup(onTestFinished, script);
    const running = cli.run(['run', 'write the notes', '--goal', 'notes', '--model', model, '--cwd', ws, '--approve', 'auto-edit', ...common]);
    let agentId = '';
    for (let i = 0; i < 100 && agentId === ''; i++) {
      const runs = await cli.run(['runs', '--json', ...common]);
      // the server is this file's: other tests' agents are listed too, so this workspace's is picked
      agentId = parseRuns(runs.stdout).find((r) => r.workspace === ws)?.actorId ?? '';
      if (agentId === '') await new Promise((r) => setTimeout(r, 100));
    }
    for (let i = 0; i < 100; i++) {
      const log = await logOf(cli, agentId, common);
      if (log.some((e) => e.type === 'goal/created')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const paused = await cli.run(['goal', agentId, 'pause', ...common]);
    expectExit(expect, paused, 0);
    expect(paused.stdout).toContain('· paused (pause by a person) · revision 1');
    const run = await running;
    expectExit(expect, run, 0);
    const log = await logOf(cli, agentId, common);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message']);
    expect(ofType(log, 'turn/end')[0]!.data.goalContinues).toBeUndefined();
    expect(ofType(log, 'goal/updated')[0]!.turn).toBe(ofType(log, 'turn/start')[0]!.turn);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('a kill right after a goal/updated resumes to the goal\'s completion, the turn carried on once', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, THREE_TURNS);
    const run = await cli.run(['run', 'write the notes', '--goal', 'three notes', '--model', model, '--cwd', ws, '--approve', 'auto-edit', '--fault', 'after:goal/updated', ...common]);
    expect(run.signal, show(run)).toBe('SIGKILL');
    const agentId = lines(run.stdout)[0]!;
    const resumed = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stdout).toContain('all three notes are written');
    const log = await logOf(cli, agentId, common);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation', 'goal_continuation']);
    expect(ofType(log, 'goal/updated').map((u) => u.data.revision)).toEqual([1, 2]);
    expect(ofType(log, 'actor/killed')[0]!.data.point).toBe('after:goal/updated');
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('a kill right after a turn\'s end whose goal goes on resumes to exactly one continuation', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, THREE_TURNS);
    const run = await cli.run(['run', 'write the notes', '--goal', 'three notes', '--model', model, '--cwd', ws, '--approve', 'auto-edit', '--fault', 'after:turn/end', ...common]);
    expect(run.signal, show(run)).toBe('SIGKILL');
    const agentId = lines(run.stdout)[0]!;
    const before = await logOf(cli, agentId, common);
    expect(before.at(-1)!.type).not.toBe('turn/end');
    // the turn's end and the continuation's start are one commit: the kill after it finds the continuation open
    expect(ofType(before, 'turn/end')[0]!.data.goalContinues).toBe(true);
    expect(ofType(before, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation']);

    const resumed = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, resumed, 0);
    const log = await logOf(cli, agentId, common);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'goal_continuation', 'goal_continuation']);
    expect(ofType(log, 'recovery/continuation')).toHaveLength(1);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
    // nothing is owed any more: a second resume has nothing to carry on
    const again = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, again, 0);
    expect(again.stderr).toContain('has no open turn to resume');
    expect((await logOf(cli, agentId, common)).length).toBe(log.length);
  });

  test('bad input: zero, negative or malformed goal budgets, a budget without a goal, goal on an agent with none, an unknown action', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, { responses: [say('done')] });
    const base = ['run', 'task', '--model', model, '--cwd', ws, ...common];
    const cases: Array<[string[], RegExp]> = [
      [['--goal', 'g', '--goal-tokens', '0'], /--goal-tokens takes a whole number above 0, got "0"/],
      [['--goal', 'g', '--goal-cost', '-1'], /--goal-cost takes a number above 0, got "-1"/],
      [['--goal', 'g', '--goal-seconds', 'soon'], /--goal-seconds takes a number above 0, got "soon"/],
      [['--goal', 'g', '--goal-tokens', '1.5'], /--goal-tokens takes a whole number above 0/],
      [['--goal-tokens', '10'], /a goal budget needs a goal/],
      [['--goal', '  '], /the goal is empty/],
      [['--goal', 'g', '--plan-mode'], /--goal and --plan-mode do not go together/],
    ];
    for (const [flags, message] of cases) {
      const r = await cli.run([...base, ...flags]);
      expectExit(expect, r, 2);
      expect(lines(r.stderr), show(r)).toHaveLength(1);
      expect(lines(r.stderr)[0]).toMatch(message);
    }
    const plain = await cli.run(base);
    expectExit(expect, plain, 0);
    const agentId = lines(plain.stdout)[0]!;
    const none = await cli.run(['goal', agentId, ...common]);
    expectExit(expect, none, 2);
    expect(lines(none.stderr)[0]).toMatch(new RegExp(`^actorloop: ${agentId} has no goal\\. start one with actorloop run --goal`));
    const pauseNone = await cli.run(['goal', agentId, 'pause', ...common]);
    expectExit(expect, pauseNone, 2);
    const unknown = await cli.run(['goal', agentId, 'finish', ...common]);
    expectExit(expect, unknown, 2);
    expect(lines(unknown.stderr)[0]).toMatch(/^actorloop: unknown goal action "finish"\. .* add pause, resume or cancel to change it$/);
  });
});
