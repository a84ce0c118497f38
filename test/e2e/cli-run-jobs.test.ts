// A job through `actorloop run`: the model starts a job in full-auto that appends a line to a
// file after 2 s; the turn ends at once; `run` follows into the turn the job's notice starts
// (source job_notice) and exits 0 after it; the file holds the line once; verify passes. Then the
// job's fault points: the run is SIGKILLed at each, `resume` (a fresh process) ends the job from
// its log and the owner hears of it.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { AGENT_ID, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack();

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends ActorEvent['type']>(log: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

async function setup(onTestFinished: (fn: () => Promise<void>) => void, command: string) {
  const ws = await stack.dir('ws');
  const script = join(await stack.dir('script'), 'job.json');
  await writeFile(script, JSON.stringify({ responses: [
    { tool_calls: [{ name: 'start_job', arguments: { name: 'append', command } }] },
    { content: 'Started the job; its notice will come.' },
    { content: 'The job finished.' },
  ] }));
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  const run = ['run', 'Append a line in the background', '--model', `scripted:${script}`, '--cwd', ws, '--approve', 'full-auto', '--json', ...common];
  return { ws, cli, common, run };
}

describe.concurrent('jobs through actorloop run', () => {
  test('the turn ends at once, run follows into the job notice\'s turn, the file holds the line once, verify passes', async ({ expect, onTestFinished }) => {
    const { ws, cli, common, run } = await setup(onTestFinished, 'sleep 2 && echo line >> out.txt');
    const t0 = Date.now();
    const r = await cli.run(run);
    expectExit(expect, r, 0);
    expect(Date.now() - t0).toBeGreaterThan(2_000);
    const log = parseEvents(r.stdout);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'job_notice']);
    expect(ofType(log, 'turn/end').map((e) => e.data.outcome)).toEqual(['completed', 'completed']);
    // the first turn ended before the job did
    const notice = log.find((e) => e.type === 'inbox/received' && e.data.kind === 'job_notice')!;
    expect(ofType(log, 'turn/end')[0]!.seq).toBeLessThan(notice.seq);
    expect(await readFile(join(ws, 'out.txt'), 'utf8')).toBe('line\n');
    const agentId = lines(r.stderr)[0] ?? '';
    expect(agentId, show(r)).toMatch(AGENT_ID);
    expectExit(expect, await cli.run(['verify', agentId, ...common]), 0);
    const jobs = await cli.run(['jobs', agentId, '--json', ...common]);
    expectExit(expect, jobs, 0);
    expect(JSON.parse(jobs.stdout)).toEqual([expect.objectContaining({ name: 'append', phase: 'completed' })]);
  });

  test.for(['after:job/started', 'before:job/notified'])('run --fault %s: SIGKILL, resume ends the job from its log and the owner hears of it', async (point, { expect, onTestFinished }) => {
    const { cli, common, run } = await setup(onTestFinished, 'echo ran >> out.txt');
    const crashed = await cli.run([...run, '--fault', point]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stderr)[0] ?? '';
    expect(agentId, show(crashed)).toMatch(AGENT_ID);
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    const events = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    const notices = events.filter((e) => e.type === 'inbox/received' && e.data.kind === 'job_notice');
    expect(notices, show(resumed)).toHaveLength(1);
    const job = JSON.parse((await cli.run(['jobs', agentId, '--json', ...common])).stdout) as Array<{ id?: string; jobId?: string; phase: string }>;
    // killed before its command was spawned: the command never ran, and the job cannot say what it did
    // (interrupted); killed before its notice was recorded: it completed, and the notice is sent once
    expect(job[0]!.phase).toBe(point === 'after:job/started' ? 'interrupted' : 'completed');
    expectExit(expect, await cli.run(['verify', agentId, '--tree', ...common]), 0);
  });
});
