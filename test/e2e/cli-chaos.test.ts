// `actorloop chaos` through the real CLI: it starts its own embedded nats-server, kills a `run`
// child at every fault point, resumes (and approves) it to the end of the turn, and checks each
// log and the effect file. Then the flag mistakes, and the effect checker on crafted evidence
// (no processes), which must catch a call that ran twice.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test, type TestContext } from 'vitest';
import { checkEffects } from '../../src/cli/chaos/effects.js';
import { CHAOS_POINTS, faultSpecFor, parsePoints, planRuns } from '../../src/cli/chaos/plan.js';
import type { ChaosSummary, PointReport } from '../../src/cli/chaos/report.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { AGENT_ID, REPO_ROOT, cliEnv, lines, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';
import { processesWith } from '../helpers/processes.js';

const SCRIPT = join(REPO_ROOT, 'examples', 'chaos', 'script.json');
// no server of the file's own: `chaos` starts the data dir's embedded one
const stack = useCliStack({ nats: false });
let dataDir: string;

beforeAll(async () => {
  dataDir = await stack.dir('chaos-data');
});

function chaos(ctx: TestContext, args: string[], timeoutMs = 30_000): Promise<CliResult> {
  return stack.pool.forTest(ctx, cliEnv(dataDir)).run(['chaos', ...args, '--data-dir', dataDir], { timeoutMs });
}

// Each kill costs a CLI start (about a second of CPU) plus the wait for the resumed turn; a
// leased agent also waits for the killed process's lease to lapse. Generous, never asserted on.
const SESSION_MS = 300_000;

test(
  'chaos --points all --runs 1 --seed 1 --json: every point killed once, every run recovers, no violation',
  async (ctx) => {
    const r = await chaos(ctx, [SCRIPT, '--points', 'all', '--runs', '1', '--seed', '1', '--json'], SESSION_MS - 10_000);
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
    const objects = lines(r.stdout).map((l) => JSON.parse(l) as PointReport | ChaosSummary);
    const points = objects.filter((o): o is PointReport => o.type === 'point');
    const summary = objects.at(-1) as ChaosSummary;
    expect(objects).toHaveLength(CHAOS_POINTS.length + 1);
    expect(summary, show(r)).toMatchObject({ type: 'summary', ok: true, seed: 1, points: CHAOS_POINTS.length, runs: CHAOS_POINTS.length, passed: CHAOS_POINTS.length, violations: 0 });
    // the interrupt lands in the first model call, before any effect
    expect(summary.baselines.map((b) => [b.mode, b.passed, b.effectLines])).toEqual([
      ['full-auto', true, 2], ['steer', true, 2], ['interrupt', true, 0], ['question', true, 2], ['budget', true, 2], ['goal', true, 2], ['ask', true, 2], ['compact', true, 2], ['job', true, 2], ['workflow', true, 2],
    ]);
    expect(points.map((p) => p.point)).toEqual([...CHAOS_POINTS]);
    for (const p of points) {
      expect({ point: p.point, runs: p.runs, passed: p.passed, violations: p.violations }, JSON.stringify(p)).toEqual({ point: p.point, runs: 1, passed: 1, violations: 0 });
      const run = p.results[0]!;
      expect(run.agentId).toMatch(AGENT_ID);
      // the point was reached and killed the process (during:recovery after its own crash first)
      expect(run.kills, JSON.stringify(run)).toBe(p.point === 'during:recovery' ? 2 : 1);
      expect(run.processes[0]).toMatch(/^run --fault /);
      // a person's act of the point's mode was done, and the command doing it succeeded
      if (p.point === 'after:inbox-reserved') expect(run.processes, JSON.stringify(run)).toContain('send: exit 0');
      if (p.point === 'after:interrupt/requested') expect(run.processes.at(-1), JSON.stringify(run)).toBe('interrupt: exit 0');
      if (p.point === 'after:ask/asked') expect(run.processes.filter((x) => /^answer: exit 0$/.test(x)), JSON.stringify(run)).toHaveLength(1);
      // a job's point: the run that started it was killed, and a resume ended the job and took its notice in
      if (p.point.includes('job/')) expect(run.processes.length, JSON.stringify(run)).toBeGreaterThanOrEqual(2);
      expect(typeof p.recoveredInMsMedian).toBe('number');
      expect(run.workspace).toBeNull();
    }
    // the session's own nats-server is gone with it
    expect(existsSync(join(dataDir, 'nats', 'server.json'))).toBe(false);
  },
  SESSION_MS,
);

test(
  'a call queued behind a conflicting one is started after recovery (it was once lost when recovery re-dispatched the calls)',
  async (ctx) => {
    const script = join(REPO_ROOT, 'examples', 'chaos', 'queued-call.json');
    const r = await chaos(ctx, [script, '--points', 'after:tool/start,before:tool/result', '--json'], SESSION_MS - 10_000);
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
    const summary = JSON.parse(lines(r.stdout).at(-1)!) as ChaosSummary;
    expect(summary, show(r)).toMatchObject({ ok: true, runs: 2, passed: 2, violations: 0 });
  },
  SESSION_MS,
);

test(
  'chaos --hosts 2: the host running the agent is killed at each point (an interrupt from another process too), the other takes over, every run passes',
  async (ctx) => {
    // after:interrupt/requested: the interrupt is sent from another process to the agent on its host
    const r = await chaos(ctx, [SCRIPT, '--points', 'after:tool/start,before:tool/result,after:interrupt/requested', '--hosts', '2', '--json'], SESSION_MS - 10_000);
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
    const objects = lines(r.stdout).map((l) => JSON.parse(l) as PointReport | ChaosSummary);
    const summary = objects.at(-1) as ChaosSummary;
    expect(summary, show(r)).toMatchObject({ type: 'summary', ok: true, hosts: 2, runs: 3, passed: 3, violations: 0 });
    for (const p of objects.filter((o): o is PointReport => o.type === 'point')) {
      const run = p.results[0]!;
      expect(run.kills, JSON.stringify(run)).toBe(1);
      // the kill lands on a host; `run` handed the agent over and it (or an `approve`) followed it to the end
      expect(run.processes.find((x) => x.endsWith('SIGKILL')), JSON.stringify(run)).toMatch(new RegExp(`^host \\S+ --fault ${p.point}@1=kill: SIGKILL$`));
      const end = p.point === 'after:interrupt/requested' ? /^run: exit 130$/ : /^(run|approve): exit 0$/;
      expect(run.processes.filter((x) => end.test(x)), JSON.stringify(run)).toHaveLength(1);
      if (p.point === 'after:interrupt/requested') expect(run.processes, JSON.stringify(run)).toContain('interrupt: exit 0');
      // every host the run started (the killed one again too) was stopped at its end
      expect(run.processes.filter((x) => x.startsWith('host ')).length).toBeGreaterThanOrEqual(3);
      expect(typeof run.recoveredInMs).toBe('number');
    }
    expect(existsSync(join(dataDir, 'nats', 'server.json'))).toBe(false);
    // no host outlives the session (each kept its data dir under the session's)
    expect(await processesWith(dataDir)).toEqual([]);
  },
  SESSION_MS,
);

// Concurrent: each case is one short CLI process that must stop before opening anything.
describe.concurrent('a mistake in the flags: one line on stderr, exit 2, nothing run', () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['an unknown point', ['--points', 'after:tool/start,after:nothing'], /--points: unknown point "after:nothing".*after:turn\/start/],
    ['no point at all', ['--points', ','], /--points: no point given/],
    ['no host', ['--hosts', '0'], /--hosts takes a whole number from 1 to 16, got "0"/],
    ['zero runs', ['--runs', '0'], /--runs takes a whole number from 1/],
    ['a seed that is not a number', ['--seed', 'x'], /--seed takes a whole number from 0 to 4294967295, got "x"/],
  ];
  test.for(cases)('%s', async ([, flags, message], ctx) => {
    const { expect } = ctx;
    const r = await chaos(ctx, [SCRIPT, ...flags]);
    expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 2, signal: null });
    expect(lines(r.stderr), show(r)).toHaveLength(1);
    expect(r.stderr).toMatch(/^actorloop: /);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});

/** The events of one call writing `line` with the shell, ended by `end` (null: still open). */
function shellCall(seq: number, callId: string, line: string, end: 'result' | 'outcome_unknown' | null, started = true): ActorEvent[] {
  const base = { v: 1, id: `evt_${seq}`, at: new Date(0).toISOString(), epoch: 1, actor: 'agt_x', turn: 'turn_x', step: 'step_x', call: callId };
  const events: Array<Record<string, unknown>> = [
    { ...base, seq, type: 'tool/call', data: { name: 'shell', arguments: JSON.stringify({ command: `echo '${line}' >> effects.log` }) } },
  ];
  if (started) events.push({ ...base, seq: seq + 1, type: 'tool/start', data: { name: 'shell' } });
  if (end === 'result') events.push({ ...base, seq: seq + 2, type: 'tool/result', data: { ok: true, output: 'exit code 0' } });
  if (end === 'outcome_unknown') events.push({ ...base, seq: seq + 2, type: 'tool/outcome_unknown', data: { reason: 'crashed' } });
  // only the fields the checker reads are filled in: it is handed logs the schema already checked
  return events as unknown as ActorEvent[];
}

describe('checkEffects: the effect file against the log', () => {
  test('a line written twice by one call whose log shows no outcome_unknown is a duplicate effect', () => {
    const log = [...shellCall(10, 'call_a', 'effect 1 of 2', 'result'), ...shellCall(20, 'call_b', 'effect 2 of 2', 'result')];
    const v = checkEffects('effect 1 of 2\neffect 1 of 2\neffect 2 of 2\n', log, ['effect 1 of 2', 'effect 2 of 2']);
    expect(v.map((x) => [x.code, x.seq])).toEqual([['effect.duplicate', 10]]);
    expect(v[0]!.message).toContain('"effect 1 of 2" 2 times, but only 1 call(s)');
  });

  test('outcome_unknown means at most once: it does not excuse a second run of the same call', () => {
    const log = shellCall(10, 'call_a', 'effect 1 of 2', 'outcome_unknown');
    expect(checkEffects('effect 1 of 2\n', log)).toEqual([]);
    expect(checkEffects('', log)).toEqual([]);
    const twice = checkEffects('effect 1 of 2\neffect 1 of 2\n', log);
    expect(twice.map((x) => x.code)).toEqual(['effect.duplicate']);
    expect(twice[0]!.message).toContain('outcome_unknown allows at most one run');
  });

  test('two calls that write the same line may both have run', () => {
    const log = [...shellCall(10, 'call_a', 'again', 'outcome_unknown'), ...shellCall(20, 'call_b', 'again', 'result')];
    expect(checkEffects('again\nagain\n', log, ['again'])).toEqual([]);
  });

  test('an effect with no committed tool/start, and a successful call whose effect is missing', () => {
    const log = [...shellCall(10, 'call_a', 'never started', null, false), ...shellCall(20, 'call_b', 'effect 2 of 2', 'result')];
    const v = checkEffects('never started\n', log, ['effect 2 of 2']);
    expect(v.map((x) => [x.code, x.seq])).toEqual([['effect.without_start', 10], ['effect.lost', 20]]);
    expect(checkEffects('from nowhere\n', []).map((x) => x.code)).toEqual(['effect.without_start']);
  });
});

describe('the plan of a session', () => {
  const counts = (point: string): number => (point === 'after:tool/start' ? 6 : point === 'after:approval/granted' ? 2 : 1);

  test('--points all or a list, in the order of CHAOS_POINTS', () => {
    expect(parsePoints(undefined)).toEqual([...CHAOS_POINTS]);
    expect(parsePoints('before:tool/result, after:turn/start')).toEqual(['after:turn/start', 'before:tool/result']);
    expect(() => parsePoints('mid:compaction')).toThrow(/unknown point "mid:compaction"/);
  });

  test('without a seed every run kills at the first occurrence; a seed draws the same occurrences every time', () => {
    expect(planRuns(['after:tool/start'], 3, null, counts).map((p) => p.faults)).toEqual([
      [{ point: 'after:tool/start', nth: 1 }], [{ point: 'after:tool/start', nth: 1 }], [{ point: 'after:tool/start', nth: 1 }],
    ]);
    const seeded = planRuns(['after:tool/start', 'during:recovery'], 20, 7, counts);
    expect(planRuns(['after:tool/start', 'during:recovery'], 20, 7, counts)).toEqual(seeded);
    // a point draws the same occurrences whichever other points run with it
    expect(planRuns(['during:recovery'], 20, 7, counts)).toEqual(seeded.filter((p) => p.point === 'during:recovery'));
    const nths = seeded.filter((p) => p.point === 'after:tool/start').map((p) => p.faults[0]!.nth);
    expect(nths.every((n) => n >= 1 && n <= 6)).toBe(true);
    expect(new Set(nths).size).toBeGreaterThan(1);
    for (const p of seeded.filter((x) => x.point === 'during:recovery')) {
      expect(p.faults.map((f) => f.point)).toEqual(['after:tool/start', 'during:recovery']);
    }
    expect(planRuns(['after:approval/granted'], 1, null, counts)[0]!.mode).toBe('ask');
  });

  test('a later process is told the occurrence that is left: each process counts from zero', () => {
    const granted = [{ type: 'approval/granted' }] as unknown as ActorEvent[];
    expect(faultSpecFor({ point: 'after:approval/granted', nth: 2 }, [])).toBe('after:approval/granted@2=kill');
    expect(faultSpecFor({ point: 'after:approval/granted', nth: 2 }, granted)).toBe('after:approval/granted@1=kill');
    expect(faultSpecFor({ point: 'after:approval/granted', nth: 1 }, granted)).toBeNull();
  });
});
