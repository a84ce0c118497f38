// SIGTERM and SIGHUP stop a command the way a kill would leave its turn, but tidily: `run` exits
// 128 + the signal, its embedded nats-server is stopped (nothing is left running with no parent),
// the turn stays open (released, not cancelled), and `resume` carries it to its end.
import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { AGENT_ID, REPO_ROOT, cliEnv, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack({ nats: false });

/** Pids of live processes whose command line names `path` (an embedded nats-server's store). */
async function processesNaming(path: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(path)) pids.push(Number(name));
  }
  return pids;
}

/** Starts `actorloop run`, resolves with its agent ID once its first step ended, and with how it exited. */
function startRun(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ['bin/actorloop.js', 'run', ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let stepped: (id: string) => void = () => {};
  const firstStep = new Promise<string>((resolve) => (stepped = resolve));
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    stdout += s;
    // the model's second, slow answer is being waited for
    if (/^step 1: /m.test(stdout)) stepped(lines(stdout.slice(0, stdout.indexOf('\n') + 1))[0]!);
  });
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const started = performance.now();
  const exited = new Promise<CliResult>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started }));
  });
  return { child, firstStep, exited };
}

describe('a stop signal leaves the turn resumable and nothing running', () => {
  test.for([
    { signal: 'SIGTERM' as const, code: 143 },
    { signal: 'SIGHUP' as const, code: 129 },
  ])('$signal of run: exit $code, the embedded server stopped, resume finishes the turn', async ({ signal, code }, ctx) => {
    const ws = await stack.dir('ws');
    const dataDir = await stack.dir('data');
    await writeFile(join(ws, 'notes.txt'), 'remember the milk\n');
    const script = join(dataDir, 'script.json');
    await writeFile(script, JSON.stringify({
      responses: [
        { tool_calls: [{ name: 'read_file', arguments: { path: 'notes.txt' } }] },
        { content: 'It says to remember the milk.', delay_ms: 3_000 },
      ],
    }));
    const env = cliEnv(dataDir);
    const cli = stack.pool.forTest(ctx, env);
    // no --nats: the run starts the data dir's embedded nats-server
    const run = startRun(['what does notes.txt say?', '--model', `scripted:${script}`, '--cwd', ws], env);
    ctx.onTestFinished(() => void run.child.kill('SIGKILL'));
    const agentId = await run.firstStep;
    expect(agentId).toMatch(AGENT_ID);
    expect(await processesNaming(join(dataDir, 'nats'))).not.toEqual([]);

    run.child.kill(signal);
    const r = await run.exited;
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
    expect(r.stderr).toContain(`actorloop resume ${agentId}`);
    expect(await processesNaming(join(dataDir, 'nats')), 'the embedded nats-server outlived its run').toEqual([]);

    // released, not cancelled: the turn is open in the log
    const log = await cli.run(['events', agentId, '--json']);
    expect(log.code, show(log)).toBe(0);
    const events = parseEvents(log.stdout);
    expect(events.some((e) => e.type === 'turn/end'), 'a stop signal must not end the turn').toBe(false);
    expect(events.at(-1)?.type).toBe('actor/released');

    const resumed = await cli.run(['resume', agentId]);
    expect(resumed.code, show(resumed)).toBe(0);
    expect(resumed.stdout).toContain('It says to remember the milk.');
    const verify = await cli.run(['verify', agentId]);
    expect(verify.code, show(verify)).toBe(0);
    expect(await processesNaming(join(dataDir, 'nats'))).toEqual([]);
  });
});
