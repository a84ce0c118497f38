import { defaultTooling } from '../src/actors/agent/tooling.js';
import { pino } from 'pino';
import { AgentActor } from '../src/actors/actor/agent-actor.js';
import { createFaultInjector } from '../src/actors/faults/faults.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import type { BlobStore } from '../src/store/blob-port.js';
import type { ActorLogWriter } from '../src/store/log-port.js';
import { emptyProjection } from '../src/store/projection.js';
import { createMemoryLogs } from '../src/store/memory-log.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { echoTool } from './echo-tool.js';
import { benchTurnRequest } from './harness.js';
import { cpuMeter, settleGc, nowMs, sampleRss } from './stats.js';
import type { RunResult } from './workload.js';

/** The in-memory log of one agent of a no-I/O run: stamped, validated and encoded as on JetStream; a commit resolves on a microtask instead of a PubAck. */
export function memoryLog(actorId: string): ActorLogWriter {
  return createMemoryLogs().writer({ rootId: actorId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
}

/** A blob store that stores nothing (the no-I/O runs write no blobs). */
export const noBlobs: BlobStore = {
  put: async () => 'sha256:none',
  get: async () => undefined,
  getText: async () => undefined,
  has: async () => false,
  flush: async () => {},
};

/**
 * The actor runtime with no I/O at all: the same agents, machines, projection, tools and
 * scripted model, with the log in memory and no blobs, snapshots or inbox. Its steps/s is the
 * ceiling the durable runtime can reach on this machine: what is left is the cost of NATS.
 */
export async function runActorloopNoIo(agents: number, script: ScriptResponse[], workspace: string): Promise<RunResult> {
  const tools = createToolRegistry([echoTool]);
  const logger = pino({ level: 'silent' });
  const latencies: number[] = [];
  const stepStarts = new Map<string, number>();
  let commits = 0;
  let steps = 0;
  const onCommit = (events: ActorEvent[]): void => {
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
  };
  const actors = Array.from({ length: agents }, () => {
    const actorId = newId('agent');
    const actor = new AgentActor({
      actorId,
      rootId: actorId,
      projection: emptyProjection(actorId),
      machines: null,
      snapshotEvery: 64,
      snapshotSeq: 0,
      ports: {
        log: memoryLog(actorId),
        blobs: noBlobs,
        snapshots: null,
        tools,
        tooling: defaultTooling(),
        modelFor: async (_s, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
        clock: { nowMs: () => Date.now() },
        faults: createFaultInjector([]),
        logger,
        onCommit,
      },
    });
    actor.open();
    return actor;
  });
  const ended = actors.map((a) => a.whenTurnEnds());
  settleGc();
  const rss = sampleRss();
  const cpu = cpuMeter();
  const t0 = nowMs();
  const request = benchTurnRequest(workspace, script.length + 1);
  await Promise.all(
    actors.map((a) =>
      a.receive({
        id: newId('message'), from: 'bench', to: a.actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: `Agent ${a.actorId}: call echo until the script says you are done.`, request, sentAt: new Date().toISOString(),
      }),
    ),
  );
  const outcomes = await Promise.allSettled(ended);
  const wallMs = nowMs() - t0;
  const used = cpu.stop();
  const peakRss = rss.stop();
  for (const a of actors) a.stop();
  const failed = outcomes.filter((o) => o.status !== 'fulfilled' || o.value.outcome !== 'completed').length;
  return { steps, wallMs, latencies, peakRss, commits, failed, cpu: used };
}
