// `actorloop chaos` over a tree (examples/chaos/tree.json: the root spawns a reader that reports
// and a lister, waits for them, then writes the two effects): a `run` killed at the spawn points,
// at a parent's notice before its ack, and at tool and model points drawn over every agent of the
// tree (so a child is killed too, with the parent hosted in the same process), resumed until the
// root's turn ends; every log of the tree must verify and every notice must reach its parent. With
// --hosts 2 the host running the tree is killed at the root's points instead.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import type { ChaosSummary, PointReport } from '../../src/cli/chaos/report.js';
import { REPO_ROOT, cliEnv, lines, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const TREE = join(REPO_ROOT, 'examples', 'chaos', 'tree.json');
// no server of the file's own: `chaos` starts the data dir's embedded one
const stack = useCliStack({ nats: false });
let dataDir: string;

beforeAll(async () => {
  dataDir = await stack.dir('chaos-tree-data');
});

const POINTS = ['after:subagent/spawn_requested', 'after:subagent/spawned', 'before:notice-ack', 'after:tool/start', 'mid:model-stream'];

test('chaos over a tree: kills at the spawn points, before a notice\'s ack and at points of any agent; every run recovers, every log of the tree verifies', async (ctx) => {
  // with a seed, the occurrence killed at is drawn from all of the tree's: a child's as likely as the root's
  const r = await stack.pool.forTest(ctx, cliEnv(dataDir)).run(['chaos', TREE, '--points', POINTS.join(','), '--seed', '2', '--json', '--data-dir', dataDir], { timeoutMs: 170_000 });
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
  const r = await stack.pool.forTest(ctx, cliEnv(dataDir)).run(['chaos', TREE, '--points', points.join(','), '--hosts', '2', '--json', '--data-dir', dataDir], { timeoutMs: 170_000 });
  expect({ code: r.code, signal: r.signal }, show(r)).toEqual({ code: 0, signal: null });
  const summary = JSON.parse(lines(r.stdout).at(-1)!) as ChaosSummary;
  expect(summary, show(r)).toMatchObject({ ok: true, hosts: 2, runs: points.length, passed: points.length, violations: 0 });
}, 180_000);
