// Budgets and the stop decision through real processes: a cost budget against the fake OpenAI
// server's usage, a kill right after an attempt's reservation is committed (on a goal run too) and
// the resume that settles it once, the model's stop in both forms (exit 4), and the budget flags a user gets wrong.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { AGENT_ID, DEMO_SCRIPT, lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';

const KEY = 'sk-test-0123456789abcdef';
const stack = useCliStack();

async function fake(turns: FakeTurn[]): Promise<FakeOpenAI> {
  const s = await startFakeOpenAI({ turns });
  stack.onClose(() => s.close());
  return s;
}

async function setup(onTestFinished: (fn: () => Promise<void>) => void) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir, { OPENAI_API_KEY: KEY });
  return { ws, dataDir, cli, common: stack.flags(dataDir) };
}

function ofType<T extends ActorEvent['type']>(log: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

/** Every reservation of the log is settled exactly once. */
function expectSettledOnce(log: ActorEvent[]): void {
  const reserved = ofType(log, 'budget/reserved').map((e) => e.data.reservationId);
  const settled = ofType(log, 'budget/settled').map((e) => e.data.reservationId);
  expect(reserved.length).toBeGreaterThan(0);
  expect([...settled].sort()).toEqual([...reserved].sort());
  expect(new Set(settled).size).toBe(settled.length);
}

describe('--max-cost against the fake OpenAI server', () => {
  test('the run stops before the attempt whose worst case could pass the budget, never sending it (exit 4)', async ({ onTestFinished }) => {
    // gpt-4.1-mini at its list price ($0.40 in / $1.60 out per million): the first answer costs
    // $0.00076, which leaves $0.00004 of $0.0008, less than the next attempt's 100-token output cap costs
    const server = await fake([
      { toolCalls: [{ id: 'c1', name: 'list_dir', arguments: '{"path":"."}' }], usage: { prompt_tokens: 1500, completion_tokens: 100 } },
      { content: 'never sent' },
    ]);
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run([
      'run', 'look around', '--model', 'openai:gpt-4.1-mini', '--base-url', server.baseURL, '--cwd', ws,
      '--tools', 'list_dir', '--max-output-tokens', '100', '--max-cost', '0.0008', '--json', ...common,
    ]);
    expect(r.code, show(r)).toBe(4);
    const log = parseEvents(r.stdout);
    expect(server.requests.filter((q) => q.path === '/v1/chat/completions')).toHaveLength(1);
    const [first] = ofType(log, 'budget/reserved');
    expect(first!.data).toMatchObject({ scope: 'turn', kind: 'attempt', outputTokens: 100 });
    expect(first!.data.costUsd!).toBeLessThanOrEqual(0.0008);
    expect(ofType(log, 'budget/settled')).toEqual([expect.objectContaining({ data: expect.objectContaining({ tokens: 1600, costUsd: 0.00076, outcome: 'charged' }) })]);
    expect(ofType(log, 'attempt/start')).toHaveLength(1);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'stopped', reason: 'cost_budget', costUsd: 0.00076 } });
    expectSettledOnce(log);
  });
});

describe('a kill right after an attempt\'s reservation', () => {
  test('--fault after:budget-reserved: resume settles the reservation exactly once, and verify holds', async ({ onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const crashed = await cli.run([
      'run', 'fix the slug test', '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws,
      '--max-tokens', '10000000', '--fault', 'after:budget-reserved', '--json', ...common,
    ]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stderr)[0] ?? '';
    expect(agentId, show(crashed)).toMatch(AGENT_ID);
    const before = parseEvents(crashed.stdout);
    // the process died with the reservation committed and nothing settled
    expect(before.at(-1)?.type).toBe('attempt/start');
    const [reservation] = ofType(before, 'budget/reserved');
    expect(reservation).toBeDefined();
    expect(ofType(before, 'budget/settled')).toHaveLength(0);

    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expect(resumed.code, show(resumed)).toBe(0);
    const verified = await cli.run(['verify', agentId, ...common]);
    expect(verified.code, show(verified)).toBe(0);
    expect(verified.stdout).toContain('all invariants hold');

    const events = await cli.run(['events', agentId, '--json', ...common]);
    const log = parseEvents(events.stdout);
    expect(ofType(log, 'actor/killed')[0]!.data.point).toBe('after:budget-reserved');
    // the reservation the crash left open is settled once, with the attempt's interrupted end
    const settles = ofType(log, 'budget/settled').filter((e) => e.data.reservationId === reservation!.data.reservationId);
    expect(settles).toHaveLength(1);
    const interrupted = ofType(log, 'attempt/end').find((e) => e.attempt === reservation!.data.attemptId)!;
    expect(interrupted.data.outcome).toBe('interrupted');
    expect(settles[0]!.seq).toBe(interrupted.seq + 1);
    expect(settles[0]!.data.outcome).toBe('charged');
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expectSettledOnce(log);
  });
});

describe('a kill right after a goal run\'s reservations', () => {
  test('--fault after:budget-reserved on a goal run: resume settles the turn\'s and the goal\'s reservation exactly once each, and verify holds', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const script = join(dataDir, 'goal.json');
    await writeFile(script, JSON.stringify({ responses: [
      { tool_calls: [{ name: 'update_goal', arguments: { phase: 'complete', reason: 'said hello', expected_revision: 0 } }], usage: { input_tokens: 80, output_tokens: 8 } },
      { content: 'hello', usage: { input_tokens: 90, output_tokens: 2 } },
    ] }));
    const crashed = await cli.run([
      'run', 'say hello', '--model', `scripted:${script}`, '--cwd', ws, '--goal', 'say hello', '--goal-tokens', '1000000',
      '--max-tokens', '1000000', '--fault', 'after:budget-reserved', '--json', ...common,
    ]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stderr)[0] ?? '';
    expect(agentId, show(crashed)).toMatch(AGENT_ID);
    const before = parseEvents(crashed.stdout);
    // the process died with both reservations and the attempt/start committed, nothing settled
    expect(before.at(-1)?.type).toBe('attempt/start');
    const open = ofType(before, 'budget/reserved');
    expect(open.map((e) => e.data.scope)).toEqual(['turn', 'goal']);
    expect(ofType(before, 'budget/settled')).toHaveLength(0);

    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expect(resumed.code, show(resumed)).toBe(0);
    const verified = await cli.run(['verify', agentId, ...common]);
    expect(verified.code, show(verified)).toBe(0);
    expect(verified.stdout).toContain('all invariants hold');

    const log = parseEvents((await cli.run(['events', agentId, '--json', ...common])).stdout);
    expect(ofType(log, 'actor/killed')[0]!.data.point).toBe('after:budget-reserved');
    const interrupted = ofType(log, 'attempt/end').find((e) => e.attempt === open[0]!.data.attemptId)!;
    expect(interrupted.data.outcome).toBe('interrupted');
    // each reservation the crash left open is settled once, charged, in the commit of the interrupted end
    for (const [i, r] of open.entries()) {
      const settles = ofType(log, 'budget/settled').filter((e) => e.data.reservationId === r.data.reservationId);
      expect(settles).toHaveLength(1);
      expect(settles[0]!.seq).toBe(interrupted.seq + 1 + i);
      expect(settles[0]!.data.outcome).toBe('charged');
    }
    expect(ofType(log, 'goal/updated').at(-1)!.data).toMatchObject({ phase: 'complete' });
    expectSettledOnce(log);
  });
});

describe('the stop decision', () => {
  test('the stop tool, and a {"kind": "stop"} answer under --output-schema: the turn ends stopped with the reason (exit 4)', async ({ onTestFinished }) => {
    const { ws, dataDir, cli, common } = await setup(onTestFinished);
    const viaTool = join(dataDir, 'stop-tool.json');
    await writeFile(viaTool, JSON.stringify({ responses: [{ tool_calls: [{ name: 'stop', arguments: { reason: 'INSUFFICIENT_EVIDENCE' } }] }] }));
    const r1 = await cli.run(['run', 'why did it fail?', '--model', `scripted:${viaTool}`, '--cwd', ws, '--json', ...common]);
    expect(r1.code, show(r1)).toBe(4);
    expect(parseEvents(r1.stdout).at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'stopped', reason: 'INSUFFICIENT_EVIDENCE' } });

    const viaAnswer = join(dataDir, 'stop-answer.json');
    await writeFile(viaAnswer, JSON.stringify({ responses: [{ content: '{"kind":"stop","reason":"INSUFFICIENT_EVIDENCE: no logs"}' }] }));
    const schema = join(dataDir, 'schema.json');
    await writeFile(schema, JSON.stringify({ type: 'object', properties: { cause: { type: 'string' } }, required: ['cause'] }));
    const r2 = await cli.run(['run', 'why did it fail?', '--model', `scripted:${viaAnswer}`, '--output-schema', schema, '--cwd', ws, ...common]);
    expect(r2.code, show(r2)).toBe(4);
    expect(r2.stdout + r2.stderr).toContain('INSUFFICIENT_EVIDENCE: no logs');
  });
});

describe('budget flags a user gets wrong: one line, exit 2, nothing started', () => {
  test.for([
    [['--max-tokens', '0'], /--max-tokens takes a whole number of tokens above 0, got "0"/],
    [['--max-tokens=-5'], /--max-tokens takes a whole number of tokens above 0, got "-5"/],
    [['--max-tokens', '1.5'], /--max-tokens takes a whole number/],
    [['--max-cost', '0'], /--max-cost takes US dollars, a number above 0, got "0"/],
    [['--max-cost=-1'], /--max-cost takes US dollars/],
    [['--max-cost', 'lots'], /--max-cost takes US dollars/],
  ] as Array<[string[], RegExp]>)('%s', async ([flags, message], { onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);
    const r = await cli.run(['run', 'x', '--model', `scripted:${DEMO_SCRIPT}`, '--cwd', ws, ...flags, ...common]);
    expect(r.code, show(r)).toBe(2);
    expect(lines(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  test('--max-cost with a model of no known price is refused before the run; a configured price makes it valid', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'ok', usage: { prompt_tokens: 10, completion_tokens: 2 } }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const base = ['run', 'x', '--model', 'openai:local-model', '--base-url', server.baseURL, '--cwd', ws, '--max-cost', '1'];
    const refused = await cli.run([...base, ...common]);
    expect(refused.code, show(refused)).toBe(2);
    expect(refused.stderr).toMatch(/--max-cost needs the model's price, and local-model has no known price/);
    expect(refused.stderr).toMatch(/pricing\."local-model"/);
    expect(server.requests).toHaveLength(0);
    const priced = await cli.run([...base, '-c', 'pricing."local-model".input_per_mtok=1', '-c', 'pricing."local-model".output_per_mtok=2', '--max-output-tokens', '50', '--json', ...common]);
    expect(priced.code, show(priced)).toBe(0);
    expect(ofType(parseEvents(priced.stdout), 'budget/settled')[0]!.data).toMatchObject({ tokens: 12, costUsd: 0.000014, outcome: 'charged' });
  });

  test('--goal-cost with a model of no known price is refused before the run (exit 2), as --max-cost is', async ({ onTestFinished }) => {
    const server = await fake([{ content: 'ok', usage: { prompt_tokens: 10, completion_tokens: 2 } }]);
    const { ws, cli, common } = await setup(onTestFinished);
    const refused = await cli.run(['run', 'x', '--model', 'openai:local-model', '--base-url', server.baseURL, '--cwd', ws, '--goal', 'say ok', '--goal-cost', '1', ...common]);
    expect(refused.code, show(refused)).toBe(2);
    expect(lines(refused.stderr)).toHaveLength(1);
    expect(refused.stderr).toMatch(/--goal-cost needs the model's price, and local-model has no known price/);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
    expect(server.requests).toHaveLength(0);
  });
});
