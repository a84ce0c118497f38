// Command lines the CLI prints for a person, pasted as printed: through a real shell, in an
// environment with no ACTORLOOP_DATA_DIR (and another default data dir), they must reach the
// same agent. A run killed by a fault prints the resume line that carries its turn on.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { DEMO_SCRIPT, REPO_ROOT, cliEnv, lines, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

const stack = useCliStack();

let buggySlug: string;
let binDir: string;

beforeAll(async () => {
  buggySlug = await readFile(new URL('../../examples/demo/workspace/src/slug.js', import.meta.url), 'utf8');
  // `actorloop` on PATH, as an installed CLI is: the pasted line runs as a person's shell runs it
  binDir = await stack.dir('hints-bin');
  stack.remove(binDir);
  await writeFile(join(binDir, 'actorloop'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(REPO_ROOT, 'bin', 'actorloop.js'))} "$@"\n`);
  await chmod(join(binDir, 'actorloop'), 0o755);
});
/**
 * The environment of a new shell: no ACTORLOOP_DATA_DIR, no NATS_URL, a default data dir of its
 * own (a line without --data-dir would look there and find nothing), `actorloop` on PATH.
 */
async function pastingEnv(dataDir: string): Promise<NodeJS.ProcessEnv> {
  const env = cliEnv(dataDir);
  delete env.ACTORLOOP_DATA_DIR;
  const elsewhere = await stack.dir('hints-default');
  return { ...env, XDG_DATA_HOME: elsewhere, PATH: `${binDir}:${env.PATH ?? ''}` };
}

/** Runs one line through `sh -c`, as pasted; the child is killed if the test ends first. */
function paste(line: string, env: NodeJS.ProcessEnv, onTestFinished: (fn: () => Promise<void>) => void): Promise<CliResult> {
  const started = performance.now();
  const child: ChildProcess = spawn('sh', ['-c', line], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
    });
  });
}

/** The one line of `text` that starts with `prefix`, without the prefix. */
function lineAfter(text: string, prefix: string): string {
  const found = lines(text).filter((l) => l.startsWith(prefix));
  expect(found, text).toHaveLength(1);
  return found[0]!.slice(prefix.length);
}

describe('printed hints with a non-default --data-dir run as printed', () => {
  test('the approve line of a run that waits (no TTY, exit 5), pasted into a shell without ACTORLOOP_DATA_DIR, approves it', async ({ onTestFinished }) => {
    const ws = await stack.workspace();
    const root = await stack.dir('hints');
    // a space in the path: the line must quote it
    const dataDir = join(root, 'my data');
    await mkdir(dataDir);
    const cli = stack.pool.forTest({ onTestFinished }, cliEnv(join(root, 'not-this-one')));
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--data-dir', dataDir, '--nats', stack.nats.url]);
    expect(run.code, show(run)).toBe(5);
    const agentId = lines(run.stdout)[0]!;
    const approve = lineAfter(run.stderr, 'approve: ');
    const approvalId = /apr_\w+/.exec(approve)![0];
    expect(approve).toBe(`actorloop approve ${agentId} ${approvalId} --data-dir '${dataDir}' --nats ${stack.nats.url}`);
    expect(lineAfter(run.stderr, 'deny:    ')).toBe(`actorloop deny ${agentId} ${approvalId} --data-dir '${dataDir}' --nats ${stack.nats.url} [--reason "<why>"]`);

    const env = await pastingEnv(root);
    const approved = await paste(approve, env, onTestFinished);
    expect(approved.code, show(approved)).toBe(0);
    expect(approved.stdout).toMatch(/completed · /);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
    // and the same agent's log says so, read through a pasted events line
    const events = await paste(`actorloop events ${agentId} --json --data-dir '${dataDir}' --nats ${stack.nats.url}`, env, onTestFinished);
    expect(events.stdout).toContain('"approval/granted"');
  });

  test('a dropped fault is said in a person\'s words on stderr, never as the log\'s JSON', async ({ onTestFinished }) => {
    const ws = await stack.workspace();
    const dataDir = await stack.dir('hints-drop');
    const cli = stack.cli(onTestFinished, dataDir);
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--approve', 'auto-edit', '--data-dir', dataDir, '--fault', 'after:tool/start=drop']);
    expect(run.code, show(run)).toBe(1);
    expect(run.stderr).toMatch(/^fault after:tool\/start: drop injected into agt_/m);
    expect(run.stderr, run.stderr).not.toMatch(/^\{"level"/m);
  });

  test('the resume line a fault-killed run prints (embedded nats-server, only --data-dir) carries the turn on', async ({ onTestFinished }) => {
    const ws = await stack.workspace();
    const dataDir = await stack.dir('hints-fault');
    const cli = stack.pool.forTest({ onTestFinished }, cliEnv(join(dataDir, 'not-this-one')));
    const run = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, '--approve', 'auto-edit', '--data-dir', dataDir, '--fault', 'after:tool/start']);
    expect(run.signal, show(run)).toBe('SIGKILL');
    const agentId = lines(run.stdout)[0]!;
    const said = lines(run.stderr).find((l) => l.startsWith('fault after:tool/start: killing this process; '));
    expect(said, run.stderr).toBe(`fault after:tool/start: killing this process; actorloop resume ${agentId} --data-dir ${dataDir} carries the turn on`);
    // a person's line, not the log's JSON
    expect(run.stderr).not.toMatch(/^\{"level"/m);
    const resume = /; (actorloop .*) carries the turn on$/.exec(said!)![1]!;

    const resumed = await paste(resume, await pastingEnv(dataDir), onTestFinished);
    expect(resumed.code, show(resumed)).toBe(0);
    expect(resumed.stdout).toMatch(/completed · /);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).not.toBe(buggySlug);
  });
});
