// `actorloop send` from a person's point of view: bad input is one line and exit 2 with the
// agent's log untouched, an unknown agent is exit 3 as for every command, a message to an idle
// agent starts a turn with the last turn's settings, a message to a running one lands in its log as
// a steer, and a line typed into `run` on a terminal (a pty from `script`) is sent as a steer and
// shown pending. How a steer is then delivered into a step is the runtime's (its own tests).
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { REPO_ROOT, cliEnv, lines, parseEvents, show, type CliProcesses, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const MSG_LINE = /^msg_[0-9A-HJKMNP-TV-Z]{26} (steer|inject|follow_up|user_message)$/;

const stack = useCliStack();

const setup = (onTestFinished: TestEnd) => stack.setup(onTestFinished, { prefix: 'send' });

async function script(ws: string, name: string, responses: unknown[]): Promise<string> {
  const file = join(ws, name);
  await writeFile(file, JSON.stringify({ responses }));
  return file;
}

/** `send` with `input` on its stdin (the text `-` reads). */
function sendWithStdin(args: string[], input: string, env: NodeJS.ProcessEnv): Promise<CliResult> {
  const started = performance.now();
  const child = spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  child.stdin.end(input);
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => child.once('close', (code, signal) => {
    clearTimeout(timer);
    resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
  }));
}

async function logOf(cli: CliProcesses, agentId: string, common: string[]) {
  return parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
}

describe('send: bad input', () => {
  test('each is one line on stderr and exit 2, and the agent\'s log is as it was', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const model = await script(ws, 'one.json', [{ content: 'done' }]);
    const run = await cli.run(['run', 'hi', '--model', `scripted:${model}`, '--cwd', ws, ...common]);
    expect(run.code, show(run)).toBe(0);
    const agentId = lines(run.stdout)[0]!;
    const before = await logOf(cli, agentId, common);

    const bad: Array<[string, Promise<CliResult>, RegExp]> = [
      ['empty', cli.run(['send', agentId, '', ...common]), /the message is empty/],
      ['blank', cli.run(['send', agentId, '  \n ', ...common]), /the message is empty/],
      ['steer + follow-up', cli.run(['send', agentId, 'x', '--steer', '--follow-up', ...common]), /'--steer' cannot be used with option '--follow-up'/],
      ['inject + steer', cli.run(['send', agentId, 'x', '--inject', '--steer', ...common]), /cannot be used with option/],
      ['follow-up + inject', cli.run(['send', agentId, 'x', '--follow-up', '--inject', ...common]), /cannot be used with option/],
      ['empty stdin', sendWithStdin(['send', agentId, '-', ...common], '', cliEnv(dataDir)), /the message is empty/],
      ['over the limit', sendWithStdin(['send', agentId, '-', ...common], 'x'.repeat(300_000), cliEnv(dataDir)),
        /over the inbox's limit of 262,144 bytes \(256 KiB\); nothing was sent/],
    ];
    for (const [what, pending, message] of bad) {
      const r = await pending;
      expect({ what, code: r.code, stdout: r.stdout }, show(r)).toEqual({ what, code: 2, stdout: '' });
      expect(lines(r.stderr), what).toHaveLength(1);
      expect(r.stderr, what).toMatch(message);
    }
    expect(await logOf(cli, agentId, common)).toEqual(before);
    // and no mail is waiting for it either: a resume finds nothing to do
    const resumed = await cli.run(['resume', agentId, ...common]);
    expect(resumed.code, show(resumed)).toBe(0);
    expect(resumed.stderr).toContain('has no open turn to resume');
  }, 60_000);

  test('an unknown agent: exit 3 and the one line every command says', async ({ onTestFinished }) => {
    const { cli, common } = await setup(onTestFinished);
    const r = await cli.run(['send', 'agt_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'hello', ...common]);
    expect(r.code, show(r)).toBe(3);
    expect(lines(r.stderr)).toEqual([
      'actorloop: no agent agt_01ARZ3NDEKTSV4RRFFQ69G5FAV in this data dir. list agents with `actorloop runs`, and pass the same --data-dir and --nats as the run',
    ]);
  });
});

describe('send: delivery', () => {
  test('to an idle agent: a new turn with the last turn\'s settings, followed to its end', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const model = await script(ws, 'two.json', [{ content: 'first answer' }, { content: 'second answer' }]);
    const run = await cli.run(['run', 'hi', '--model', `scripted:${model}`, '--cwd', ws, '--max-steps', '3', ...common]);
    expect(run.code, show(run)).toBe(0);
    const agentId = lines(run.stdout)[0]!;

    const r = await cli.run(['send', agentId, 'and now the rest', ...common]);
    expect(r.code, show(r)).toBe(0);
    const [first] = lines(r.stdout);
    expect(first).toMatch(MSG_LINE);
    expect(first).toMatch(/ user_message$/);
    expect(r.stdout).toContain('second answer');
    expect(r.stderr).toContain("it starts a turn with the last turn's settings");

    const log = await logOf(cli, agentId, common);
    const messageId = first!.split(' ')[0]!;
    expect(log.find((e) => e.type === 'inbox/received' && e.data.messageId === messageId)).toMatchObject({
      data: { kind: 'user_message', from: 'client:cli', content: 'and now the rest', request: null },
    });
    const starts = log.flatMap((e) => (e.type === 'turn/start' ? [e] : []));
    expect(starts).toHaveLength(2);
    expect(starts[1]).toMatchObject({ data: { source: 'user_message', messageIds: [messageId] } });
    // the settings are the first turn's (its budgets too; neither had a deadline)
    expect(starts[1]!.data.settings).toEqual(starts[0]!.data.settings);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'second answer' } });
    const verify = await cli.run(['verify', agentId, ...common]);
    expect(verify.code, show(verify)).toBe(0);
  }, 60_000);

  test('an inject to an idle agent nobody runs: not followed, it waits in the inbox, and send says resume carries it', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const model = await script(ws, 'one.json', [{ content: 'done' }]);
    const run = await cli.run(['run', 'hi', '--model', `scripted:${model}`, '--cwd', ws, ...common]);
    expect(run.code, show(run)).toBe(0);
    const agentId = lines(run.stdout)[0]!;
    const before = await logOf(cli, agentId, common);
    const r = await cli.run(['send', agentId, 'the API moved to v2', '--inject', ...common]);
    expect(r.code, show(r)).toBe(0);
    expect(lines(r.stdout)).toHaveLength(1);
    expect(lines(r.stdout)[0]).toMatch(/ inject$/);
    expect(r.stderr).toContain('an inject never starts a turn');
    expect(r.stderr).toContain(`nobody runs ${agentId} now: the message waits in its inbox, and \`actorloop resume ${agentId} --data-dir ${dataDir} --nats ${stack.nats.url}\` carries it`);
    // in the durable inbox, not yet in the log: no host took it
    expect(await logOf(cli, agentId, common)).toEqual(before);
  }, 60_000);

  /** A `run` hosting its agent here, its model slow: resolves once the model request is in flight. */
  async function slowRun(ws: string, dataDir: string, common: string[], onTestFinished: (fn: () => Promise<void>) => void) {
    const model = await script(ws, 'slow.json', [{ content: 'slow answer', delay_ms: 4_000 }, { content: 'after the steer' }]);
    const child = spawn(process.execPath, ['bin/actorloop.js', 'run', 'wait', '--model', `scripted:${model}`, '--cwd', ws, '--json', ...common], {
      cwd: REPO_ROOT, env: cliEnv(dataDir),
    });
    onTestFinished(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    while (!out.includes('"type":"attempt/start"')) await new Promise((r) => setTimeout(r, 50));
    return { agentId: lines(err)[0]!, exited, err: () => err };
  }

  /** The steer `sent` (a `send` result) as the agent's log received it, before its turn ended. */
  async function receivedSteer(cli: CliProcesses, agentId: string, common: string[], sent: CliResult) {
    const messageId = lines(sent.stdout)[0]!.split(' ')[0]!;
    const log = await logOf(cli, agentId, common);
    const received = log.find((e) => e.type === 'inbox/received' && e.data.messageId === messageId);
    expect(received, JSON.stringify(log.map((e) => e.type))).toBeDefined();
    // received while the turn was open: pending in the log before the turn ended
    expect(received!.seq).toBeLessThan(log.find((e) => e.type === 'turn/end')!.seq);
    return received!;
  }

  test('to a running agent (hosted by its run), by default: a steer, in its log as inbox/received', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const run = await slowRun(ws, dataDir, common, onTestFinished);
    const sent = await cli.run(['send', run.agentId, 'go left', '--no-follow', ...common]);
    expect(sent.code, show(sent)).toBe(0);
    expect(lines(sent.stdout)[0]).toMatch(/ steer$/);
    expect(sent.stderr).toContain('the running turn takes it at its next step');
    expect(await run.exited, run.err()).toBe(0);
    expect(await receivedSteer(cli, run.agentId, common, sent)).toMatchObject({ data: { kind: 'steer', content: 'go left', from: 'client:cli' } });
  }, 60_000);

  test('--steer to a running agent: in its log as inbox/received kind steer, and send follows the turn to its end', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const run = await slowRun(ws, dataDir, common, onTestFinished);
    const sent = await cli.run(['send', run.agentId, 'no, right', '--steer', ...common]);
    expect(sent.code, show(sent)).toBe(0);
    expect(lines(sent.stdout)[0]).toMatch(/ steer$/);
    expect(sent.stdout).toMatch(/^completed · /m);
    expect(sent.stderr).toMatch(/› steer msg_\w+ pending/);
    expect(await run.exited, run.err()).toBe(0);
    expect(await receivedSteer(cli, run.agentId, common, sent)).toMatchObject({ data: { kind: 'steer', content: 'no, right', from: 'client:cli' } });
  }, 60_000);
});

describe('run on a terminal', () => {
  test('a line typed while the turn runs is sent as a steer and shown pending', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const model = await script(ws, 'slow.json', [{ content: 'slow answer', delay_ms: 3_000 }, { content: 'after the steer' }]);
    const cmd = ['node', 'bin/actorloop.js', 'run', 'wait', '--model', `scripted:${model}`, '--cwd', ws, ...common].join(' ');
    const term = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['pipe', 'pipe', 'pipe'] });
    onTestFinished(async () => {
      if (term.exitCode === null && term.signalCode === null) term.kill('SIGKILL');
    });
    let screen = '';
    term.stdout.setEncoding('utf8').on('data', (s: string) => (screen += s));
    const closed = new Promise<number | null>((resolve) => term.on('close', resolve));
    while (!screen.includes('· model')) await new Promise((r) => setTimeout(r, 50));
    term.stdin.write('use the v2 API');
    await new Promise((r) => setTimeout(r, 100));
    term.stdin.write('\r');
    expect(await closed, screen).toBe(0);
    const plain = screen.replace(/\r/g, '');
    const pending = /› steer (msg_[0-9A-HJKMNP-TV-Z]{26}) pending/.exec(plain);
    expect(pending, plain).not.toBeNull();
    const agentId = lines(plain)[0]!;
    const log = await logOf(cli, agentId, common);
    expect(log.find((e) => e.type === 'inbox/received' && e.data.messageId === pending![1])).toMatchObject({
      data: { kind: 'steer', content: 'use the v2 API', from: 'client:cli' },
    });
  }, 60_000);
});
