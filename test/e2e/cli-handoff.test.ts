// `run`, `resume` and `approve` with a host running: they hand the agent to the host and follow
// its log, printing what the in-process path prints and exiting with its codes; `--in-process`
// keeps the old behaviour. One real `actorloop host` on a real nats-server serves the file; every
// CLI is a real process with a data dir of its own (the host keeps its LMDB elsewhere).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test, type ExpectStatic } from 'vitest';
import { AGENT_ID, DEMO_SCRIPT, REPO_ROOT, cliEnv, lines, parseEvents, show, type CliResult, type RunningCli } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';
const HOST = 'handoff-host';

const stack = useCliStack();
let host: RunningCli;
let buggySlug: string;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  buggySlug = await readFile(join(REPO_ROOT, 'examples', 'demo', 'workspace', 'src', 'slug.js'), 'utf8');
  const dataDir = await stack.dir('host');
  host = stack.fileCli(dataDir).start(['host', '--name', HOST, '--lease-ttl', '10000', ...stack.flags(dataDir)]);
  await until('the host to start', async () => host.stderr().includes('hosting agents'));
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; host stderr:\n${host?.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const setup = (onTestFinished: TestEnd) => stack.setup(onTestFinished, { prefix: 'cli' });

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/** Runs `cmd` on a pseudo-terminal (`script`), as a person's shell would, answering "y" to the first approval prompt. */
async function onTerminal(cmd: string, dataDir: string, onTestFinished: (fn: () => Promise<void>) => void): Promise<{ text: string; code: number | null }> {
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  let answered = false;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    if (!answered && text.includes('allow? [y]es once')) {
      answered = true;
      child.stdin.write('y\r');
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { text, code };
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
    // (each in a workspace of its own as the first run found it: the output quotes sizes of what they read)
    const [ws2, ws3] = await Promise.all([stack.workspace(), stack.workspace()]);
    stack.remove(ws2);
stack.remove(ws3);
    const [handed, local] = await Promise.all([
      cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws3, ...common]),
      cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws2, '--in-process', ...common]),
    ]);
    expectExit(expect, handed, 0);
    expectExit(expect, local, 0);
    const [handedId, localId] = [lines(handed.stdout)[0]!, lines(local.stdout)[0]!];
    // a step's parallel calls print their results as they end, in either order: within a step,
    // the result lines are compared as a set
    const shown = (out: string, id: string): string[] => {
      const rows = lines(out.replace(id, '<id>'));
      const result = (r: string): string | null => /^step \d+ · ▸ /.exec(r)?.[0] ?? null;
      const sorted: string[] = [];
      for (let i = 0; i < rows.length; ) {
        const head = result(rows[i]!);
        let j = i + 1;
        while (head !== null && j < rows.length && result(rows[j]!) === head) j += 1;
        sorted.push(...rows.slice(i, j).sort());
        i = j;
      }
      return sorted;
    };
    expect(shown(handed.stdout, handedId)).toEqual(shown(local.stdout, localId));
    expect(handed.stderr).toContain(`handed ${handedId} to host ${HOST}`);
    expect(local.stderr).toBe('');
    expect(lines(local.stdout).at(-1)).toMatch(/^completed · turn [\d,]+ tokens/);
  });

  test('an approval without a TTY: run exits 5 with the approve line; approve answers through the inbox and the host finishes', async ({ expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 5);
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

  test('resume follows an agent the host runs: exit 5 while it waits, on a terminal it asks and follows to the end', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    // the host keeps the agent waiting for the write's approval: nothing races the commands below
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--json', ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stderr)[0]!;
    const approvalId = /waiting for approval (apr_\w+)/.exec(run.stderr)![1]!;

    const waiting = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, waiting, 5);
    expect(waiting.stderr).toContain(`${agentId} is run by ${HOST}; following its events`);
    expect(waiting.stderr).toContain(`approve: actorloop approve ${agentId} ${approvalId}`);
    // it printed nothing of the log it had already seen
    expect(waiting.stdout).toBe('');

    const cmd = ['node', 'bin/actorloop.js', 'resume', agentId, ...common].join(' ');
    const screen = await onTerminal(cmd, dataDir, onTestFinished);
    expect(screen.text).toContain(`${agentId} is run by ${HOST}; following its events`);
    expect(screen.text).toContain(`write_file (version 1) asks for approval ${approvalId}`);
    expect(screen.text).toMatch(/completed · turn [\d,]+ tokens/);
    expect(screen.code, screen.text).toBe(0);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);

    const again = await cli.run(['resume', agentId, ...common]);
    expectExit(expect, again, 0);
    expect(again.stderr).toContain(`${agentId} has no open turn to resume: its last turn ended completed`);
    // hosting it here while the host holds it is still refused, saying how to follow it
    const here = await cli.run(['resume', agentId, '--in-process', ...common]);
    expectExit(expect, here, 2);
    expect(here.stderr).toMatch(new RegExp(`^actorloop: ${agentId} is being run by ${HOST}\\. follow it with`));
    // the host ran all of it: one incarnation, never one of the commands
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(new Set(log.map((e) => e.epoch)).size).toBe(1);
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

  test('Ctrl-C (SIGINT) during a handed-over run cancels the turn on the host: turn/end cancelled (interrupted), exit 130, verify passes', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = join(ws, 'slow.json');
    await writeFile(script, JSON.stringify({ responses: [{ content: 'too late', delay_ms: 20_000 }] }));
    const child = spawn(process.execPath, ['bin/actorloop.js', 'run', 'wait', '--model', `scripted:${script}`, '--cwd', ws, '--json', ...common], {
      cwd: REPO_ROOT, env: cliEnv(dataDir),
    });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // the host's model request is in flight
    await until('the attempt on the host', async () => out.includes('"type":"attempt/start"') && err.includes(`to host ${HOST}; following its events`));
    const t0 = Date.now();
    child.kill('SIGINT');
    expect(await exited, err).toBe(130);
    expect(Date.now() - t0).toBeLessThan(10_000);
    const agentId = lines(err)[0]!;
    const events = parseEvents(out);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled', reason: 'interrupted' } });
    // the host did it: the interrupt came through its inbox, and no command ever hosted the agent
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.find((e) => e.type === 'inbox/received' && e.data.kind === 'interrupt')).toMatchObject({ data: { from: 'client:cli' } });
    expect(new Set(log.map((e) => e.epoch)).size).toBe(1);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  });

  test('actorloop interrupt from another process cancels a turn the host runs; an agent with nothing open is said so', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = join(ws, 'slow.json');
    await writeFile(script, JSON.stringify({ responses: [{ content: 'too late', delay_ms: 20_000 }] }));
    const child = spawn(process.execPath, ['bin/actorloop.js', 'run', 'wait', '--model', `scripted:${script}`, '--cwd', ws, '--json', ...common], {
      cwd: REPO_ROOT, env: cliEnv(dataDir),
    });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await until('the attempt on the host', async () => out.includes('"type":"attempt/start"'));
    const agentId = lines(err)[0]!;
    const interrupted = await cli.run(['interrupt', agentId, '--json', ...common]);
    expectExit(expect, interrupted, 0);
    const seen = parseEvents(interrupted.stdout);
    expect(seen.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'cancelled', reason: 'interrupted' } });
    // committed by the host before anything it closed
    const types = seen.map((e) => e.type);
    expect(types).toContain('interrupt/requested');
    expect(types.indexOf('interrupt/requested')).toBeLessThan(types.indexOf('turn/end'));
    // the run that followed it ends with it
    expect(await exited, err).toBe(130);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
    const again = await cli.run(['interrupt', agentId, ...common]);
    expectExit(expect, again, 0);
    expect(again.stderr).toContain(`${agentId} has no open turn: nothing to interrupt (its last turn ended cancelled)`);
    const unknown = await cli.run(['interrupt', 'agt_01J00000000000000000000000', ...common]);
    expectExit(expect, unknown, 3);
    expect(unknown.stderr).toMatch(/^actorloop: no agent agt_01J00000000000000000000000 in this data dir/);
  });

  test('on a terminal, a handed-over run asks inline, answers through the inbox, and the host goes on after "y"', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, common } = await setup(onTestFinished);
    const cmd = ['node', 'bin/actorloop.js', 'run', JSON.stringify(TASK), '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...common].join(' ');
    const screen = await onTerminal(cmd, dataDir, onTestFinished);
    expect(screen.text).toContain(`to host ${HOST}; following its events`);
    expect(screen.text).toContain('write_file (version 1) asks for approval apr_');
    expect(screen.text).toMatch(/completed · turn [\d,]+ tokens/);
    expect(screen.code, screen.text).toBe(0);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
  });
  test('run --continue --in-process while the host is live: never exit 2 for a turn that ran; it exits with that turn\'s code, and the task runs once', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = join(dataDir, 'talk.json');
    await writeFile(script, JSON.stringify({ responses: [{ content: 'first answer' }, { content: 'second answer' }] }));
    const first = await cli.run(['run', 'say something', '--model', `scripted:${script}`, '--cwd', ws, '--in-process', '--json', ...common]);
    expectExit(expect, first, 0);
    const agentId = lines(first.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    const next = await cli.run(['run', '--continue', agentId, 'say more', '--in-process', '--json', ...common]);
    expectExit(expect, next, 0);
    const turn2 = parseEvents(next.stdout);
    expect(turn2.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'second answer' } });
    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(log.filter((e) => e.type === 'turn/start')).toHaveLength(2);
  });
});
