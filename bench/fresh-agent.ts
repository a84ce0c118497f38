import { createScriptedModel } from '../src/model/scripted-model.js';
import { newId } from '../src/protocol/ids.js';
import type { AgentActor } from '../src/actors/actor/agent-actor.js';
import type { Supervisor } from '../src/actors/hosting/supervisor.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { fmtMs, median, nowMs, percentile, settleGc, table } from './stats.js';
import { createAgents, toolLoopScript } from './workload.js';

/** What one run of the fresh-agent section measured at one concurrency. */
export interface FreshResult {
  lanes: number;
  tasks: number;
  /** Model responses per task (the echo steps and the answer). */
  stepsPerTask: number;
  /** supervisor.create() until it resolved. */
  createMs: number[];
  /** The task sent until its turn ended. */
  turnMs: number[];
  wallMs: number;
  failed: number;
}

/** The same tasks on agents created before the clock started: what a fresh agent is measured against. */
export interface PreCreatedResult {
  lanes: number;
  tasks: number;
  stepsPerTask: number;
  turnMs: number[];
  wallMs: number;
  failed: number;
}

function benchSupervisor(rt: BenchRuntime, steps: number): Supervisor {
  const script = toolLoopScript(steps);
  return rt.supervisor({
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit() {},
  });
}

/** Sends one agent its task and resolves with whether its turn completed. */
async function oneTask(sup: Supervisor, rt: BenchRuntime, actor: AgentActor, steps: number): Promise<boolean> {
  const ended = actor.whenTurnEnds();
  await sup.send({
    id: newId('message'), from: 'client:bench', to: actor.actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: `Agent ${actor.actorId}: call echo until the script says you are done.`, request: benchTurnRequest(rt.workspace, steps + 2),
    sentAt: new Date().toISOString(),
  });
  return (await ended).outcome === 'completed';
}

/**
 * A fresh agent per task, as a person starting a new task would: create the agent (its directory
 * entry and inbox), send it the task, wait for its one turn (`steps` echo steps and an answer) to
 * end; `lanes` of these run at once, each doing its tasks one after another.
 */
export async function runFreshAgents(rt: BenchRuntime, lanes: number, tasksPerLane: number, steps: number): Promise<FreshResult> {
  const sup = benchSupervisor(rt, steps);
  const createMs: number[] = [];
  const turnMs: number[] = [];
  let failed = 0;
  settleGc();
  const t0 = nowMs();
  await Promise.all(Array.from({ length: lanes }, async () => {
    for (let i = 0; i < tasksPerLane; i++) {
      const actorId = newId('agent');
      const c0 = nowMs();
      const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'fresh-agent bench', workspace: rt.workspace, labels: {} });
      const c1 = nowMs();
      createMs.push(c1 - c0);
      if (!(await oneTask(sup, rt, actor, steps))) failed += 1;
      turnMs.push(nowMs() - c1);
    }
  }));
  const wallMs = nowMs() - t0;
  await sup.stop();
  return { lanes, tasks: lanes * tasksPerLane, stepsPerTask: steps + 1, createMs, turnMs, wallMs, failed };
}

/** The same lanes and tasks as `runFreshAgents`, each task on an agent of its own created before the clock starts. */
export async function runPreCreated(rt: BenchRuntime, lanes: number, tasksPerLane: number, steps: number): Promise<PreCreatedResult> {
  const sup = benchSupervisor(rt, steps);
  const actors = await createAgents(sup, rt, lanes * tasksPerLane);
  const turnMs: number[] = [];
  let failed = 0;
  settleGc();
  const t0 = nowMs();
  await Promise.all(Array.from({ length: lanes }, async (_, lane) => {
    for (let i = 0; i < tasksPerLane; i++) {
      const s = nowMs();
      if (!(await oneTask(sup, rt, actors[lane * tasksPerLane + i]!, steps))) failed += 1;
      turnMs.push(nowMs() - s);
    }
  }));
  const wallMs = nowMs() - t0;
  await sup.stop();
  return { lanes, tasks: lanes * tasksPerLane, stepsPerTask: steps + 1, turnMs, wallMs, failed };
}

/** Every run of one concurrency: fresh and pre-created, interleaved. */
export interface FreshPair {
  fresh: FreshResult[];
  pre: PreCreatedResult[];
}

/** Runs fresh and pre-created `runs` times each, alternating, so the machine's drift touches both alike. */
export async function runFreshPairs(rt: BenchRuntime, lanes: number, tasksPerLane: number, steps: number, runs: number): Promise<FreshPair> {
  const out: FreshPair = { fresh: [], pre: [] };
  for (let r = 0; r < runs; r++) {
    out.fresh.push(await runFreshAgents(rt, lanes, tasksPerLane, steps));
    out.pre.push(await runPreCreated(rt, lanes, tasksPerLane, steps));
  }
  return out;
}

const stepsPerSec = (r: { tasks: number; stepsPerTask: number; wallMs: number }): number => (r.tasks * r.stepsPerTask) / (r.wallMs / 1000);

/** Prints the fresh-agent table: medians over the runs of each concurrency. */
export function printFresh(pairs: FreshPair[], steps: number): void {
  console.log('');
  console.log(`== a fresh agent per task (create, one turn of ${steps} echo steps + an answer) against the same tasks on pre-created agents ==`);
  const med = (xs: number[]) => median(xs);
  console.log(table(
    ['lanes', 'tasks', 'fresh steps/s', 'pre-created steps/s', 'fresh / pre-created', 'create p50 / p99 ms', 'fresh turn p50 / p99 ms', 'pre-created turn p50 / p99 ms', 'failed'],
    pairs.map(({ fresh, pre }) => {
      const f = med(fresh.map(stepsPerSec));
      const p = med(pre.map(stepsPerSec));
      return [
        String(fresh[0]!.lanes), String(fresh[0]!.tasks), f.toFixed(0), p.toFixed(0), `${((100 * f) / p).toFixed(0)}%`,
        `${fmtMs(med(fresh.map((r) => percentile(r.createMs, 50))))} / ${fmtMs(med(fresh.map((r) => percentile(r.createMs, 99))))}`,
        `${fmtMs(med(fresh.map((r) => percentile(r.turnMs, 50))))} / ${fmtMs(med(fresh.map((r) => percentile(r.turnMs, 99))))}`,
        `${fmtMs(med(pre.map((r) => percentile(r.turnMs, 50))))} / ${fmtMs(med(pre.map((r) => percentile(r.turnMs, 99))))}`,
        String(fresh.reduce((n, r) => n + r.failed, 0) + pre.reduce((n, r) => n + r.failed, 0)),
      ];
    }),
  ));
  const spread = pairs.map(({ fresh, pre }) => `lanes ${fresh[0]!.lanes}: fresh ${fresh.map((r) => stepsPerSec(r).toFixed(0)).join(', ')}; pre-created ${pre.map((r) => stepsPerSec(r).toFixed(0)).join(', ')}`);
  console.log(`  steps/s of each run: ${spread.join('; ')}`);
  console.log(
    'notes: steps/s = tasks × model responses / wall time of the run. Fresh: each task creates its agent (supervisor.create(),\n' +
      '  timed as create), sends it the task and waits for its turn/end (timed as turn, from create\'s end); pre-created: the same\n' +
      '  tasks, each on an agent of its own created before the clock starts. Runs alternate fresh, pre-created; medians of the runs.',
  );
  const one = pairs.find((p) => p.fresh[0]!.lanes === 1);
  if (one) {
    const r = (100 * med(one.fresh.map(stepsPerSec))) / med(one.pre.map(stepsPerSec));
    console.log(`target (issue): a fresh agent per task at one lane ≥ 60% of the pre-created loop [${r.toFixed(0)}%: ${r >= 60 ? 'met' : 'MISSED'}]`);
  }
}
