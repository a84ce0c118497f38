// `actorloop chaos` over a tree (examples/chaos/tree.json: the root spawns a reader that reports
// and a lister, waits for them, then writes the two effects): a `run` killed at the spawn points,
// at a parent's notice before its ack, and at tool and model points drawn over every agent of the
// tree (so a child is killed too, with the parent hosted in the same process), resumed until the
// root's turn ends; every log of the tree must verify and every notice must reach its parent. With
// --hosts 2 the host running the tree is killed at the root's points instead.
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { pidAlive } from '../../src/bus/embedded.js';
import type { ChaosSummary, PointReport } from '../../src/cli/chaos/report.js';
import { CliPool, REPO_ROOT, cliEnv, lines, show } from '../helpers/cli.js';
import { tempDir } from '../helpers/nats.js';
import { killMarked } from '../helpers/processes.js';

const TREE = join(REPO_ROOT, 'examples', 'chaos', 'tree.json');
const pool = new CliPool();
let dataDir: string;

beforeAll(async () => {
  dataDir = await tempDir('chaos-tree-data');
});

afterAll(async () => {
  await pool.killAll();
  await killMarked([dataDir]);
  // a chaos process killed midway (a failed test) cannot stop the nats-server it started
  const state = join(dataDir, 'nats', 'server.json');
  if (existsSync(state)) {
    const { pid } = JSON.parse(readFileSync(state, 'utf8')) as { pid: number };
    if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
  }
  await rm(dataDir, { recursive: true, force: true });
});

const POINTS = ['after:subagent/spawn_requested', 'after:subagent/spawned', 'before:notice-ack', 'after:tool/start', 'mid:model-stream'];

test('chaos over a tree: kills at the spawn points, before a notice\'s ack and at points of any agent; every run recovers, every log of the tree verifies', async (ctx) => {
  // with a seed, the occurrence killed at is drawn from all of the tree's: a child's as likely as the root's
  const r = await pool.forTest(ctx, cliEnv(dataDir)).run(['chaos', TREE, '--points', POINTS.join(','), '--seed', '2', '--json', '--data-dir', dataDir], { timeoutMs: 170_000 });
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
  const objects = lines(r.stdout).map((l) => JSON.parse(l) as PointReport | ChaosSummary);
  const summary = objects.at(-1) as ChaosSummary;
  expect(summary, show(r)).toMatchObject({ type: 'summary', ok: true, runs: POINTS.length, passed: POINTS.length, violations: 0 });
  const points = objects.filter((o): o is PointReport => o.type === 'point');
  expect(points.map((p) => p.point).sort()).toEqual([...POINTS].sort());
  for (const p of points) expect(p.results[0]!.kills, JSON.stringify(p)).toBe(1);
  expect(summary.baselines.map((b) => [b.mode, b.passed, b.effectLines])).toEqual([['full-auto', true, 2]]);
  expect(existsSync(join(dataDir, 'nats', 'server.json'))).toBe(false);
}, 180_000);

test('chaos over a tree with --hosts 2: the host running the tree is killed at the root\'s spawn and notice points, the other takes every agent over', async (ctx) => {
  const points = ['after:subagent/spawned', 'before:notice-ack'];
  const r = await pool.forTest(ctx, cliEnv(dataDir)).run(['chaos', TREE, '--points', points.join(','), '--hosts', '2', '--json', '--data-dir', dataDir], { timeoutMs: 170_000 });
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
  const summary = JSON.parse(lines(r.stdout).at(-1)!) as ChaosSummary;
  expect(summary, show(r)).toMatchObject({ ok: true, hosts: 2, runs: points.length, passed: points.length, violations: 0 });
}, 180_000);
