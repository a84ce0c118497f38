import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import { newId } from '../src/protocol/ids.js';
import type { AgentActor } from '../src/actors/actor/agent-actor.js';
import type { Supervisor } from '../src/actors/hosting/supervisor.js';
import { benchTurnRequest, pool, type BenchRuntime } from './harness.js';
import { cpuMeter, settleGc, nowMs, sampleRss, type CpuUse } from './stats.js';

/** What one run of one implementation measured. */
export interface RunResult {
  /** Steps completed (model responses consumed: the echo steps plus the final answer). */
  steps: number;
  /** First message sent to last turn ended. */
  wallMs: number;
  /** Per-step latency samples, ms. */
  latencies: number[];
  /** Peak process RSS during the run, bytes. */
  peakRss: number;
  /** JetStream commits (actorloop: onCommit calls; durable floor: acked publishes); null in memory. */
  commits: number | null;
  /** Agents whose turn did not complete. */
  failed: number;
  /** CPU used between the first message and the last turn's end. */
  cpu?: CpuUse;
}

/** The tool-loop script: `steps` responses calling echo, then a final answer. */
export function toolLoopScript(steps: number): ScriptResponse[] {
  const usage = { input_tokens: 100, output_tokens: 10 };
  return [
    ...Array.from({ length: steps }, (_, i): ScriptResponse => ({
      tool_calls: [{ name: 'echo', arguments: { text: `echo ${i + 1}` } }],
      usage,
    })),
    { content: 'All echoes returned.', usage },
  ];
}

/**
 * Creates `count` agents on `sup`, a few at a time (each is a directory put and an inbox consumer).
 * Each is ready once its consumer exists (asking for its pending mail waits for that): a
 * supervisor that makes consumers beside the first turn would otherwise make them in the timed run.
 */
export function createAgents(sup: Supervisor, rt: BenchRuntime, count: number): Promise<AgentActor[]> {
  return pool(Array.from({ length: count }), 32, async () => {
    const actorId = newId('agent');
    const actor = await sup.create({
      actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'tool-loop bench', workspace: rt.workspace, labels: {},
    });
    await sup.inboxPending(actorId);
    return actor;
  });
}

/**
 * Sends each agent one user message that starts its turn. The task names the agent, so no two
 * agents send the same request bytes (identical ones would share one content-addressed blob).
 */
export function sendTasks(sup: Supervisor, rt: BenchRuntime, actors: AgentActor[], maxSteps: number): Promise<void[]> {
  const request = benchTurnRequest(rt.workspace, maxSteps);
  return Promise.all(
    actors.map((a) =>
      sup.send({
        id: newId('message'), from: 'bench', to: a.actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: `Agent ${a.actorId}: call echo until the script says you are done.`, request, sentAt: new Date().toISOString(),
      }),
    ),
  );
}

/**
 * Runs `agents` actorloop agents, one turn each, on a fresh supervisor. A step's latency runs
 * from the ack of the commit holding its `step/start` to the ack of the one holding its `step/end`
 * (host time when `onCommit` fires).
 */
export async function runActorloop(rt: BenchRuntime, agents: number, script: ScriptResponse[]): Promise<RunResult> {
  const latencies: number[] = [];
  const stepStarts = new Map<string, number>();
  let commits = 0;
  let steps = 0;
  const sup = rt.supervisor({
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit(_actorId, events) {
      const t = nowMs();
      commits += 1;
      for (const e of events) {
        if (e.type === 'step/start') {
          steps += 1;
          stepStarts.set(e.step!, t);
        } else if (e.type === 'step/end') {
          const s = stepStarts.get(e.step!);
          if (s !== undefined) latencies.push(t - s);
          stepStarts.delete(e.step!);
        }
      }
    },
  });
  const actors = await createAgents(sup, rt, agents);
  const ended = actors.map((a) => a.whenTurnEnds());
  settleGc();
  const rss = sampleRss();
  const cpu = cpuMeter(rt.nats.pid);
  const t0 = nowMs();
  await sendTasks(sup, rt, actors, script.length + 1);
  const outcomes = await Promise.allSettled(ended);
  const wallMs = nowMs() - t0;
  const used = cpu.stop();
  const peakRss = rss.stop();
  await sup.stop();
  await Promise.allSettled(actors.map((a) => a.idle()));
  let failed = 0;
  for (const o of outcomes) {
    if (o.status === 'fulfilled' && o.value.outcome === 'completed') continue;
    failed += 1;
    const why = o.status === 'rejected' ? (o.reason as Error).message : `${o.value.outcome} (${o.value.reason})`;
    process.stderr.write(`actorloop agent did not complete: ${why}\n`);
  }
  return { steps, wallMs, latencies, peakRss, commits, failed, cpu: used };
}
