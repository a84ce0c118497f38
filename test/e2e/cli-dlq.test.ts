// Dead letters through the real CLI: a follow-up to an agent could not be taken on any of its
// deliveries (a host whose actor refuses mail), so it became a dead letter. `dlq list` shows it,
// `dlq redrive` sends it again, and `resume` (a fresh process) takes it and runs the turn.
// Real processes from dist (run `npm run build` first), one real nats-server.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test, type TestContext } from 'vitest';
import type { FaultInjector } from '../../src/actors/faults/faults.js';
import { listDeadLetters } from '../../src/bus/dead-letters.js';
import { message } from '../actors/harness.js';
import { AGENT_ID, lines, parseEvents, show, type CliProcesses, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { openTestRuntime } from '../helpers/runtime.js';

const stack = useCliStack();

let dataDir: string;
let ws: string;
let scriptPath: string;

beforeAll(async () => {
  dataDir = await stack.dir('data');
  ws = await stack.dir('ws');
  scriptPath = join(dataDir, 'script.json');
  await writeFile(scriptPath, JSON.stringify({ responses: [{ content: 'first answer' }, { content: 'follow-up answer' }] }));
});

function cliFor(ctx: TestContext): { cli: CliProcesses; run: (...args: string[]) => Promise<CliResult> } {
  const cli = stack.cli(ctx, dataDir);
  return { cli, run: (...args) => cli.run([...args, '--nats', stack.nats.url, '--data-dir', dataDir]) };
}

function expectExit(r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/** Hosts the agent in this process with an actor that refuses mail, until `messageId` is a dead letter. */
async function deadLetterAFollowUp(agentId: string): Promise<string> {
  const rt = await openTestRuntime({ natsUrl: stack.nats.url });
  try {
    const refusing: FaultInjector = {
      hit(point) {
        if (point === 'before:inbox-receive') throw new Error('the agent cannot take mail now');
      },
    };
    const sup = rt.supervisor({ faults: refusing, extra: { inbox: { maxDeliver: 2, backoffMs: [200] } } });
    await sup.hydrate(agentId);
    const msg = message(agentId, 'and one more thing?', { kind: 'follow_up' });
    await sup.send(msg);
    const until = Date.now() + 15_000;
    while (!(await listDeadLetters(rt.bus, { actorId: agentId })).some((l) => l.id === msg.id)) {
      if (Date.now() > until) throw new Error(`${msg.id} never became a dead letter`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return msg.id;
  } finally {
    await rt.close();
  }
}

describe('actorloop dlq', () => {
  test('lists a dead letter, redrives it, and the agent takes it on resume', async (ctx) => {
    const { run } = cliFor(ctx);
    const first = await run('run', 'hello', '--model', `scripted:${scriptPath}`, '--cwd', ws, '--json');
    expectExit(first, 0);
    const agentId = parseEvents(first.stdout)[0]!.actor;
    expect(agentId).toMatch(AGENT_ID);

    const messageId = await deadLetterAFollowUp(agentId);

    const listed = await run('dlq', 'list', '--json');
    expectExit(listed, 0);
    const letters = lines(listed.stdout).map((l) => JSON.parse(l) as Record<string, unknown>);
    const letter = letters.find((l) => l.id === messageId);
    expect(letter, listed.stdout).toMatchObject({
      actorId: agentId, deliveries: 2, state: 'dead', source: 'host',
      error: { code: 'inbox.take_failed', message: 'the agent cannot take mail now' },
    });
    expect(JSON.parse(Buffer.from(letter!.data as string, 'base64').toString('utf8'))).toMatchObject({ id: messageId, to: agentId, kind: 'follow_up' });

    const human = await run('dlq', 'list');
    expectExit(human, 0);
    expect(human.stdout).toMatch(new RegExp(`^${messageId}  ${agentId}  2 deliveries  .*inbox\\.take_failed: the agent cannot take mail now$`, 'm'));

    const redriven = await run('dlq', 'redrive', messageId, '--json');
    expectExit(redriven, 0);
    expect(JSON.parse(lines(redriven.stdout)[0]!)).toMatchObject({ id: messageId, actorId: agentId, duplicate: false });
    const twice = await run('dlq', 'redrive', messageId);
    expectExit(twice, 2);
    expect(lines(twice.stderr), show(twice)).toHaveLength(1);
    expect(twice.stderr).toMatch(new RegExp(`^actorloop: dead letter ${messageId} was already redriven at \\S+\\. if it failed again`));

    const resumed = await run('resume', agentId, '--json');
    expectExit(resumed, 0);
    const log = parseEvents((await run('events', agentId, '--json')).stdout);
    const received = log.filter((e) => e.type === 'inbox/received') as Array<{ data: { messageId: string } }>;
    expect(received.map((e) => e.data.messageId).slice(1)).toEqual([messageId]);
    const answers = log.filter((e) => e.type === 'turn/end').map((e) => (e as { data: { answer: string | null } }).data.answer);
    expect(answers).toEqual(['first answer', 'follow-up answer']);

    // redriven: no longer waiting, still on record
    expect(lines((await run('dlq', 'list', '--json', '--actor', agentId)).stdout)).toEqual([]);
    const all = lines((await run('dlq', 'list', '--json', '--all', '--actor', agentId)).stdout).map((l) => JSON.parse(l));
    expect(all).toMatchObject([{ id: messageId, state: 'redriven' }]);
  });

  test('an unknown ID: one line on stderr, exit 3; nothing dead: says so', async (ctx) => {
    const { run } = cliFor(ctx);
    const unknown = await run('dlq', 'redrive', 'msg_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--json');
    expectExit(unknown, 3);
    expect(unknown.stdout).toBe('');
    expect(lines(unknown.stderr)).toEqual([
      'actorloop: no dead letter msg_01ARZ3NDEKTSV4RRFFQ69G5FAV. list them with `actorloop dlq list`, and pass the same --data-dir and --nats as the runs',
    ]);

    const empty = await run('dlq', 'list', '--actor', 'agt_01ARZ3NDEKTSV4RRFFQ69G5FAV');
    expectExit(empty, 0);
    expect(empty.stdout).toBe('no dead letters waiting (`--all` shows redriven ones too)\n');
  });
});
