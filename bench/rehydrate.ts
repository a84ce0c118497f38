import { createFaultInjector } from '../src/actors/faults.js';
import { Supervisor } from '../src/actors/supervisor.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import { newId } from '../src/protocol/ids.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { median, nowMs } from './stats.js';

/** What rehydrating one agent with a log of about `events` events cost. */
export interface RehydrateResult {
  /** Events in the log (a whole number of turns, so slightly over the length asked for). */
  events: number;
  turns: number;
  /** The snapshot hydrate found: its seq, and its size as JSON bytes. */
  snapshotSeq: number;
  snapshotBytes: number;
  /** Events read after the snapshot. */
  tailEvents: number;
  /** Model-visible history messages of the projection (part of the snapshot). */
  historyMessages: number;
  /** `Supervisor.hydrate`, ms: each the median over runs. */
  withSnapshotMs: number;
  logOnlyMs: number;
  buildMs: number;
}

const SNAPSHOT_EVERY = 64;

/**
 * Builds one agent's log of at least `events` events from short turns (a user message, one
 * step, a one-word answer: the real commit path, snapshots every 64 events), then times
 * `Supervisor.hydrate` of it on a fresh supervisor, with the LMDB snapshot and without.
 */
export async function runRehydrate(rt: BenchRuntime, events: number, runs: number): Promise<RehydrateResult> {
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
  const buildMs = nowMs() - t0;

  const hydrateOnce = async (snapshots: boolean): Promise<{ ms: number; tail: number }> => {
    const sup = new Supervisor({
      bus: rt.bus, blobs: rt.blobs, snapshots: snapshots ? rt.snapshots : null, tools: rt.tools, logger: rt.logger,
      faults: createFaultInjector([]), snapshotEvery: SNAPSHOT_EVERY, modelFor,
    });
    // the supervisor's one-time wake-up subscription is not part of an actor's cost
    await sup.listenForMail(() => {});
    try {
      const start = nowMs();
      const { actor: a } = await sup.hydrate(actorId);
      const ms = nowMs() - start;
      return { ms, tail: a.projection.seq - (snapshots ? (snap?.seq ?? 0) : 0) };
    } finally {
      await sup.stop();
      // let the inbox look that serve started settle before the next run
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const timed = async (snapshots: boolean): Promise<{ ms: number; tail: number }> => {
    await hydrateOnce(snapshots); // warm-up: JIT, LMDB pages, the server's view of the subject
    const samples: { ms: number; tail: number }[] = [];
    for (let r = 0; r < runs; r++) samples.push(await hydrateOnce(snapshots));
    return { ms: median(samples.map((s) => s.ms)), tail: samples[0]!.tail };
  };
  const withSnap = await timed(true);
  const logOnly = await timed(false);
  return {
    events: logEvents, turns,
    snapshotSeq: snap?.seq ?? 0,
    snapshotBytes: snap ? JSON.stringify(snap).length : 0,
    tailEvents: withSnap.tail,
    historyMessages,
    withSnapshotMs: withSnap.ms,
    logOnlyMs: logOnly.ms,
    buildMs,
  };
}
