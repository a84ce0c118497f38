// `demo investigators` as a person runs it: a real CLI process on the embedded nats-server, a
// tree of a parent and three investigators, the fix verified, and `verify --tree` over the logs.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';
import { pidAlive } from '../../src/bus/embedded.js';
import { natsServerVersion } from '../../src/bus/nats-server.js';
import { AGENT_ID, lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const stack = useCliStack({ nats: false });

const INVESTIGATORS = ['change-reader', 'failure-reader', 'reproducer'];

test('demo investigators: three investigators spawned in one step report, the parent fixes the code, and the tree verifies', async ({ onTestFinished }) => {
  await natsServerVersion(); // the embedded default needs the binary
  const dataDir = await stack.dir('investigators-data');
  const cli = stack.cli(onTestFinished, dataDir);
  const r = await cli.run(['demo', 'investigators'], { timeoutMs: 60_000 });
  expect(r.code, show(r)).toBe(0);
  const ws = /^demo workspace: (.+)$/m.exec(r.stdout)?.[1];
  expect(ws, show(r)).toBeDefined();
  stack.remove(ws!);
  const rootId = lines(r.stdout).find((l) => AGENT_ID.test(l));
  expect(rootId, show(r)).toBeDefined();
  // the tree as it ran: each investigator spawned, reported and ended
  for (const name of INVESTIGATORS) {
    expect(r.stdout).toMatch(new RegExp(`^tree: main spawned ${name} \\(agt_`, 'm'));
    expect(r.stdout).toMatch(new RegExp(`^tree: ${name} reports: `, 'm'));
    expect(r.stdout).toMatch(new RegExp(`^tree: ${name} ended its turn: completed`, 'm'));
  }
  for (const command of ['tree', 'events', 'verify']) expect(r.stdout).toContain(`npx actorloop ${command} ${rootId}`);
  expect(r.stdout).toContain(`npx actorloop verify ${rootId} --tree`);
  // the demo stopped the embedded server it started
  const serverLog = await readFile(join(dataDir, 'nats', 'server.log'), 'utf8');
  const pid = Number(/\[(\d+)\]/.exec(serverLog)?.[1]);
  expect(pid).toBeGreaterThan(0);
  expect(pidAlive(pid)).toBe(false);

  // the copy's tests pass after the fix
  await promisify(execFile)(process.execPath, ['--test'], { cwd: ws! });

  // all three asked for in one step of the parent, and each reported once
  const events = await cli.run(['events', rootId!, '--json']);
  expect(events.code, show(events)).toBe(0);
  const spawns = parseEvents(events.stdout).filter((e) => e.type === 'subagent/spawn_requested');
  expect(spawns.map((e) => (e.data as { name: string }).name).sort()).toEqual(INVESTIGATORS);
  expect(new Set(spawns.map((e) => e.step)).size).toBe(1);
  for (const s of spawns) {
    const child = await cli.run(['events', (s.data as { childId: string }).childId, '--json']);
    expect(child.code, show(child)).toBe(0);
    expect(parseEvents(child.stdout).filter((e) => e.type === 'subagent/reported')).toHaveLength(1);
  }

  const verify = await cli.run(['verify', rootId!, '--tree']);
  expect(verify.code, show(verify)).toBe(0);
  expect(verify.stdout).toContain('tree: every spawn, notice, permission and budget holds');
  const json = await cli.run(['verify', rootId!, '--tree', '--json']);
  expect(json.code, show(json)).toBe(0);
  const verdict = JSON.parse(json.stdout) as { ok: boolean; running: string[]; actors: Array<{ name: string; ok: boolean }> };
  expect(verdict.ok).toBe(true);
  expect(verdict.running).toEqual([]);
  expect(verdict.actors.map((a) => a.name).sort()).toEqual([...INVESTIGATORS, 'main'].sort());
});

test('demo with a scenario it does not have says so in one line and exits 2', async ({ onTestFinished }) => {
  const dataDir = await stack.dir('investigators-data');
  const cli = stack.cli(onTestFinished, dataDir);
  const r = await cli.run(['demo', 'investigator']);
  expect(r.code, show(r)).toBe(2);
  expect(r.stderr).toContain('there is no demo "investigator"');
  expect(r.stderr).toContain('actorloop demo investigators');
});
