// Compaction through the real CLI: a run whose tool results outgrow an 8,000-token window is
// SIGKILLed at each compaction fault point, `resume` (a fresh process) finishes it with exactly
// one checkpoint for the compaction that was open, and `verify` holds; `actorloop compact` asks
// an idle agent for a checkpoint at its next turn's first step.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { AGENT_ID, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

const SUMMARY = 'Read f0.txt to f5.txt: each is filler text; the parser was not among them.';

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends ActorEvent['type']>(log: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/** A workspace of ten 4 KB files, and a script that reads each and answers (then answers a follow-up). */
async function setup(onTestFinished: (fn: () => Promise<void>) => void) {
  const ws = await stack.dir('ws');
  for (let i = 0; i < 10; i++) await writeFile(join(ws, `f${i}.txt`), `file ${i}: ${'filler text of the workspace '.repeat(150)}`.slice(0, 4096));
  const script = join(await stack.dir('script'), 'compaction.json');
  const responses = [
    ...Array.from({ length: 10 }, (_, i) => ({ tool_calls: [{ id: `c${i}`, name: 'read_file', arguments: { path: `f${i}.txt` } }] })),
    { content: 'Read all ten files.' },
    { content: 'Nothing else to add.' },
  ];
  await writeFile(script, JSON.stringify({ responses, summaries: [SUMMARY] }));
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  const run = ['run', 'Read every file and say what they hold', '--model', `scripted:${script}`, '--tools', 'read_file', '--cwd', ws, '--json', '-c', 'context_window=8000', ...common];
  return { ws, cli, common, run };
}

describe.concurrent('compaction through the CLI', () => {
  test.for(['after:compaction/started', 'before:checkpoint/committed'])('run --fault %s: SIGKILL, resume completes with one checkpoint, verify holds', async (point, { expect, onTestFinished }) => {
    const { cli, common, run } = await setup(onTestFinished);
    const crashed = await cli.run([...run, '--fault', point]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stderr)[0] ?? '';
    expect(agentId, show(crashed)).toMatch(AGENT_ID);
    const before = parseEvents(crashed.stdout);
    const started = ofType(before, 'compaction/started');
    expect(started).toHaveLength(1);
    expect(ofType(before, 'checkpoint/committed')).toHaveLength(0);

    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    const verified = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verified, 0);
    expect(verified.stdout).toContain('all invariants hold');

    const events = await cli.run(['events', agentId, '--json', ...common]);
    const log = parseEvents(events.stdout);
    expect(ofType(log, 'turn/end').at(-1)!.data.outcome).toBe('completed');
    const committed = ofType(log, 'checkpoint/committed');
    expect(committed.filter((c) => c.data.id === started[0]!.data.checkpoint)).toHaveLength(1);
    // the script's summary is what the checkpoint holds, beside the pinned task
    expect(committed[0]!.data.text).toContain(SUMMARY);
    expect(committed[0]!.data.text).toContain("Task (the user's words): Read every file and say what they hold");
    expect(ofType(log, 'actor/killed')[0]!.data.point).toBe(point);
    // the human view names it too
    const human = await cli.run(['events', agentId, ...common]);
    expect(human.stdout).toMatch(/checkpoint\/committed .*ckpt_/);
  });

  test('actorloop compact on an idle agent: its next turn compacts at its first step, and says so', async ({ expect, onTestFinished }) => {
    const { cli, common, run } = await setup(onTestFinished);
    // a window large enough that nothing compacts on its own
    const done = await cli.run(run.map((a) => (a === 'context_window=8000' ? 'context_window=200000' : a)));
    expectExit(expect, done, 0);
    const agentId = lines(done.stderr)[0]!;
    const asked = await cli.run(['compact', agentId, ...common]);
    expectExit(expect, asked, 0);
    expect(asked.stdout).toMatch(/^msg_\S+ compact$/m);
    expect(asked.stderr).toContain('has no open turn: it compacts at the first step of its next turn');
    const next = await cli.run(['send', agentId, 'anything else?', '--follow-up', '--json', ...common]);
    expectExit(expect, next, 0);
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    const started = ofType(log, 'compaction/started');
    expect(started.map((s) => s.data.trigger)).toEqual(['asked']);
    expect(ofType(log, 'checkpoint/committed')).toHaveLength(1);
    expect(ofType(log, 'turn/end').map((e) => e.data.outcome)).toEqual(['completed', 'completed']);
    const bad = await cli.run(['compact', 'agt_nope', ...common]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });
});
