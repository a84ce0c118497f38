import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { BenchRuntime } from './harness.js';
import { forceGc, nowMs } from './stats.js';
import { createAgents, sendTasks } from './workload.js';

/** What parking agents mid-turn cost. */
export interface ParkResult {
  agents: number;
  /** Agents that committed their `attempt/start` before the wait gave up. */
  parked: number;
  before: NodeJS.MemoryUsage;
  after: NodeJS.MemoryUsage;
  /** Mean size of a parked agent's model-visible history, as JSON bytes. */
  historyBytes: number;
  createMs: number;
  parkMs: number;
  stopMs: number;
  gcForced: boolean;
}

const PARK_DELAY_MS = 10 * 60_000;
const PARK_TIMEOUT_MS = 180_000;

/**
 * Parks `count` agents inside an open attempt (the model's first response takes 10 minutes),
 * measures heap and RSS after a forced GC before creating them and once every one has committed
 * its `attempt/start`, then stops them.
 */
export async function runPark(rt: BenchRuntime, count: number): Promise<ParkResult> {
  const script: ScriptResponse[] = [{ content: 'never delivered', delay_ms: PARK_DELAY_MS }];
  let parked = 0;
  let onAllParked!: () => void;
  const allParked = new Promise<void>((resolve) => (onAllParked = resolve));
  const sup = rt.supervisor({
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit(_actorId, events) {
      for (const e of events) if (e.type === 'attempt/start' && ++parked === count) onAllParked();
    },
  });
  const gcForced = forceGc();
  const before = process.memoryUsage();
  const t0 = nowMs();
  const actors = await createAgents(sup, rt, count);
  const t1 = nowMs();
  await sendTasks(sup, rt, actors, 10);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([allParked, new Promise<void>((resolve) => (timer = setTimeout(resolve, PARK_TIMEOUT_MS)))]);
  clearTimeout(timer);
  const t2 = nowMs();
  // let the last pumps return to their await on the model before measuring
  await new Promise((r) => setTimeout(r, 250));
  forceGc();
  const after = process.memoryUsage();
  const historyBytes = actors.reduce((n, a) => n + JSON.stringify(a.projection.history).length, 0) / Math.max(1, actors.length);
  const t3 = nowMs();
  await sup.stop();
  await Promise.allSettled(actors.map((a) => a.idle()));
  const stopMs = nowMs() - t3;
  return { agents: count, parked, before, after, historyBytes, createMs: t1 - t0, parkMs: t2 - t1, stopMs, gcForced };
}
