// `events --follow` sees commits live, and `demo` runs on the embedded defaults and leaves no
// nats-server behind.
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { pino } from 'pino';
import { openBus } from '../../src/bus/connection.js';
import { publishInbox } from '../../src/bus/inbox.js';
import { natsServerVersion } from '../../src/bus/nats-server.js';
import { newId } from '../../src/protocol/ids.js';
import { pidAlive } from '../../src/bus/embedded.js';
import { AGENT_ID, DEMO_SCRIPT, REPO_ROOT, cliEnv, lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

test('events --follow prints the log, then live commits of a resume, and stops on Ctrl-C', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const env = cliEnv(dataDir);
  const cli = stack.pool.forTest({ onTestFinished }, env);
  const common = stack.flags(dataDir);
  const crashed = await cli.run(['run', 'fix it', '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', '--fault', 'after:tool/start@3', ...common]);
  expect(crashed.signal, show(crashed)).toBe('SIGKILL');
  const agentId = lines(crashed.stderr)[0]!;
  expect(agentId).toMatch(AGENT_ID);

  const follower = spawn(process.execPath, ['bin/actorloop.js', 'events', agentId, '--follow', '--json', ...common], { cwd: REPO_ROOT, env });
  onTestFinished(async () => {
    if (follower.exitCode === null) follower.kill('SIGKILL');
  });
  let out = '';
  const seen = (pred: (s: string) => boolean) =>
    new Promise<void>((resolve) => {
      const check = (): void => {
        if (pred(out)) resolve();
      };
      follower.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        check();
      });
      check();
    });
  const exited = new Promise<number | null>((resolve) => follower.on('exit', (code) => resolve(code)));
  // everything the crashed run committed arrives first
  await seen((s) => s.split('\n').length > lines(crashed.stdout).length);
  const resumed = await cli.run(['resume', agentId, ...common]);
  expect(resumed.code, show(resumed)).toBe(0);
  await seen((s) => s.includes('"type":"turn/end"'));
  follower.kill('SIGINT');
  expect(await exited).toBe(0);
  const events = parseEvents(out);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  expect(events.some((e) => e.type === 'recovery/continuation')).toBe(true);
  expect(events.at(-1)!.type).toBe('turn/end');
});

test('demo runs on the embedded nats-server, prints where the data is, and stops the server it started', async ({ onTestFinished }) => {
  await natsServerVersion(); // the embedded default needs the binary
  const dataDir = await stack.dir('demo-data');
  const cli = stack.cli(onTestFinished, dataDir);
  const r = await cli.run(['demo']);
  expect(r.code, show(r)).toBe(0);
  // the demo keeps its workspace for the user to look at; the test does not
  const demoWs = /^demo workspace: (.+)$/m.exec(r.stdout)?.[1];
  expect(demoWs).toBeDefined();
  stack.remove(demoWs!);
  const out = lines(r.stdout);
  const agentId = out.find((l) => AGENT_ID.test(l));
  expect(agentId, show(r)).toBeDefined();
  expect(r.stdout).toContain(`data dir: ${dataDir}`);
  expect(r.stdout).toContain(`npx actorloop verify ${agentId}`);
  expect(r.stdout).toMatch(/\ncompleted · turn [\d,]+ tokens · cost unknown\n/);
  const serverLog = await readFile(join(dataDir, 'nats', 'server.log'), 'utf8');
  const pid = Number(/\[(\d+)\]/.exec(serverLog)?.[1]);
  expect(pid).toBeGreaterThan(0);
  expect(pidAlive(pid)).toBe(false);
  // a later command on the same data dir starts a server again and finds the run
  const runs = await cli.run(['runs']);
  expect(runs.code, show(runs)).toBe(0);
  expect(runs.stdout).toContain(agentId!);
  const verify = await cli.run(['verify', agentId!]);
  expect(verify.code, show(verify)).toBe(0);
});

test('a reader that goes away (events | head) ends the command, and the nats-server it started stops', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('pipe-data');
  const env = cliEnv(dataDir);
  const cli = stack.pool.forTest({ onTestFinished }, env);
  const demo = await cli.run(['demo']);
  expect(demo.code, show(demo)).toBe(0);
  stack.remove(/^demo workspace: (.+)$/m.exec(demo.stdout)![1]!);
  const agentId = lines(demo.stdout).find((l) => AGENT_ID.test(l))!;
  const serverPids = async (): Promise<number[]> => [
    ...new Set([...(await readFile(join(dataDir, 'nats', 'server.log'), 'utf8')).matchAll(/^\[(\d+)\]/gm)].map((m) => Number(m[1]))),
  ];
  const ws = await stack.workspace();
  // the last: `run --json … 2>&1 | head`, whose first write (the agent ID) is to stderr, the same pipe
  const cases: Array<{ args: string[]; merged: boolean }> = [
    { args: ['events', agentId], merged: false },
    { args: ['events', agentId, '--follow'], merged: false },
    { args: ['run', 'fix it', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json'], merged: true },
  ];
  for (const { args, merged } of cases) {
    const before = new Set(await serverPids());
    const quoted = [process.execPath, 'bin/actorloop.js', ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const reader = merged
      ? spawn('sh', ['-c', `exec ${quoted} 2>&1`], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'ignore'] })
      : spawn(process.execPath, ['bin/actorloop.js', ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    onTestFinished(async () => {
      if (reader.exitCode === null) reader.kill('SIGKILL');
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      reader.on('exit', (code, signal) => resolve({ code, signal })),
    );
    // hang up before the command writes, as a `head -1` that got its line does: every write the
    // command makes then fails. (Hanging up after the first chunk raced: on a busy machine the
    // whole log could be in the pipe by then, and a follower with nothing new to write never
    // learns its reader left — as `tail -f | head -1` does not.)
    reader.stdout.destroy();
    const ended = await Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), 15_000))]);
    expect(ended, `${args.join(' ')} still runs after its reader left`).not.toBeNull();
    expect(ended!.signal).toBeNull();
    const started = (await serverPids()).filter((pid) => !before.has(pid));
    // if it did not stop, the test does not leave it running either
    onTestFinished(async () => started.filter(pidAlive).forEach((pid) => process.kill(pid, 'SIGKILL')));
    expect(started.length, args.join(' ')).toBe(1);
    expect(pidAlive(started[0]!), `the nats-server of ${args.join(' ')}`).toBe(false);
  }
});

test('resume starts the turn of a message the agent never took (its run died before committing it)', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir);
  // What `run` leaves when it dies after publishing the task and before the agent took it.
  const bus = await openBus({ natsUrl: stack.nats.url, dataDir, logger: pino({ level: 'silent' }) });
  const agentId = newId('agent');
  const now = new Date().toISOString();
  await bus.directory.put({
    actorId: agentId, kind: 'agent', parentId: null, rootId: agentId, status: 'running', title: 'fix it',
    workspace: ws, createdAt: now, updatedAt: now, labels: {},
  });
  await publishInbox(bus.js, {
    id: newId('message'), from: 'cli', to: agentId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: 'fix it', sentAt: now,
    request: {
      model: `scripted:${DEMO_SCRIPT}`, workspace: ws, tools: null, instructions: null, approvalMode: 'auto-edit',
      maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
    },
  }, 'person');
  await bus.close();
  const r = await cli.run(['resume', agentId, '--json', '--nats', stack.nats.url, '--data-dir', dataDir]);
  expect(r.code, show(r)).toBe(0);
  const events = parseEvents(r.stdout);
  expect(events[0]!.type).toBe('inbox/received');
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
});

test('Ctrl-C cancels the turn: the log ends with turn/end cancelled and the exit code is 130', async ({ onTestFinished }) => {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const script = join(ws, 'slow.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: 'too late', delay_ms: 20_000 }] }));
  const child = spawn(
    process.execPath,
    ['bin/actorloop.js', 'run', 'wait', '--model', `scripted:${script}`, '--cwd', ws, '--json', '--nats', stack.nats.url, '--data-dir', dataDir],
    { cwd: REPO_ROOT, env: cliEnv(dataDir) },
  );
  onTestFinished(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // interrupt once the model request is in flight
  while (!out.includes('"type":"attempt/start"')) await new Promise((r) => setTimeout(r, 50));
  const t0 = Date.now();
  child.kill('SIGINT');
  expect(await exited, err).toBe(130);
  expect(Date.now() - t0).toBeLessThan(10_000);
  const events = parseEvents(out);
  expect(events.find((e) => e.type === 'attempt/end')).toMatchObject({ data: { outcome: 'aborted' } });
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled', reason: 'interrupted' } });
  const verify = await stack.cli(onTestFinished, dataDir).run(['verify', lines(err)[0]!, '--nats', stack.nats.url, '--data-dir', dataDir]);
  expect(verify.code, show(verify)).toBe(0);
});
