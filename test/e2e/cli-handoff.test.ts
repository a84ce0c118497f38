// `run`, `resume` and `approve` with a host running: they hand the agent to the host and follow
// its log, printing what the in-process path prints and exiting with its codes; `--in-process`
// keeps the old behaviour. One real `actorloop host` on a real nats-server serves the file; every
// CLI is a real process with a data dir of its own (the host keeps its LMDB elsewhere).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test, type ExpectStatic } from 'vitest';
import { newId } from '../../src/protocol/ids.js';
import { AGENT_ID, CliPool, DEMO_SCRIPT, REPO_ROOT, cliEnv, demoWorkspace, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';
const HOST = 'handoff-host';

let nats: TestNats;
let host: ChildProcess;
let hostErr = '';
let buggySlug: string;
const dirs: string[] = [];
const children = new Set<ChildProcess>();
const pool = new CliPool();

beforeAll(async () => {
  nats = await startTestNats();
  buggySlug = await readFile(join(REPO_ROOT, 'examples', 'demo', 'workspace', 'src', 'slug.js'), 'utf8');
  const dataDir = await tempDir('host');
  dirs.push(dataDir);
  host = spawn(process.execPath, ['bin/actorloop.js', 'host', '--name', HOST, '--lease-ttl', '2000', '--nats', nats.url, '--data-dir', dataDir], {
    cwd: REPO_ROOT,
    env: cliEnv(dataDir),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  host.stderr!.setEncoding('utf8').on('data', (s: string) => (hostErr += s));
  await until('the host to start', async () => hostErr.includes('hosting agents'));
});

afterAll(async () => {
  for (const c of [host, ...children]) if (c && c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await pool.killAll();
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; host stderr:\n${hostErr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function setup(onTestFinished: (fn: () => Promise<void>) => void) {
  const ws = await demoWorkspace();
  const dataDir = await tempDir('cli');
  dirs.push(ws, dataDir);
  const cli = pool.forTest({ onTestFinished }, cliEnv(dataDir));
  return { ws, dataDir, cli, common: ['--nats', nats.url, '--data-dir', dataDir] };
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/** The demo's script with every response slowed, so a process can be killed mid-turn. */
async function slowScript(delayMs: number): Promise<string> {
  const demo = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as { responses: Array<Record<string, unknown>> };
  const dir = await tempDir('script');
  dirs.push(dir);
  const file = join(dir, `slow-${newId('message')}.json`);
  await writeFile(file, JSON.stringify({ responses: demo.responses.map((r) => ({ ...r, delay_ms: delayMs })) }));
  return file;
}

describe('with a host running', () => {
  test('run hands the agent to the host and prints and exits as in-process; --in-process hosts it here', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    expect(run.stderr).toContain(`handed ${agentId} to host ${HOST}; following its events`);
    const events = parseEvents(run.stdout);
    // every event of the log, from its first, as the in-process run prints them
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(events).toEqual(log);

    // the same task hosted here: the same human output, line for line, but for the agent ID
    const ws2 = await demoWorkspace();
    dirs.push(ws2);
    const [handed, local] = await Promise.all([
      cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, ...common]),
      cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws2, '--in-process', ...common]),
    ]);
    expectExit(expect, handed, 0);
    expectExit(expect, local, 0);
    const [handedId, localId] = [lines(handed.stdout)[0]!, lines(local.stdout)[0]!];
    expect(handed.stdout.replace(handedId, '<id>')).toBe(local.stdout.replace(localId, '<id>'));
    expect(handed.stderr).toContain(`handed ${handedId} to host ${HOST}`);
    expect(local.stderr).toBe('');
    expect(lines(local.stdout).at(-1)).toMatch(/^completed · [\d,]+ tokens/);
  });

  test('an approval without a TTY: run exits 4 with the approve line; approve answers through the inbox and the host finishes', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 4);
    const agentId = lines(run.stderr)[0]!;
    const requested = parseEvents(run.stdout).find((e) => e.type === 'approval/requested');
    const approvalId = requested?.type === 'approval/requested' ? requested.data.approvalId : '';
    expect(approvalId).toMatch(/^apr_/);
    expect(run.stderr).toContain(`waiting for approval ${approvalId}`);
    expect(run.stderr).toContain(`approve: actorloop approve ${agentId} ${approvalId}`);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggySlug);

    const approved = await cli.run(['approve', agentId, approvalId, '--json', ...common]);
    expectExit(expect, approved, 0);
    expect(approved.stderr).toContain(`${agentId} is run by ${HOST}; following its events`);
    const events = parseEvents(approved.stdout);
    expect(events.map((e) => e.type)).toContain('approval/granted');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    // the host ran all of it: one incarnation, never one of the commands
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(new Set(log.map((e) => e.epoch)).size).toBe(1);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('resume follows an agent the host is running; with nothing open it says so', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = await slowScript(300);
    // a run that hands the agent over, killed while it follows: the turn goes on on the host
    const follower = spawn(process.execPath, ['bin/actorloop.js', 'run', TASK, '--model', `scripted:${script}`, '--approve', 'auto-edit', '--cwd', ws, '--json', ...common], {
      cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(follower);
    let out = '';
    let err = '';
    follower.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
    follower.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
    await until('the turn under way on the host', async () => out.split('\n').filter((l) => l.includes('"step/start"')).length >= 2);
    follower.kill('SIGKILL');
    const agentId = lines(err.slice(0, err.indexOf('\n') + 1))[0]!;
    expect(agentId).toMatch(AGENT_ID);

    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stderr).toContain(`${agentId} is run by ${HOST}; following its events`);
    const events = parseEvents(resumed.stdout);
    // the events after the log's end when it started following, then the turn's end
    expect(events[0]!.seq).toBeGreaterThan(2);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expect(events.map((e) => e.type)).not.toContain('recovery/started');

    const again = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, again, 0);
    expect(again.stderr).toContain(`${agentId} has no open turn to resume: its last turn ended completed`);
    // hosting it here while the host holds it is still refused, saying how to follow it
    const here = await cli.run(['resume', agentId, '--in-process', ...common]);
    expectExit(expect, here, 2);
    expect(here.stderr).toMatch(new RegExp(`^actorloop: ${agentId} is being run by ${HOST}\\. follow it with`));
  });

  test('resume of an agent whose in-process run died mid-turn hands it to the host, which recovers and finishes it', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    // write_file is the 5th tool start of the demo: killed with its effect's outcome unknown
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', '--in-process', '--fault', 'after:tool/start@5', ...common]);
    expect(run.signal, show(run)).toBe('SIGKILL');
    const agentId = lines(run.stderr)[0]!;
    expect(run.stderr).not.toContain('handed');

    // its lease is held by a dead process of this machine: released at once, and the host takes it
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    expect(resumed.stderr).toContain(`handed ${agentId} to host ${HOST}; following its events`);
    const events = parseEvents(resumed.stdout);
    expect(events.map((e) => e.type)).toContain('recovery/continuation');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('on a terminal, a handed-over run asks inline, answers through the inbox, and the host goes on after "y"', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, common } = await setup(onTestFinished);
    const cmd = ['node', 'bin/actorloop.js', 'run', JSON.stringify(TASK), '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common].join(' ');
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    let screen = '';
    let answered = false;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      screen += chunk;
      if (!answered && screen.includes('allow? [y]es once')) {
        answered = true;
        child.stdin.write('y\r');
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(screen).toContain(`to host ${HOST}; following its events`);
    expect(screen).toContain('write_file (version 1) asks for approval apr_');
    expect(screen).toMatch(/completed · [\d,]+ tokens/);
    expect(code, screen).toBe(0);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
  });
});
