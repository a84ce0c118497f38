// Model output far bigger than one NATS message, through the real CLI: a 3 MB answer and a 3 MB
// write_file argument end their turns (the log keeps a blob reference, the answer is printed
// whole, the file is written whole), and an answer over `max_model_output_bytes` ends the turn
// failed within seconds instead of being retried. Real processes, a real nats-server.
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic, type TestContext } from 'vitest';
import { AGENT_ID, cliEnv, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

/** 3 MB of numbered lines: a cut or a reorder anywhere shows. */
const BIG = Array.from({ length: 48 * 1024 }, (_, i) => `line ${String(i).padStart(8, '0')} ${'y'.repeat(50)}\n`).join('');

const stack = useCliStack();

/** A workspace, a data dir, a script of `responses`, and (optionally) a user config file. */
async function setup(ctx: TestContext, responses: unknown[], userConfig?: string) {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const scriptPath = join(dataDir, 'script.json');
  await writeFile(scriptPath, JSON.stringify({ responses }));
  const env = cliEnv(dataDir);
  if (userConfig !== undefined) {
    const dir = join(env.XDG_CONFIG_HOME!, 'actorloop');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'config.toml'), userConfig);
  }
  const cli = stack.pool.forTest(ctx, env);
  const common = stack.flags(dataDir);
  return { ws, cli, common, dataDir, model: `scripted:${scriptPath}` };
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

describe('model output bigger than a NATS message', () => {
  test('a 3 MB answer: printed whole, referenced in the log, verified', async (ctx) => {
    const { expect } = ctx;
    const { ws, cli, common, model } = await setup(ctx, [{ content: BIG }]);
    const run = await cli.run(['run', 'say a lot', '--model', model, '--cwd', ws, ...common], { timeoutMs: 60_000 });
    expectExit(expect, run, 0);
    const agentId = lines(run.stdout)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    expect(run.stdout).toContain(`\n${BIG}\n`);
    expect(run.stdout).toMatch(/\ncompleted · /);

    const events = await cli.run(['events', agentId, '--json', ...common]);
    expectExit(expect, events, 0);
    const log = parseEvents(events.stdout);
    const accepted = log.find((e) => e.type === 'assistant/accepted');
    expect(accepted?.type === 'assistant/accepted' && accepted.data.contentRef).toMatchObject({ bytes: Buffer.byteLength(BIG) });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answerRef: { bytes: Buffer.byteLength(BIG) } } });
    // the log holds previews: no line of it is anywhere near the answer's size
    expect(Math.max(...lines(events.stdout).map((l) => l.length))).toBeLessThan(100 * 1024);

    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  }, 90_000);

  test('a 3 MB answer of a turn a host on the same data dir ran: the command that followed it prints it whole', async (ctx) => {
    const { expect } = ctx;
    const { ws, cli, common, model, dataDir } = await setup(ctx, [{ content: BIG }]);
    const { spawn } = await import('node:child_process');
    const { REPO_ROOT } = await import('../helpers/cli.js');
    const host = spawn(process.execPath, ['bin/actorloop.js', 'host', '--name', 'big-host', ...common], {
      cwd: REPO_ROOT, env: cliEnv(dataDir), stdio: ['ignore', 'ignore', 'pipe'],
    });
    ctx.onTestFinished(async () => {
      if (host.exitCode === null && host.signalCode === null) host.kill('SIGKILL');
    });
    let err = '';
    host.stderr!.setEncoding('utf8').on('data', (t: string) => (err += t));
    for (let i = 0; i < 200 && !err.includes('hosting agents'); i++) await new Promise((r) => setTimeout(r, 50));
    const run = await cli.run(['run', 'say a lot', '--model', model, '--cwd', ws, ...common], { timeoutMs: 60_000 });
    expectExit(expect, run, 0);
    expect(run.stderr).toMatch(/handed agt_\w+ to/);
    expect(run.stdout).toContain(`\n${BIG}\n`);
    host.kill('SIGTERM');
    await new Promise((r) => host.once('exit', r));
  }, 90_000);

  test('a 3 MB write_file argument under full-auto: the file is written whole, the turn completes', async (ctx) => {
    const { expect } = ctx;
    const { ws, cli, common, model } = await setup(ctx, [
      { tool_calls: [{ name: 'write_file', arguments: { path: 'out/big.txt', content: BIG } }] },
      { content: 'Wrote out/big.txt.' },
    ]);
    // the next request carries the 3 MB argument whole: a window it fits
    const run = await cli.run(['run', 'write the big file', '--model', model, '--approve', 'full-auto', '-c', 'context_window=100000000', '--cwd', ws, '--json', ...common], {
      timeoutMs: 60_000,
    });
    expectExit(expect, run, 0);
    const agentId = lines(run.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    expect((await stat(join(ws, 'out', 'big.txt'))).size).toBe(Buffer.byteLength(BIG));
    expect(await readFile(join(ws, 'out', 'big.txt'), 'utf8')).toBe(BIG);
    const log = parseEvents(run.stdout);
    const call = log.find((e) => e.type === 'tool/call');
    expect(call?.type === 'tool/call' && call.data).toMatchObject({ name: 'write_file', status: 'valid', argumentsRef: { digest: expect.stringMatching(/^sha256:/) } });
    expect(log.find((e) => e.type === 'tool/result')).toMatchObject({ data: { ok: true } });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'Wrote out/big.txt.' } });
    expect(Math.max(...lines(run.stdout).map((l) => l.length))).toBeLessThan(100 * 1024);

    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  }, 90_000);

  test('an answer over max_model_output_bytes fails the turn at once, with the reason, exit 1', async (ctx) => {
    const { expect } = ctx;
    const { ws, cli, common, model } = await setup(ctx, [{ content: BIG }, { content: 'never asked for' }], 'max_model_output_bytes = 65536\n');
    const run = await cli.run(['run', 'say a lot', '--model', model, '--cwd', ws, '--json', ...common], { timeoutMs: 30_000 });
    expectExit(expect, run, 1);
    expect(run.elapsedMs).toBeLessThan(20_000);
    const agentId = lines(run.stderr)[0]!;
    const log = parseEvents(run.stdout);
    const attempts = log.filter((e) => e.type === 'attempt/end');
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ data: { outcome: 'failed', error: { class: 'output_too_large', retryable: false } } });
    expect(log.at(-1)).toMatchObject({
      type: 'turn/end',
      data: { outcome: 'failed', reason: expect.stringMatching(/^model output_too_large error: .*max_model_output_bytes \(65536 bytes\)/) },
    });
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
  }, 60_000);
});
