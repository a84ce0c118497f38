// `resume` of an agent whose inbox still holds mail: a task handed to a host that never took it
// (resume decides from the log and the inbox before hosting, takes the message, acks it and
// finishes the turn), or a duplicate a crash before the ack left unacked (resume takes and acks
// it, and says nothing is open instead of waiting for a turn that never comes).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { AGENT_ID, cliEnv, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

/** Spawns the CLI in the background (killed after the file's tests) and resolves `seen` once its output matches `pattern`. */
function background(args: string[], env: NodeJS.ProcessEnv, pattern: RegExp) {
  const p = stack.pool.forFile(env).start(args);
  return { child: p.child, seen: p.waitFor(pattern), exited: p.exited };
}

test('resume takes a queued task, acks it and finishes the turn; a second resume finds nothing', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: 'Nothing to do here.' }] }));
  const env = cliEnv(dataDir);
  const common = stack.flags(dataDir);
  const cli = stack.pool.forTest({ onTestFinished }, env);

  // a host that is announced but never takes anything: stopped right after it started
  const host = background(['host', '--name', 'stalled', '--lease-ttl', '20000', ...common], env, /hosting agents/);
  await host.seen;
  host.child.kill('SIGSTOP');
  // `run` hands the task to it: the task waits in the inbox, never delivered
  const run = background(['run', 'say something', '--model', `scripted:${script}`, '--cwd', ws, ...common], env, /^(agt_\w+)$/m);
  const agentId = (await run.seen)[1]!;
  expect(agentId).toMatch(AGENT_ID);
  // the hand-off publishes right after the ID line
  await new Promise((r) => setTimeout(r, 1_000));
  run.child.kill('SIGKILL');
  host.child.kill('SIGKILL');
  await Promise.all([run.exited, host.exited]);

  const resumed = await cli.run(['resume', agentId, '--in-process', '--json', ...common]);
  expect(resumed.code, show(resumed)).toBe(0);
  const events = parseEvents(resumed.stdout);
  expect(events.find((e) => e.type === 'inbox/received')).toBeDefined();
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'Nothing to do here.' } });

  // acked: nothing is queued any more, so nothing is hosted and nothing released
  const again = await cli.run(['resume', agentId, ...common]);
  expect(again.code, show(again)).toBe(0);
  expect(again.stderr).toContain(`${agentId} has no open turn to resume: its last turn ended completed`);
  const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
  expect(log.filter((e) => e.type === 'actor/released' || e.type === 'actor/rehydrated')).toEqual([]);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
});

test('a duplicate left unacked by a crash before its ack: resume acks it and says nothing is open', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const script = join(dataDir, 'script.json');
  await writeFile(script, JSON.stringify({ responses: [{ content: 'Done.' }] }));
  const common = stack.flags(dataDir);
  const cli = stack.cli(onTestFinished, dataDir);

  // dies with the task committed to the log but its delivery not acked
  const run = await cli.run(['run', 'say done', '--model', `scripted:${script}`, '--cwd', ws, '--fault', 'before:inbox-ack', ...common]);
  expect(run.signal, show(run)).toBe('SIGKILL');
  const agentId = run.stdout.split('\n')[0]!;
  expect(agentId).toMatch(AGENT_ID);
  const resumed = await cli.run(['resume', agentId, ...common]);
  expect(resumed.code, show(resumed)).toBe(0);
  expect(resumed.stdout).toContain('Done.');

  // the delivery comes again; it is in the log already, so it is acked and starts nothing
  const again = await cli.run(['resume', agentId, ...common], { timeoutMs: 15_000 });
  expect(again.code, show(again)).toBe(0);
  expect(again.stderr).toContain(`${agentId} has no open turn to resume: its last turn ended completed`);
  const third = await cli.run(['resume', agentId, ...common], { timeoutMs: 15_000 });
  expect(third.code, show(third)).toBe(0);
  const verify = await cli.run(['verify', agentId, ...common]);
  expect(verify.code, show(verify)).toBe(0);
});
