// Questions through the real CLI: `run` without a TTY stops at an ask_user call (exit 5, the
// question and the command that answers it on stderr), `answer` checks the answer against the
// log before it sends anything and hosts the turn to its end; a question waits across a SIGKILL
// and `resume`; a sensitive answer reaches the model and nothing a person or a log can read.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import { lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';

const stack = useCliStack();

const colour = { name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } };
const token = { name: 'ask_user', arguments: { question: 'The deploy token?', sensitive: true } };

async function setup(onTestFinished: (fn: () => Promise<void>) => void, call: object, final = 'done', env: Record<string, string> = {}) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [{ tool_calls: [call] }, { tool_calls: [{ name: 'list_dir', arguments: {} }] }, { content: final }] }));
  const cli = stack.cli(onTestFinished, dataDir, env);
  const common = stack.flags(dataDir);
  return { ws, dataDir, cli, common, run: ['run', 'ask me', '--model', `scripted:${script}`, '--cwd', ws, ...common] };
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function questionOf(r: CliResult): string {
  return /waiting for an answer to question (q_\w+)/.exec(r.stderr)![1]!;
}

describe('questions from the CLI', () => {
  test('run without a TTY exits 5 with the question and its answer command; answer --option finishes the turn', async ({ expect, onTestFinished }) => {
    const { cli, common, run, dataDir } = await setup(onTestFinished, colour, 'blue it is');
    const first = await cli.run([...run, '--json']);
    expectExit(expect, first, 5);
    const agentId = lines(first.stderr)[0]!;
    const qid = questionOf(first);
    expect(first.stderr).toContain('Which colour?');
    expect(first.stderr).toContain('1) Red [red]');
    // the line carries the run's data dir and server, and the placeholder goes last
    expect(first.stderr).toContain(`answer: actorloop answer ${agentId} ${qid} --data-dir ${dataDir} --nats ${stack.nats.url} --option <red|blue>`);
    const events = parseEvents(first.stdout);
    expect(events.find((e) => e.type === 'ask/asked')).toMatchObject({ data: { questionId: qid, question: 'Which colour?' } });
    expect(events.at(-1)).toMatchObject({ type: 'actor/parked', data: { waitingFor: 'question', ids: [qid] } });

    const runs = await cli.run(['runs', '--json', ...common]);
    expect(runs.stdout).toContain('"status":"waiting"');

    const answered = await cli.run(['answer', agentId, qid, '--option', 'blue', '--json', ...common]);
    expectExit(expect, answered, 0);
    const after = parseEvents(answered.stdout);
    expect(after.find((e) => e.type === 'ask/answered')).toMatchObject({ data: { outcome: 'answered', optionId: 'blue' } });
    expect(after.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'blue it is' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);

    // answered once: a second answer is a clear error and sends nothing
    const again = await cli.run(['answer', agentId, qid, '--option', 'red', ...common]);
    expectExit(expect, again, 2);
    expect(lines(again.stderr)[0]).toMatch(new RegExp(`^actorloop: question ${qid} is already answered`));
  });

  test('bad answers: one line each, exit 2 (3 for an unknown agent or question), and nothing is sent', async ({ expect, onTestFinished }) => {
    const { cli, common, run } = await setup(onTestFinished, colour);
    const first = await cli.run(run);
    expectExit(expect, first, 5);
    const agentId = lines(first.stdout)[0]!;
    const qid = questionOf(first);
    const cases: Array<[string[], number, RegExp]> = [
      [['answer', agentId, qid, '', ...common], 2, /the answer is empty/],
      [['answer', 'agt_00000000000000000000000000', qid, 'red', ...common], 3, /agt_00000000000000000000000000/],
      [['answer', agentId, 'q_NOPE', '--option', 'red', ...common], 2, /"q_NOPE" is not a question ID/],
      // a question the agent never asked is not found, as through the gateway
      [['answer', agentId, 'q_01ABCDEFGHJKMNPQRSTVWXYZ01', '--option', 'red', ...common], 3, new RegExp(`has no question q_01ABCDEFGHJKMNPQRSTVWXYZ01.*questions waiting for an answer: ${qid}`)],
      [['answer', agentId, qid, '--option', 'green', ...common], 2, /has no option "green"/],
      [['answer', agentId, qid, 'purple please', ...common], 2, /takes no free text/],
      [['answer', agentId, qid, 'red', '--option', 'red', ...common], 2, /not both/],
    ];
    for (const [args, code, message] of cases) {
      const r = await cli.run(args);
      expectExit(expect, r, code);
      expect(r.stderr, show(r)).toMatch(message);
      expect(r.stderr.startsWith('actorloop: '), show(r)).toBe(true);
    }
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.filter((e) => e.type === 'inbox/received')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'inbox/cancelled' || e.type === 'ask/answered')).toEqual([]);
  });

  test('a question waits across a SIGKILL after ask/asked: resume asks nothing again and exits 5; answer finishes', async ({ expect, onTestFinished }) => {
    const { cli, common, run } = await setup(onTestFinished, colour);
    const crashed = await cli.run([...run, '--fault', 'after:ask/asked']);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stdout)[0]!;

    const resumed = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, resumed, 5);
    const qid = questionOf(resumed);
    const answered = await cli.run(['answer', agentId, qid, '--option', 'red', '--json', ...common]);
    expectExit(expect, answered, 0);
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.filter((e) => e.type === 'ask/asked')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'tool/start').map((e) => e.type === 'tool/start' && e.data.rerun).slice(0, 2)).toEqual([false, true]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('a sensitive answer never reaches the log, the output or stderr, yet the model reads it', async ({ expect, onTestFinished }) => {
    const secret = 'tok-SECRET-4242';
    // every log line, debug included, goes to stderr: none may hold the answer
    const { cli, common, run } = await setup(onTestFinished, token, 'done', { ACTORLOOP_LOG: 'debug' });
    const first = await cli.run(run);
    expectExit(expect, first, 5);
    const agentId = lines(first.stdout)[0]!;
    const qid = questionOf(first);
    expect(first.stderr).toContain('sensitive: the answer reaches the agent');

    const answered = await cli.run(['answer', agentId, qid, secret, ...common]);
    expectExit(expect, answered, 0);
    expect(answered.stdout).toContain('[sensitive]');
    const events = await cli.run(['events', agentId, '--json', ...common]);
    const human = await cli.run(['events', agentId, ...common]);
    for (const r of [answered, events, human]) {
      expect(r.stdout + r.stderr).not.toContain(secret);
    }
    expect(human.stdout).toContain('[sensitive]');
    // the prepared request of the next step (a blob in the data dir's LMDB) holds it
    const log = parseEvents(events.stdout);
    const prepared = log.filter((e) => e.type === 'request/prepared').at(-1)!;
    expect(prepared.type === 'request/prepared' && prepared.data.digest).toMatch(/^sha256:/);
    const body = await readPrepared(common, prepared.type === 'request/prepared' ? prepared.data.digest : '');
    expect(body).toContain(secret);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });
});

/** The prepared request `digest` as the data dir's blob store holds it. */
async function readPrepared(common: string[], digest: string): Promise<string> {
  const dataDir = common[common.indexOf('--data-dir') + 1]!;
  const lmdb = openLmdbStore(dataDir);
  try {
    return (await createLmdbBlobStore(lmdb).getText(digest)) ?? '';
  } finally {
    await lmdb.close();
  }
}
