// Crash-and-resume through the real CLI: each case runs the demo in a child process that
// SIGKILLs itself at a fault point, then `resume`, `verify` and `events` run as fresh processes
// against the same nats-server and data dir, and the log must show what the README promises.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import { AGENT_ID, CliProcesses, DEMO_SCRIPT, lines, parseEvents, parseRuns, show, type CliResult } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const TASK = 'The test in test/slug.test.js fails. Find the bug in src/slug.js, fix it, and tell me what was wrong.';

const stack = useCliStack();

let fixedSlug: string;

beforeAll(async () => {
  const script = JSON.parse(await readFile(DEMO_SCRIPT, 'utf8')) as {
    responses: Array<{ tool_calls?: Array<{ name: string; arguments: { content?: string } }> }>;
  };
  fixedSlug = script.responses[3]!.tool_calls![0]!.arguments.content!;
});

/** A fresh workspace, data dir and process tracker for one test; its children die with it. */
async function setup(onTestFinished: (fn: () => Promise<void>) => void) {
  const ws = await stack.workspace();
  const dataDir = await stack.dir('data');
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);
  return { ws, dataDir, cli, common };
}

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

/** `events <id> --json`: the whole log, each line checked against the event schema. */
async function readLog(expect: ExpectStatic, cli: CliProcesses, common: string[], agentId: string): Promise<ActorEvent[]> {
  const r = await cli.run(['events', agentId, '--json', ...common]);
  expectExit(expect, r, 0);
  return parseEvents(r.stdout);
}

function ofType<T extends ActorEvent['type']>(log: ActorEvent[], type: T): Array<Extract<ActorEvent, { type: T }>> {
  return log.filter((e): e is Extract<ActorEvent, { type: T }> => e.type === type);
}

function only<T extends ActorEvent['type']>(log: ActorEvent[], type: T): Extract<ActorEvent, { type: T }> {
  const found = ofType(log, type);
  if (found.length !== 1) throw new Error(`expected one ${type}, found ${found.length}`);
  return found[0]!;
}

/**
 * What a fault case leaves behind for the write_file call (the 5th tool call, the only effectful
 * one): it completed before the crash, or recovery reconciled it — the file untouched, so it ran
 * again once; or the file written, so its result was recorded from the verdict.
 */
type WriteFate = 'completed' | 'reconciled: not applied, ran again' | 'reconciled: applied';

interface FaultCase {
  fault: string;
  write: WriteFate;
  /** The read-only tool the crash interrupted between tool/start and tool/result, run again on resume. */
  rerun: string | null;
  /** The crash left a model attempt open: it ends `interrupted` and the next one succeeds. */
  interruptedAttempt: boolean;
}

const CASES: FaultCase[] = [
  { fault: 'after:tool/start', write: 'completed', rerun: 'list_dir', interruptedAttempt: false },
  { fault: 'mid:model-stream', write: 'completed', rerun: null, interruptedAttempt: true },
  // step/start is committed together with request/prepared and attempt/start (every effect on
  // the world first commits what is staged), so this crash also leaves an attempt open.
  { fault: 'after:step/start', write: 'completed', rerun: null, interruptedAttempt: true },
  // The 5th tool start is write_file: the crash falls before it ran ...
  { fault: 'after:tool/start@5', write: 'reconciled: not applied, ran again', rerun: null, interruptedAttempt: false },
  // ... or after it ran and before its result was committed.
  { fault: 'before:tool/result@5', write: 'reconciled: applied', rerun: null, interruptedAttempt: false },
];

// Concurrent: each case has its own workspace and data dir, and spends most of its time waiting
// on child processes.
describe.concurrent('actorloop run --fault, then resume', () => {
  test.for(CASES)('$fault: SIGKILL, resume completes the turn, the log holds', async (c, { expect, onTestFinished }) => {
    const { ws, cli, common } = await setup(onTestFinished);

    // 1. The run dies by its own SIGKILL at the fault point.
    const crashed = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', '--fault', c.fault, ...common]);
    expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
    const agentId = lines(crashed.stderr)[0] ?? '';
    expect(agentId, show(crashed)).toMatch(AGENT_ID);
    const before = parseEvents(crashed.stdout);
    expect(before.length).toBeGreaterThan(0);
    expect(before.map((e) => e.seq)).toEqual(before.map((_, i) => i + 1));
    expect(before.every((e) => e.actor === agentId)).toBe(true);
    expect(before.some((e) => e.type === 'turn/end')).toBe(false);

    // 2. `resume` finishes the turn.
    const resumed = await cli.run(['resume', agentId, '--json', ...common]);
    expectExit(expect, resumed, 0);
    const after = parseEvents(resumed.stdout);
    const end = after.at(-1);
    expect(end?.type, show(resumed)).toBe('turn/end');
    expect(end?.type === 'turn/end' && end.data.outcome).toBe('completed');

    // 3. `verify` finds every invariant holding.
    const verified = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verified, 0);
    expect(verified.stdout).toContain('all invariants hold');

    // 4. The log is what the two processes printed, in order: nothing committed went unprinted.
    const log = await readLog(expect, cli, common, agentId);
    expect(log.map((e) => e.id)).toEqual([...before, ...after].map((e) => e.id));
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));

    expect(ofType(log, 'recovery/started')).toHaveLength(1);
    expect(ofType(log, 'recovery/continuation')).toHaveLength(1);
    // the resuming process notes the kill first, naming the point from the record the fault left
    const killed = ofType(log, 'actor/killed');
    expect(killed).toHaveLength(1);
    expect(log[before.length]).toBe(killed[0]);
    expect(killed[0]!.data).toEqual({ point: c.fault.replace(/@\d+$/, ''), detectedBy: 'fault record (kill)', epoch: before.at(-1)!.epoch, lastSeq: before.length });
    expect(ofType(log, 'actor/released')).toEqual([]);

    // 5. write_file ran once, whatever the crash: started once, or started again only after its
    //    reconcile found the file untouched; it always ends with a result.
    const writeStarts = ofType(log, 'tool/start').filter((e) => e.data.name === 'write_file');
    const reconciled = ofType(log, 'tool/reconciled');
    expect(reconciled.map((e) => e.data.verdict)).toEqual(
      c.write === 'completed' ? [] : [c.write === 'reconciled: applied' ? 'applied' : 'not_applied'],
    );
    expect(writeStarts.map((e) => e.data.rerun)).toEqual(c.write === 'reconciled: not applied, ran again' ? [false, true] : [false]);
    const writeCall = writeStarts[0]!.call;
    expect(writeCall).toBeDefined();
    expect(reconciled.every((e) => e.call === writeCall)).toBe(true);
    const writeEnds = log.filter((e) => e.call === writeCall && ['tool/result', 'tool/outcome_unknown', 'tool/cancelled'].includes(e.type));
    expect(writeEnds.map((e) => e.type)).toEqual(['tool/result']);
    expect(ofType(log, 'tool/outcome_unknown')).toHaveLength(0);
    const slug = await readFile(join(ws, 'src', 'slug.js'), 'utf8');
    expect(slug).toBe(fixedSlug);

    // 6. A read-only call the crash left open runs again, marked so; nothing else reruns (but
    //    a write_file its reconcile found not applied, checked above).
    const reruns = ofType(log, 'tool/start').filter((e) => e.data.rerun && e.data.name !== 'write_file');
    if (c.rerun === null) {
      expect(reruns).toEqual([]);
    } else {
      const open = ofType(before, 'tool/start').at(-1)!;
      expect(open.data.name).toBe(c.rerun);
      expect(reruns.map((e) => ({ call: e.call, name: e.data.name }))).toEqual([{ call: open.call, name: c.rerun }]);
      expect(ofType(log, 'tool/result').filter((e) => e.call === open.call)).toHaveLength(1);
    }

    // 7. An attempt the crash left open ends interrupted; the step's next attempt sends the same
    //    prepared request and succeeds.
    const interrupted = ofType(log, 'attempt/end').filter((e) => e.data.outcome === 'interrupted');
    if (!c.interruptedAttempt) {
      expect(interrupted).toEqual([]);
    } else {
      expect(interrupted).toHaveLength(1);
      const { step, seq } = interrupted[0]!;
      const next = ofType(log, 'attempt/end').find((e) => e.step === step && e.seq > seq);
      expect(next?.data.outcome).toBe('succeeded');
      const starts = ofType(log, 'attempt/start').filter((e) => e.step === step);
      expect(starts).toHaveLength(2);
      expect(starts[1]!.data.requestDigest).toBe(starts[0]!.data.requestDigest);
    }
  });
});

test('a kill while write_file is reconciled: the next resume asks again; one verdict, both kills noted', async ({ expect, onTestFinished }) => {
  const { ws, cli, common } = await setup(onTestFinished);
  const crashed = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', '--fault', 'after:tool/start@5', ...common]);
  expect({ code: crashed.code, signal: crashed.signal }, show(crashed)).toEqual({ code: null, signal: 'SIGKILL' });
  const agentId = lines(crashed.stderr)[0] ?? '';
  const before = parseEvents(crashed.stdout);
  // the first resume dies after the tool answered, before its verdict is committed
  const dying = await cli.run(['resume', agentId, '--json', '--fault', 'during:reconcile', ...common]);
  expect({ code: dying.code, signal: dying.signal }, show(dying)).toEqual({ code: null, signal: 'SIGKILL' });
  expect(parseEvents(dying.stdout)).toEqual([]);
  const resumed = await cli.run(['resume', agentId, '--json', ...common]);
  expectExit(expect, resumed, 0);
  const log = await readLog(expect, cli, common, agentId);
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
  // the recovery that died wrote nothing: the log holds one recovery, one verdict
  for (const type of ['actor/rehydrated', 'recovery/started', 'tool/reconciled', 'recovery/continuation'] as const) {
    expect(ofType(log, type), type).toHaveLength(1);
  }
  expect(only(log, 'tool/reconciled').data.verdict).toBe('not_applied');
  // both deaths, in order: the run's at its point, then the first resume's during its recovery
  const killed = ofType(log, 'actor/killed');
  expect(killed.map((e) => e.data.point)).toEqual(['after:tool/start', 'during:reconcile']);
  expect(killed.map((e) => e.data.lastSeq)).toEqual([before.length, before.length]);
  expect(killed[0]!.data.epoch).toBe(before.at(-1)!.epoch);
  expect(killed[1]!.data.epoch).toBeGreaterThan(killed[0]!.data.epoch);
  expect(ofType(log, 'tool/start').filter((e) => e.data.name === 'write_file').map((e) => e.data.rerun)).toEqual([false, true]);
  expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(fixedSlug);
  const verified = await cli.run(['verify', agentId, ...common]);
  expectExit(expect, verified, 0);
  const timeline = await cli.run(['events', agentId, ...common]);
  // people read incarnations: the run was the first, the resume that died the second, this one the third
  expect(timeline.stdout).toMatch(/actor\/killed\s+incarnation 1 died after seq \d+ · at after:tool\/start · fault record \(kill\)/);
  expect(timeline.stdout).toMatch(/actor\/killed\s+incarnation 2 died after seq \d+ · at during:reconcile · fault record \(kill\)/);
  expect(timeline.stdout).toMatch(/actor\/rehydrated\s+incarnation 3 · /);
  expect(timeline.stdout).not.toMatch(/epoch \d/);
  expect(timeline.stdout).toMatch(/tool\/reconciled\s+not applied/);
});

test('run --json with no fault: only NDJSON events, the last turn/end completed; runs --json lists the agent', async ({ expect, onTestFinished }) => {
  const { ws, cli, common } = await setup(onTestFinished);
  const r = await cli.run(['run', TASK, '--model', `scripted:${DEMO_SCRIPT}`, '--approve', 'auto-edit', '--cwd', ws, '--json', ...common]);
  expectExit(expect, r, 0);
  const agentId = lines(r.stderr)[0] ?? '';
  expect(agentId, show(r)).toMatch(AGENT_ID);
  const events = parseEvents(r.stdout);
  const end = events.at(-1);
  expect(end?.type).toBe('turn/end');
  expect(end?.type === 'turn/end' && end.data.outcome).toBe('completed');
  expect(events.filter((e) => e.type === 'turn/end')).toHaveLength(1);
  expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(fixedSlug);

  const runs = await cli.run(['runs', '--json', ...common]);
  expectExit(expect, runs, 0);
  const entry = parseRuns(runs.stdout).find((e) => e.actorId === agentId);
  expect(entry, runs.stdout).toMatchObject({ actorId: agentId, status: 'completed', workspace: ws });
});
