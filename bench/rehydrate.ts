import { createFaultInjector } from '../src/actors/faults/faults.js';
import { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createJetStreamPorts } from '../src/actors/hosting/supervisor-ports.js';
import type { ModelAdapter } from '../src/model/model-port.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import { newId } from '../src/protocol/ids.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { median, nowMs } from './stats.js';

/** One agent's log, built for timing its rehydration. */
export interface BuiltLog {
  actorId: string;
  /** Events in the log (a whole number of turns, so slightly over the length asked for). */
  events: number;
  turns: number;
  /** The snapshot hydrate finds: its seq, and its size as JSON bytes. */
  snapshotSeq: number;
  snapshotBytes: number;
  /** Model-visible history messages of the projection (part of the snapshot). */
  historyMessages: number;
  buildMs: number;
  modelFor(settings: unknown, cursor: number): Promise<ModelAdapter>;
}

/** What rehydrating one agent cost: `Supervisor.hydrate`, ms, the median over runs. */
export interface RehydrateResult extends BuiltLog {
  /** Events read after the snapshot. */
  tailEvents: number;
  withSnapshotMs: number;
  logOnlyMs: number;
}

const SNAPSHOT_EVERY = 64;

/**
 * Builds one agent's log of at least `events` events from short turns (a user message, one
 * step, a one-word answer), through the real commit path with a snapshot every 64 events.
 */
export async function buildLog(rt: BenchRuntime, events: number): Promise<BuiltLog> {
  const turnsAtMost = Math.ceil(events / 4) + 1;
  const script: ScriptResponse[] = Array.from({ length: turnsAtMost }, (_, i) => ({
    content: `pong ${i + 1}`, usage: { input_tokens: 20, output_tokens: 2 },
  }));
  const modelFor = async (_s: unknown, cursor: number) => createScriptedModel({ responses: script, cursor, record: false });
  const t0 = nowMs();
  const writer = rt.supervisor({ modelFor, onCommit: () => {}, snapshotEvery: SNAPSHOT_EVERY });
  const actorId = newId('agent');
  const actor = await writer.create({
    actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'rehydrate bench', workspace: rt.workspace, labels: {},
  });
  const request = benchTurnRequest(rt.workspace, 2);
  let turns = 0;
  while (actor.projection.seq < events && turns < turnsAtMost) {
    const ended = actor.whenTurnEnds();
    await writer.send({
      id: newId('message'), from: 'bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
      content: `ping ${turns + 1}`, request, sentAt: new Date().toISOString(),
    });
    await ended;
    turns += 1;
  }
  await actor.idle();
  const logEvents = actor.projection.seq;
  const historyMessages = actor.projection.history.length;
  await writer.stop();
  // snapshot saves are not awaited by the actor: let the last one land
  await new Promise((r) => setTimeout(r, 200));
  const snap = await rt.snapshots.load(actorId);
  return {
    actorId, events: logEvents, turns, historyMessages, modelFor,
    snapshotSeq: snap?.seq ?? 0,
    snapshotBytes: snap ? JSON.stringify(snap).length : 0,
    buildMs: nowMs() - t0,
  };
}

/** Times `Supervisor.hydrate` of the log's agent once, on a fresh supervisor with or without snapshots. */
async function hydrateOnce(rt: BenchRuntime, log: BuiltLog, snapshots: boolean): Promise<{ ms: number; tail: number }> {
  const sup = new Supervisor({
    ports: createJetStreamPorts(rt.bus), blobs: rt.blobs, snapshots: snapshots ? rt.snapshots : null, tools: rt.tools, logger: rt.logger,
    faults: createFaultInjector([]), snapshotEvery: SNAPSHOT_EVERY, modelFor: log.modelFor,
  });
  // the supervisor's one-time wake-up subscription is not part of an agent's cost
  await sup.listenForMail(() => {});
  try {
    const start = nowMs();
    const { actor } = await sup.hydrate(log.actorId);
    const ms = nowMs() - start;
    return { ms, tail: actor.projection.seq - (snapshots ? log.snapshotSeq : 0) };
  } finally {
    await sup.stop();
    // let the inbox look that hydrate started settle before the next run
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Times the rehydration of every log, with the LMDB snapshot and from the log alone, `runs`
 * times each after a warm-up, interleaved so drift on the machine touches every one alike.
 */
export async function timeRehydrations(rt: BenchRuntime, logs: BuiltLog[], runs: number): Promise<RehydrateResult[]> {
  const samples = logs.map(() => ({ snap: [] as number[], full: [] as number[], tail: 0 }));
  for (let r = -1; r < runs; r++) {
    for (const [i, log] of logs.entries()) {
      const withSnap = await hydrateOnce(rt, log, true);
      const logOnly = await hydrateOnce(rt, log, false);
      // run -1 warms up: JIT, LMDB pages, the server's view of the subject
      if (r < 0) continue;
      samples[i]!.snap.push(withSnap.ms);
      samples[i]!.full.push(logOnly.ms);
      samples[i]!.tail = withSnap.tail;
    }
  }
  return logs.map((log, i) => ({
    ...log, tailEvents: samples[i]!.tail, withSnapshotMs: median(samples[i]!.snap), logOnlyMs: median(samples[i]!.full),
  }));
}
