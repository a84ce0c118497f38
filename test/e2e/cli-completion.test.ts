// The completion policy through the real CLI (issue 17 part 2): `--complete-when cited` refuses an
// answer citing what the session never retrieved (seed 004 scenario 3) and accepts a real
// citation; `code-change` refuses an answer after a change with no passing verification and
// accepts it once the configured test command (`node --test`, real shell under the sandbox)
// passed; the limit of refusals fails the turn and asks the person; a kill mid-way and `resume`
// decide the same from the log; under on_completion_exhausted = "block" the limit blocks the goal
// (exit 4), a person resumes it and a real citation completes; a policy the run could never satisfy is exit 2.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent, EventOf, EventType } from '../../src/protocol/events.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { DEMO_SCRIPT, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const stack = useCliStack();

let fixedSlug: string;

beforeAll(async () => {
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<{ tool_calls?: Array<{ arguments: { content?: string } }> }> };
  fixedSlug = demo.responses[3]!.tool_calls![0]!.arguments.content!;
});
const setup = (onTestFinished: TestEnd, script: unknown) => stack.setup(onTestFinished, { script });

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends EventType>(events: ActorEvent[], type: T): EventOf<T>[] {
  return events.filter((e) => e.type === type) as unknown as EventOf<T>[];
}

/** Reads a file and searches, cites a file it never read, then cites what it read and what the search hit. */
const CITED = {
  responses: [
    { tool_calls: [{ name: 'read_file', arguments: { path: 'README.md' } }, { name: 'search', arguments: { pattern: 'export function slugify', path: 'src' } }] },
    { content: 'slugify only replaces the first space [src/slug.js:2], as the design notes say [docs/design.md].' },
    { content: 'slugify only replaces the first space [src/slug.js:2]; the workspace is described in [./README.md].' },
  ],
};

const FABRICATED = (n: number) => ({
  responses: [
    { tool_calls: [{ name: 'read_file', arguments: { path: 'README.md' } }] },
    ...Array.from({ length: n }, (_, i) => ({ content: `It is all in [notes/made-up-${i + 1}.md].` })),
  ],
});

describe('--complete-when cited (seed 004 scenario 3)', () => {
  test.concurrent('a fabricated citation is refused with that citation named; a real one then completes', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, CITED);
    const run = await cli.run(['run', 'why does the slug test fail? cite your sources', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--json', ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'turn/start')[0]!.data.settings.completeWhen).toBe('cited');
    const refusals = ofType(events, 'completion/rejected');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.data.policy).toBe('cited');
    expect(refusals[0]!.data.goalRevision).toBeNull();
    // only the fabricated one: the search hit (with a line anchor) was retrieved
    expect(refusals[0]!.data.missing).toHaveLength(1);
    expect(refusals[0]!.data.missing[0]).toContain('[docs/design.md]');
    // the refusal is committed with the step/end of the answer it refused
    const refusalSeq = refusals[0]!.seq;
    expect(events.find((e) => e.seq === refusalSeq + 1)?.type).toBe('step/end');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: CITED.responses[2]!.content } });
    expect(ofType(events, 'step/start')).toHaveLength(3);
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  test.concurrent('the model reads what is missing in its next request', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, CITED);
    const run = await cli.run(['run', 'why?', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--json', ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    // the third request holds the refused answer and, after it, what is missing
    const prepared = ofType(parseEvents(run.stdout), 'request/prepared');
    expect(prepared).toHaveLength(3);
    const lmdb = openLmdbStore(dataDir);
    try {
      const body = await createLmdbBlobStore(lmdb).getText(prepared[2]!.data.digest);
      expect(body).toContain('completion policy \\"cited\\"');
      expect(body).toContain('citation [docs/design.md] names nothing this session retrieved');
      const second = await createLmdbBlobStore(lmdb).getText(prepared[1]!.data.digest);
      expect(second).not.toContain('completion policy');
    } finally {
      await lmdb.close();
    }
    void agentId;
  });

  test.concurrent('under --output-schema the citations array is what is checked', async ({ expect, onTestFinished }) => {
    const answer = (citations: string[]) => JSON.stringify({ summary: 'slugify replaces one space', citations });
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, {
      responses: [
        { tool_calls: [{ name: 'read_file', arguments: { path: 'src/slug.js' } }] },
        { content: answer(['src/slug.js', 'notes/never-read.md']) },
        { content: answer(['src/slug.js']) },
      ],
    });
    const schema = join(dataDir, 'schema.json');
    await writeFile(schema, JSON.stringify({
      type: 'object', additionalProperties: false, required: ['summary', 'citations'],
      properties: { summary: { type: 'string' }, citations: { type: 'array', items: { type: 'string' } } },
    }));
    const run = await cli.run(['run', 'why?', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--output-schema', schema, '--json', ...common]);
    expectExit(expect, run, 0);
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'assistant/rejected')).toEqual([]);
    expect(ofType(events, 'completion/rejected').map((e) => e.data.missing)).toEqual([[expect.stringContaining('[notes/never-read.md]')]]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: answer(['src/slug.js']) } });
  });

  test.concurrent('the limit of refusals fails the turn (exit 1), naming the policy, and asks the person', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, FABRICATED(2));
    const run = await cli.run(['run', 'why?', '--model', model, '--cwd', ws, '--complete-when', 'cited', '-c', 'max_completion_rejections=2', ...common]);
    expectExit(expect, run, 1);
    const agentId = lines(run.stdout)[0]!;
    expect(run.stdout).toMatch(/failed \(completion policy "cited" refused 2 answers \(the limit\): citation \[notes\/made-up-2\.md\]/);
    // a line to paste: it reaches this agent where this run did
    expect(run.stdout).toContain(`you decide: tell the agent what it still lacks with \`actorloop run --continue ${agentId} --data-dir ${dataDir} --nats ${stack.nats.url} "<what to do>"\``);
    const events = await cli.run(['events', agentId, '--json', ...common]);
    const log = parseEvents(events.stdout);
    expect(ofType(log, 'completion/rejected').map((e) => e.data.missing[0])).toEqual([
      expect.stringContaining('[notes/made-up-1.md]'),
      expect.stringContaining('[notes/made-up-2.md]'),
    ]);
    expect(ofType(log, 'turn/start')[0]!.data.settings.maxCompletionRejections).toBe(2);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'failed', answer: null } });
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  // @2: killed as the step that gives the fabricated answer starts (the refusal not yet decided);
  // @3: killed after the refusal was committed, as the next step starts
  test.concurrent.for(['after:step/start@2', 'after:step/start@3'])('killed at %s, resume decides the same from the log', async (fault, { expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, CITED);
    const crashed = await cli.run(['run', 'why?', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--json', '--fault', fault, ...common]);
    expect(crashed.signal, show(crashed)).toBe('SIGKILL');
    const agentId = lines(crashed.stderr)[0]!;
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    const all = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    const refusals = ofType(all, 'completion/rejected');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.data.missing).toEqual([expect.stringContaining('[docs/design.md]')]);
    expect(all.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: CITED.responses[2]!.content } });
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });
});

describe('on_completion_exhausted = "block": the limit blocks the goal, a person resumes it', () => {
  test.concurrent('the goal ends blocked and the turn stopped (exit 4) naming the resume command; resumed, a real citation completes', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, {
      responses: [
        ...FABRICATED(3).responses,
        // after the person resumed the goal (revision 0 created, 1 blocked, 2 resumed)
        { tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'cited what I read', expected_revision: 2 } }] },
        { content: 'The demo is described in [README.md].' },
      ],
    });
    const run = await cli.run([
      'run', 'why? cite your sources', '--goal', 'explain the demo with sources', '--model', model, '--cwd', ws,
      '--complete-when', 'cited', '-c', 'on_completion_exhausted="block"', ...common,
    ]);
    expectExit(expect, run, 4);
    const agentId = lines(run.stdout)[0]!;
    expect(run.stdout).toContain('stopped (completion_exhausted)');
    const where = `--data-dir ${dataDir} --nats ${stack.nats.url}`;
    expect(run.stdout).toMatch(/goal goal_\S+ is blocked \(completion:cited: citation \[notes\/made-up-3\.md\] names nothing this session retrieved/);
    expect(run.stdout).toContain(`you decide: resume it with \`actorloop goal ${agentId} resume ${where}\`, then tell the agent what it still lacks with \`actorloop run --continue ${agentId} ${where} "<what to do>"\``);

    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(ofType(log, 'turn/start')[0]!.data.settings).toMatchObject({ completeWhen: 'cited', onCompletionExhausted: 'block' });
    const refusals = ofType(log, 'completion/rejected');
    expect(refusals.map((r) => r.data.goalActive)).toEqual([true, true, true]);
    const updates = ofType(log, 'goal/updated');
    expect(updates.map((u) => u.data)).toEqual([expect.objectContaining({
      revision: 1, expected: 0, phase: 'blocked', by: 'runtime',
      reason: expect.stringMatching(/^completion:cited: citation \[notes\/made-up-3\.md\]/),
    })]);
    // the block follows the refusal at the limit, in its turn, committed with the turn's end
    expect(updates[0]!.seq).toBeGreaterThan(refusals[2]!.seq);
    expect(updates[0]!.turn).toBe(refusals[2]!.turn);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', seq: updates[0]!.seq + 1, data: { outcome: 'stopped', reason: 'completion_exhausted', answer: null } });
    expect(log.at(-1)!.data).not.toHaveProperty('blockGoal');
    expect(log.at(-1)!.data).not.toHaveProperty('goalContinues');
    expect((await cli.run(['goal', agentId, ...common])).stdout).toContain('· blocked (completion:cited: ');
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);

    const resumed = await cli.run(['goal', agentId, 'resume', ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stdout).toContain('· active (resume by a person) · revision 2');
    const next = await cli.run(['run', '--continue', agentId, 'cite only what you read', '--json', ...common]);
    expectExit(expect, next, 0);
    const events = parseEvents(next.stdout);
    // the continued turn keeps what the limit does
    expect(ofType(events, 'turn/start')[0]!.data.settings.onCompletionExhausted).toBe('block');
    expect(ofType(events, 'completion/rejected')).toEqual([]);
    expect(ofType(events, 'goal/updated').at(-1)!.data).toMatchObject({ phase: 'complete', revision: 4 });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'The demo is described in [README.md].' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  // @4: killed as the step of the answer at the limit starts (its refusal not yet decided); after:goal/updated:
  // killed after the commit holding the block and the turn's end
  test.concurrent.for(['after:step/start@4', 'after:goal/updated'])('killed at %s, resume blocks the goal once', async (fault, { expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, FABRICATED(3));
    const crashed = await cli.run([
      'run', 'why?', '--goal', 'explain with sources', '--model', model, '--cwd', ws, '--complete-when', 'cited',
      '-c', 'on_completion_exhausted=block', '--json', '--fault', fault, ...common,
    ]);
    expect(crashed.signal, show(crashed)).toBe('SIGKILL');
    const agentId = lines(crashed.stderr)[0]!;
    const resumed = await cli.run(['resume', agentId, ...common]);
    // a turn still open ends as the live one would have, asking the person; one that ended has nothing left to do
    expectExit(expect, resumed, 4);
    if (fault.startsWith('after:step')) {
      expect(resumed.stdout, show(resumed)).toContain('stopped (completion_exhausted)');
      expect(resumed.stdout).toContain(`actorloop goal ${agentId} resume`);
    }
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(ofType(log, 'completion/rejected')).toHaveLength(3);
    expect(ofType(log, 'goal/updated').map((u) => [u.data.revision, u.data.phase, u.data.by])).toEqual([[1, 'blocked', 'runtime']]);
    expect(ofType(log, 'turn/end').map((e) => [e.data.outcome, e.data.reason])).toEqual([['stopped', 'completion_exhausted']]);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });
});

describe('--complete-when code-change', () => {
  const script = () => ({
    responses: [
      // a failing run of the test command is no verification (and changes nothing)
      { tool_calls: [{ name: 'shell', arguments: { command: 'node --test' } }] },
      { tool_calls: [{ name: 'write_file', arguments: { path: 'src/slug.js', content: fixedSlug } }] },
      { content: 'Fixed slugify.' },
      { tool_calls: [{ name: 'shell', arguments: { command: 'node --test' } }] },
      { content: 'Fixed slugify; node --test passes.' },
    ],
  });

  test.concurrent('an answer after a change with no passing verification is refused; after the test command passes it completes', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, script());
    const run = await cli.run([
      'run', 'fix the slug test', '--model', model, '--cwd', ws, '--approve', 'full-auto', '--complete-when', 'code-change',
      '-c', 'verify_commands=["node --test", "npm test"]', '--json', ...common,
    ]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'turn/start')[0]!.data.settings).toMatchObject({ completeWhen: 'code-change', verifyCommands: ['node --test', 'npm test'] });
    const results = ofType(events, 'tool/result');
    expect(results.map((r) => r.data.ok)).toEqual([false, true, true]);
    expect(ofType(events, 'policy/decided').map((d) => d.data.verification === true)).toEqual([true, false, true]);
    const refusals = ofType(events, 'completion/rejected');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.data.missing[0]).toMatch(/files changed and no verification passed in this turn: run `node --test` or `npm test`/);
    // refused after the write, before the passing run
    expect(refusals[0]!.seq).toBeGreaterThan(results[1]!.seq);
    expect(refusals[0]!.seq).toBeLessThan(results[2]!.seq);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'Fixed slugify; node --test passes.' } });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(fixedSlug);
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  test.concurrent('a turn that changed nothing completes on its answer', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, { responses: [{ tool_calls: [{ name: 'read_file', arguments: { path: 'src/slug.js' } }] }, { content: 'It only replaces the first space.' }] });
    const run = await cli.run(['run', 'what is wrong?', '--model', model, '--cwd', ws, '--complete-when', 'code-change', '-c', 'verify_commands=["node --test"]', '--json', ...common]);
    expectExit(expect, run, 0);
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'completion/rejected')).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  });
});

describe('--continue: the next turn keeps its policy unless the command names one', () => {
  test.concurrent('a continued turn stays cited and may cite what the first turn read; code-change named then needs verify_commands', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, {
      responses: [
        { tool_calls: [{ name: 'read_file', arguments: { path: 'README.md' } }] },
        { content: 'The demo is described in [README.md].' },
        // the second turn reads nothing: its citation is evidence of the first
        { content: 'As I read before, [README.md].' },
      ],
    });
    const first = await cli.run(['run', 'what is this?', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--json', ...common]);
    expectExit(expect, first, 0);
    const agentId = lines(first.stderr)[0]!;
    const refused = await cli.run(['run', '--continue', agentId, 'and now fix it', '--complete-when', 'code-change', ...common]);
    expectExit(expect, refused, 2);
    expect(refused.stderr).toContain('needs verify_commands');
    const second = await cli.run(['run', '--continue', agentId, 'say it again', '-c', 'on_completion_exhausted=block', '--json', ...common]);
    expectExit(expect, second, 0);
    const events = parseEvents(second.stdout);
    expect(ofType(events, 'turn/start')[0]!.data.settings.completeWhen).toBe('cited');
    // `-c` names what the limit does for the continued turn; the first turn recorded none (fail)
    expect(ofType(parseEvents(first.stdout), 'turn/start')[0]!.data.settings.onCompletionExhausted).toBeUndefined();
    expect(ofType(events, 'turn/start')[0]!.data.settings.onCompletionExhausted).toBe('block');
    expect(ofType(events, 'completion/rejected')).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'As I read before, [README.md].' } });
  });
});

test.concurrent('config show names the completion settings and where each came from', async ({ expect, onTestFinished }) => {
  const { ws, cli, common } = await setup(onTestFinished, CITED);
  await writeFile(join(ws, 'actorloop.toml'), 'verify_commands = ["node --test"]\non_completion_exhausted = "block"\n');
  const shown = await cli.run(['config', 'show', '--cwd', ws, '-c', 'complete_when=code-change', ...common]);
  expectExit(expect, shown, 0);
  expect(lines(shown.stdout)).toEqual(expect.arrayContaining([
    'complete_when: code-change (flag)',
    'verify_commands: "node --test" (workspace file)',
    'max_completion_rejections: 3 (default)',
    // an untrusted workspace may set it: it changes how a turn ends, never what may run
    'on_completion_exhausted: block (workspace file)',
  ]));
  const flagged = await cli.run(['config', 'show', '--cwd', ws, '-c', 'on_completion_exhausted=fail', ...common]);
  expect(lines(flagged.stdout)).toContain('on_completion_exhausted: fail (flag)');
  const bare = await cli.run(['config', 'show', ...common]);
  expect(lines(bare.stdout)).toContain('on_completion_exhausted: fail (default)');
});

describe('a completion policy the run could never satisfy: one line, exit 2, nothing started', () => {
  async function expectUsage(expect: ExpectStatic, r: CliResult): Promise<string> {
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 2, signal: null });
    expect(r.stdout, show(r)).toBe('');
    const errLines = lines(r.stderr);
    expect(errLines, show(r)).toHaveLength(1);
    expect(errLines[0]).toMatch(/^actorloop: /);
    return errLines[0]!;
  }

  test.concurrent('code-change with no verify_commands', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, CITED);
    const line = await expectUsage(expect, await cli.run(['run', 'x', '--model', model, '--cwd', ws, '--complete-when', 'code-change', ...common]));
    expect(line).toContain('needs verify_commands');
  });

  test.concurrent('cited with tools that retrieve nothing', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, CITED);
    const line = await expectUsage(expect, await cli.run(['run', 'x', '--model', model, '--cwd', ws, '--complete-when', 'cited', '--tools', 'write_file,shell', ...common]));
    expect(line).toContain('--complete-when cited needs a tool that retrieves evidence');
    expect(line).toContain('read_file');
  });

  test.concurrent('an unknown policy, and a bad complete_when in the config', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, CITED);
    const line = await expectUsage(expect, await cli.run(['run', 'x', '--model', model, '--cwd', ws, '--complete-when', 'sometimes', ...common]));
    expect(line).toContain('unknown completion policy "sometimes"');
    expect(line).toContain('answer, code-change, cited');
    const config = await expectUsage(expect, await cli.run(['run', 'x', '--model', model, '--cwd', ws, '-c', 'complete_when=done', ...common]));
    expect(config).toContain('complete_when');
  });
});
