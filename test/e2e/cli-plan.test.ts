// Plan mode through the real CLI: `run --plan-mode` runs read-only and exits 5 with the plan and
// the command that accepts it; `plan` shows it; `plan --accept` starts a normal-mode turn whose
// prepared request holds the plan, and follows it to its end.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test, type ExpectStatic } from 'vitest';
import type { ActorEvent, EventOf, EventType } from '../../src/protocol/events.js';
import { createLmdbBlobStore } from '../../src/store/blob-port.js';
import { openLmdbStore } from '../../src/store/lmdb-store.js';
import { AGENT_ID, lines, parseEvents, show, type CliResult } from '../helpers/cli.js';
import { useCliStack, type TestEnd } from '../helpers/cli-stack.js';

const stack = useCliStack();

const FIX = 'export function slugify(s) {\n  return s.trim().toLowerCase().replaceAll(" ", "-");\n}\n';

/** Plans in a plan-mode turn (its write and shell calls are denied), then carries the plan out once accepted. */
const SCRIPT = {
  responses: [
    { tool_calls: [{ name: 'read_file', arguments: { path: 'src/slug.js' } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'src/slug.js', content: FIX } }, { name: 'shell', arguments: { command: 'touch shell-ran' } }] },
    {
      tool_calls: [{
        name: 'update_plan',
        arguments: {
          items: [{ content: 'Replace every space in slugify', status: 'pending' }, { content: 'Run the test', status: 'pending' }],
          explanation: 'slugify only replaces the first space',
        },
      }],
    },
    { content: 'Plan: make slugify replace every space.' },
    // the accepted turn
    { tool_calls: [{ name: 'write_file', arguments: { path: 'src/slug.js', content: FIX } }] },
    { content: 'Fixed slugify.' },
  ],
};

const NO_PLAN = { responses: [{ content: 'Nothing to plan.' }] };

const setup = (onTestFinished: TestEnd, script: unknown) => stack.setup(onTestFinished, { script });

function expectExit(expect: ExpectStatic, r: CliResult, code: number): void {
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code, signal: null });
}

function ofType<T extends EventType>(events: ActorEvent[], type: T): EventOf<T>[] {
  return events.filter((e) => e.type === type) as unknown as EventOf<T>[];
}

describe('plan mode from the CLI', () => {
  test('run --plan-mode denies effects and exits 5 with the plan; plan shows it; --accept carries it out with the plan in its request', async ({ expect, onTestFinished }) => {
    const { ws, dataDir, cli, model, common } = await setup(onTestFinished, SCRIPT);
    const buggy = await readFile(join(ws, 'src', 'slug.js'), 'utf8');
    // full-auto: plan mode denies what the run mode would allow
    const run = await cli.run(['run', 'fix slugify', '--model', model, '--cwd', ws, '--plan-mode', '--approve', 'full-auto', '--json', ...common]);
    expectExit(expect, run, 5);
    const agentId = lines(run.stderr)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    const events = parseEvents(run.stdout);
    expect(ofType(events, 'turn/start')[0]!.data.settings.planMode).toBe(true);
    const denied = ofType(events, 'policy/decided').filter((d) => d.data.decision === 'deny');
    expect(denied.map((d) => d.data.rule)).toEqual(['mode:plan', 'mode:plan']);
    expect(denied.every((d) => d.data.reason!.startsWith('plan mode'))).toBe(true);
    expect(ofType(events, 'plan/replaced').map((e) => e.data.version)).toEqual([1]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed' } });
    expect(run.stderr).toContain(`actorloop plan ${agentId} --accept`);
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(buggy);
    await expect(readFile(join(ws, 'shell-ran'))).rejects.toThrow();

    const shown = await cli.run(['plan', agentId, ...common]);
    expectExit(expect, shown, 0);
    expect(shown.stdout).toBe(
      'plan version 1 · 0/2 done\n  [ ] Replace every space in slugify\n  [ ] Run the test\n  Explanation: slugify only replaces the first space\n',
    );
    expect(shown.stderr).toContain(`actorloop plan ${agentId} --accept`);
    const json = await cli.run(['plan', agentId, '--json', ...common]);
    expectExit(expect, json, 0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      version: 1,
      items: [{ content: 'Replace every space in slugify', status: 'pending' }, { content: 'Run the test', status: 'pending' }],
      explanation: 'slugify only replaces the first space',
    });

    const accepted = await cli.run(['plan', agentId, '--accept', '--json', ...common]);
    expectExit(expect, accepted, 0);
    const next = parseEvents(accepted.stdout);
    const start = ofType(next, 'turn/start')[0]!;
    expect(start.data.settings.planMode).toBeUndefined();
    expect(start.data.settings.approvalMode).toBe('full-auto');
    expect(start.data.settings.instructions).not.toContain('plan mode');
    expect(ofType(next, 'user/message')[0]!.data.content).toContain('The plan you wrote (version 1) was accepted');
    expect(next.at(-1)).toMatchObject({ type: 'turn/end', data: { outcome: 'completed', answer: 'Fixed slugify.' } });
    expect(await readFile(join(ws, 'src', 'slug.js'), 'utf8')).toBe(FIX);
    // the request the model was sent holds the plan
    const digest = ofType(next, 'request/prepared')[0]!.data.digest;
    const lmdb = openLmdbStore(dataDir);
    try {
      const body = await createLmdbBlobStore(lmdb).getText(digest);
      expect(body).toContain('[ ] Replace every space in slugify');
      expect(body).not.toContain('You are in plan mode');
    } finally {
      await lmdb.close();
    }

    // accepted once: a second --accept is refused, nothing changes
    const again = await cli.run(['plan', agentId, '--accept', ...common]);
    expectExit(expect, again, 2);
    expect(lines(again.stderr)[0]).toMatch(/is not waiting to be accepted: its last turn did not run in plan mode/);
    const verify = await cli.run(['verify', agentId, ...common]);
    expectExit(expect, verify, 0);
  });

  test('bad inputs: an unknown agent, no plan to accept, --in-process without --accept', async ({ expect, onTestFinished }) => {
    const { ws, cli, model, common } = await setup(onTestFinished, NO_PLAN);
    const unknown = await cli.run(['plan', 'agt_01J00000000000000000000000', ...common]);
    expectExit(expect, unknown, 3);
    expect(unknown.stderr).toContain('no agent agt_01J00000000000000000000000 in this data dir');
    const run = await cli.run(['run', 'plan nothing', '--model', model, '--cwd', ws, '--plan-mode', ...common]);
    // a plan-mode turn that wrote no plan has nothing waiting: its own exit code
    expectExit(expect, run, 0);
    expect(run.stderr).toContain('wrote no plan');
    const agentId = lines(run.stdout)[0]!;
    expect(agentId).toMatch(AGENT_ID);
    const shown = await cli.run(['plan', agentId, ...common]);
    expectExit(expect, shown, 0);
    expect(shown.stderr).toContain(`${agentId} has no plan yet`);
    const json = await cli.run(['plan', agentId, '--json', ...common]);
    expect(json.stdout).toBe('null\n');
    const accept = await cli.run(['plan', agentId, '--accept', ...common]);
    expectExit(expect, accept, 2);
    expect(lines(accept.stderr)).toHaveLength(1);
    expect(accept.stderr).toContain(`${agentId} has no plan to accept`);
    const misuse = await cli.run(['plan', agentId, '--in-process', ...common]);
    expectExit(expect, misuse, 2);
    expect(misuse.stderr).toContain('--in-process goes with --accept');
  });
});
