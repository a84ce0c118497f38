import { createScriptedModel } from '../src/model/scripted-model.js';
import { newId } from '../src/protocol/ids.js';
import type { Supervisor } from '../src/actors/hosting/supervisor.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { fmtMs, nowMs, percentile, settleGc, table } from './stats.js';
import { toolLoopScript } from './workload.js';

/** What the fresh-agent section measured at one concurrency. */
export interface FreshResult {
  lanes: number;
  tasks: number;
  /** supervisor.create() until it resolved: directory entry written, log end read, inbox consumer ready. */
  createMs: number[];
  /** The task sent until its turn ended. */
  turnMs: number[];
  wallMs: number;
  failed: number;
}

/**
 * A fresh agent per task, as a person starting a new task would: create the agent (its directory
 * entry and inbox consumer), send it the task, wait for its one turn to end; `lanes` of these run at
 * once, each doing its tasks one after another.
 */
export async function runFreshAgents(rt: BenchRuntime, lanes: number, tasksPerLane: number, steps: number): Promise<FreshResult> {
  const script = toolLoopScript(steps);
  const sup: Supervisor = rt.supervisor({
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit() {},
  });
  const request = benchTurnRequest(rt.workspace, script.length + 1);
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
      const ended = actor.whenTurnEnds();
      await sup.send({
        id: newId('message'), from: 'client:bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: `Agent ${actorId}: call echo until the script says you are done.`, request, sentAt: new Date().toISOString(),
      });
      const out = await ended;
      turnMs.push(nowMs() - c1);
      if (out.outcome !== 'completed') failed += 1;
    }
  }));
  const wallMs = nowMs() - t0;
  await sup.stop();
  return { lanes, tasks: lanes * tasksPerLane, createMs, turnMs, wallMs, failed };
}

/** Prints the fresh-agent table. */
export function printFresh(results: FreshResult[], steps: number): void {
  console.log('');
  console.log(`== a fresh agent per task (create, one turn of ${steps} echo steps + an answer) ==`);
  console.log(table(
    ['lanes', 'tasks', 'tasks/s', 'create p50 ms', 'create p99 ms', 'turn p50 ms', 'turn p99 ms', 'failed'],
    results.map((r) => [
      String(r.lanes), String(r.tasks), (r.tasks / (r.wallMs / 1000)).toFixed(0),
      fmtMs(percentile(r.createMs, 50)), fmtMs(percentile(r.createMs, 99)),
      fmtMs(percentile(r.turnMs, 50)), fmtMs(percentile(r.turnMs, 99)), String(r.failed),
    ]),
  ));
  console.log('notes: create = supervisor.create() (directory entry, log end, inbox consumer ready) until it resolved; turn = the task sent until turn/end.');
}
