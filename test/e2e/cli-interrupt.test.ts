// Ctrl-C on a person's terminal (a pseudo-terminal from `script`), and the status `runs` shows
// after it: the first Ctrl-C interrupts the turn through the agent's inbox (turn/end cancelled,
// exit 130), two quick ones leave at once with the turn open for `resume`, Ctrl-C at the approval
// prompt is an interrupt like any other, and `runs` says what each agent's log says.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import { pino } from 'pino';
import { openBus } from '../../src/bus/connection.js';
import { onTerminal } from '../helpers/terminal.js';
import { DEMO_SCRIPT, REPO_ROOT, cliEnv, lines, parseEvents, parseRuns, show, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

const stack = useCliStack();

const setup = (onTestFinished: TestEnd) => stack.setup(onTestFinished);

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

describe('Ctrl-C on a terminal', () => {
  test('at the approval prompt it interrupts the turn: exit 130, no error, the log ends cancelled (interrupted)', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const term = onTerminal(['node', 'bin/actorloop.js', 'run', JSON.stringify(TASK), '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common], cliEnv(dataDir), onTestFinished);
    await term.until('allow? [y]es once');
    term.ctrlC();
    const code = await term.closed;
    expect(term.screen).not.toContain('unexpected error');
    expect(term.screen).toContain('interrupting the turn');
    expect(term.screen).toMatch(/cancelled \(interrupted\)/);
    expect(code, term.screen).toBe(130);
    const agentId = lines(term.screen.replace(/\r/g, ''))[0]!;
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.map((e) => e.type)).toContain('actor/parked');
    expect(log.find((e) => e.type === 'inbox/received' && e.data.kind === 'interrupt')).toBeDefined();
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled', reason: 'interrupted' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('twice in a row it leaves at once, the turn stays open, and resume carries it on to the end', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = join(ws, 'slow.json');
    await writeFile(script, JSON.stringify({ responses: [{ content: 'done at last', delay_ms: 3_000 }] }));
    const term = onTerminal(['node', 'bin/actorloop.js', 'run', 'wait', '--model', `scripted:${script}`, '--cwd', ws, ...common], cliEnv(dataDir), onTestFinished);
    // the model request is in flight once the progress line says so
    await term.until('· model');
    const t0 = Date.now();
    term.ctrlC();
    await new Promise((r) => setTimeout(r, 150));
    term.ctrlC();
    const code = await term.closed;
    expect(code, term.screen).toBe(130);
    expect(Date.now() - t0).toBeLessThan(2_500);
    expect(term.screen).toContain('leaving now: the turn stays open');
    const agentId = lines(term.screen.replace(/\r/g, ''))[0]!;
    let log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.map((e) => e.type)).not.toContain('turn/end');
    expect(log.find((e) => e.type === 'inbox/received' && e.data.kind === 'interrupt')).toBeUndefined();

    const resumed = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stdout).toContain('done at last');
    log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });
});

describe('runs', () => {
  test('shows the status each log ends in: cancelled, waiting for a person, completed (whatever the directory cached)', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const slow = join(ws, 'slow.json');
    await writeFile(slow, JSON.stringify({ responses: [{ content: 'too late', delay_ms: 20_000 }] }));
    // cancelled: Ctrl-C (SIGINT) during the model call
    const child = spawn(process.execPath, ['bin/actorloop.js', 'run', 'wait', '--model', `scripted:${slow}`, '--cwd', ws, '--json', ...common], {
      cwd: REPO_ROOT, env: cliEnv(common[3]!),
    });
    onTestFinished(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    while (!out.includes('"type":"attempt/start"')) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    expect(await exited, err).toBe(130);
    const cancelled = lines(err)[0]!;

    // waiting: a run without a TTY that parks for an approval ends its --json stream with the parked fact
    const parkedRun = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, parkedRun, 5);
    const waiting = lines(parkedRun.stderr)[0]!;
    const last = parseEvents(parkedRun.stdout).at(-1)!;
    expect(last.type).toBe('actor/parked');
    if (last.type === 'actor/parked') {
      expect(last.data.waitingFor).toBe('approval');
      expect(last.data.commands[0]).toBe(`actorloop approve ${waiting} ${last.data.ids[0]}`);
    }

    // completed, with the directory's cached status left behind (as a library run leaves it)
    const done = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, ...common]);
    expectExit(expect, done, 0);
    const completed = lines(done.stdout)[0]!;
    const bus = await openBus({ natsUrl: stack.nats.url, dataDir: common[3]!, logger: pino({ level: 'silent' }) });
    for (const id of [cancelled, waiting, completed]) {
      const entry = (await bus.directory.get(id))!;
      await bus.directory.put({ ...entry, status: 'running' });
    }
    await bus.close();

    const runs = parseRuns((await cli.run(['runs', '--json', ...common])).stdout);
    // the server is this file's: the other tests' agents are listed too
    const status = Object.fromEntries(runs.filter((r) => [cancelled, waiting, completed].includes(r.actorId)).map((r) => [r.actorId, r.status]));
    expect(status).toEqual({ [cancelled]: 'cancelled', [waiting]: 'waiting', [completed]: 'completed' });
    const text = (await cli.run(['runs', ...common])).stdout;
    expect(text).toMatch(new RegExp(`${cancelled}  cancelled`));
  });
});
