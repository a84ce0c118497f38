import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { captureModels, ofType, only, replay, startTurn, actorTestWorld } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

/** A patch that creates out.txt holding one line. */
const CREATE_OUT = '--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+x\n';

const readThenAnswer: ScriptResponse[] = [
  { tool_calls: [{ id: 'c1', name: 'read_file', arguments: { path: 'src/a.txt' } }] },
  { content: 'a.txt holds alpha and beta.' },
];

/** Runs a turn on a supervisor whose faults drop the actor at `spec`; resolves once it was dropped. */
async function runUntilDropped(rt: TestRuntime, spec: string, workspace = world.ws): Promise<AgentActor> {
  // the drop leaves a record of its point, as a kill does, for the recovery's actor/killed
  const sup = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs(spec), undefined, rt.faultRecords) });
  const { actor, ended } = await startTurn(sup, 'what is in a.txt?', turnRequest(workspace));
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  expect(actor.failed).toMatchObject({ code: 'actor.dropped' });
  return actor;
}

/** Rehydrates `actorId` on a new supervisor of the same runtime and waits for the open turn to end. */
async function hydrateAndFinish(sup: Supervisor, actorId: string): Promise<{ actor: AgentActor; recovered: boolean; ended: TurnEnded }> {
  let ended: Promise<TurnEnded> | null = null;
  const { actor, recovered } = await sup.hydrate(actorId, (a) => {
    ended = a.whenTurnEnds();
  });
  expect(recovered).toBe(true);
  return { actor, recovered, ended: await ended! };
}

function expectClean(log: ActorEvent[]): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
}

/** Types of the events from the first `actor/rehydrated` on. */
function afterRehydrate(log: ActorEvent[]): string[] {
  return log.slice(log.findIndex((e) => e.type === 'actor/rehydrated')).map((e) => e.type);
}

describe('recovery in process', () => {
  it('runs a read_file call again after a drop after its tool/start', async () => {
    const rt = await rts.open({ script: readThenAnswer });
    const dropped = await runUntilDropped(rt, 'after:tool/start=drop');
    const sup = rt.supervisor();
    const before = await readLog(sup, dropped.rootId, dropped.actorId);
    expect(before.at(-1)!.type).toBe('tool/start');
    expect(ofType(before, 'tool/result')).toHaveLength(0);

    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'a.txt holds alpha and beta.' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(afterRehydrate(log).slice(0, 5)).toEqual([
      'actor/rehydrated', 'recovery/started', 'tool/start', 'recovery/continuation', 'tool/result',
    ]);
    const starts = ofType(log, 'tool/start');
    expect(starts.map((s) => s.data.rerun)).toEqual([false, true]);
    expect(starts[1]!.call).toBe(starts[0]!.call);
    expect(starts[1]!.data.idempotencyKey).toBe(starts[0]!.data.idempotencyKey);
    expect(only(log, 'tool/result').data.output).toContain('alpha');
    expect(only(log, 'recovery/continuation').data).toMatchObject({ resume: 'step' });
    expect(only(log, 'recovery/continuation').data.closed).toEqual([
      expect.stringContaining('run again: it has no side effects'),
    ]);
    expect(only(log, 'actor/rehydrated').data).toEqual({ snapshotSeq: 0, tailEvents: before.length });
    // first in the recovery: the note that the previous incarnation died, and where
    expect(log[before.length]).toMatchObject({
      type: 'actor/killed', epoch: 2, data: { point: 'after:tool/start', detectedBy: 'fault record (drop)', epoch: 1, lastSeq: before.length },
    });
    // the new incarnation stamps a higher epoch
    expect(new Set(before.map((e) => e.epoch))).toEqual(new Set([1]));
    expect(new Set(log.slice(before.length).map((e) => e.epoch))).toEqual(new Set([2]));
    // a rerun is not a second call against the budget
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'completed', toolCalls: 1, steps: 2 });
    expectClean(log);
    expect(actor.projection).toEqual(replay(actor.actorId, log));
  });

  // apply_patch has manual recovery (write_file reconciles: see reconcile.test.ts)
  it('closes a started apply_patch as outcome_unknown, never running it twice', async () => {
    const out = await tempDir('ws-write');
    const models = captureModels([
      { tool_calls: [{ id: 'w1', name: 'apply_patch', arguments: { patch: CREATE_OUT } }] },
      { content: 'I may have written out.txt.' },
    ]);
    const rt = await rts.open({ models });
    const dropped = await runUntilDropped(rt, 'after:tool/start=drop', out);
    const sup = rt.supervisor();
    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // dropped after the commit of tool/start, before the tool ran; and it never ran afterwards
    await expect(stat(join(out, 'out.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(only(log, 'tool/start').data).toMatchObject({ name: 'apply_patch', effects: 'possible', rerun: false });
    const unknown = only(log, 'tool/outcome_unknown');
    expect(unknown.call).toBe(only(log, 'tool/call').call);
    expect(unknown.data.reason).toContain('may or may not have taken effect');
    expect(ofType(log, 'tool/result')).toHaveLength(0);
    expect(afterRehydrate(log).slice(0, 4)).toEqual([
      'actor/rehydrated', 'recovery/started', 'tool/outcome_unknown', 'recovery/continuation',
    ]);
    // the model is told
    const next = models.requests().at(-1)!;
    expect(next.request.messages.at(-1)).toMatchObject({ role: 'tool', callId: 'w1', name: 'apply_patch' });
    expect(next.body).toContain('Outcome unknown: the process stopped after apply_patch started');
    expectClean(log);
    await rm(out, { recursive: true, force: true });
  });

  it('does not run an apply_patch again that ran before the drop', async () => {
    const out = await tempDir('ws-write');
    const rt = await rts.open({
      script: [
        { tool_calls: [{ name: 'apply_patch', arguments: { patch: CREATE_OUT } }] },
        { content: 'wrote it, maybe' },
      ],
    });
    const dropped = await runUntilDropped(rt, 'before:tool/result=drop', out);
    // it ran once; remove what it wrote, so a second run would show
    expect(await stat(join(out, 'out.txt'))).toBeTruthy();
    await rm(join(out, 'out.txt'));
    const sup = rt.supervisor();
    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended.outcome).toBe('completed');
    await expect(stat(join(out, 'out.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(ofType(log, 'tool/outcome_unknown')).toHaveLength(1);
    expectClean(log);
    await rm(out, { recursive: true, force: true });
  });

  it('interrupts an attempt dropped mid-stream and sends the same request again', async () => {
    const models = captureModels([{ content: 'hello from the model' }]);
    const rt = await rts.open({ models });
    const dropped = await runUntilDropped(rt, 'mid:model-stream=drop');
    const sup = rt.supervisor();
    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'hello from the model' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const digest = only(log, 'request/prepared').data.digest;
    const starts = ofType(log, 'attempt/start');
    const ends = ofType(log, 'attempt/end');
    expect(starts.map((s) => s.data.requestDigest)).toEqual([digest, digest]);
    expect(starts.map((s) => s.data.index)).toEqual([1, 2]);
    expect(ends.map((e) => e.data.outcome)).toEqual(['interrupted', 'succeeded']);
    expect(ends[0]!.attempt).toBe(starts[0]!.attempt);
    // usage settled, estimated
    expect(ends[0]!.data.usage).toMatchObject({ estimated: true });
    expect(ends[0]!.data.usage.inputTokens).toBeGreaterThan(0);
    expect(afterRehydrate(log).slice(0, 5)).toEqual([
      'actor/rehydrated', 'recovery/started', 'attempt/end', 'recovery/continuation', 'attempt/start',
    ]);
    // both incarnations sent the same bytes, and the interrupted response is the one answered again
    const requests = models.requests();
    expect(requests.map((r) => r.digest)).toEqual([digest, digest]);
    expect(models.models.at(-1)!.cursor).toBe(1);
    expect(actor.projection.modelResponses).toBe(1);
    expectClean(log);
  });

  it.each([
    'after:turn/start=drop',
    'after:step/start@2=drop',
    'mid:model-stream@2=drop',
    'after:assistant/accepted=drop',
    'before:tool/result=drop',
    'before:inbox-ack=drop',
  ])('recovers a read_file turn dropped at %s', async (spec) => {
    const rt = await rts.open({ script: readThenAnswer });
    const dropped = await runUntilDropped(rt, spec);
    const sup = rt.supervisor();
    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'a.txt holds alpha and beta.' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'inbox/received')).toBeTruthy();
    expect(only(log, 'turn/start')).toBeTruthy();
    expect(only(log, 'tool/result').data.output).toContain('alpha');
    expect(only(log, 'recovery/started')).toBeTruthy();
    expect(only(log, 'recovery/continuation')).toBeTruthy();
    expectClean(log);
    expect(actor.projection).toEqual(replay(actor.actorId, log));
  });

  it('recovers again when recovery itself is dropped', async () => {
    const rt = await rts.open({ script: readThenAnswer });
    const dropped = await runUntilDropped(rt, 'after:tool/start=drop');
    const failing = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('during:recovery=drop')) });
    // the new incarnation is dropped before any of its recovery is committed
    const { actor: droppedAgain } = await failing.hydrate(dropped.actorId);
    expect(droppedAgain.failed).toMatchObject({ code: 'actor.dropped' });
    const sup = rt.supervisor();
    const { actor, ended } = await hydrateAndFinish(sup, dropped.actorId);
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // the dropped recovery committed nothing
    expect(ofType(log, 'actor/rehydrated')).toHaveLength(1);
    expectClean(log);
  });
});

describe('stopping a host mid-turn', () => {
  it('leaves the open attempt for the next incarnation, which carries the turn on', async () => {
    const models = captureModels([{ content: 'slow answer', delay_ms: 2000 }]);
    const rt = await rts.open({ models });
    const first = rt.supervisor();
    const { actor: running } = await startTurn(first, 'answer slowly', turnRequest(world.ws));
    // wait until the request is on its way
    for (let i = 0; i < 200 && models.requests().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(models.requests()).toHaveLength(1);
    await first.stop('host test drained');
    await new Promise((r) => setTimeout(r, 100));
    const sup = rt.supervisor();
    const before = await readLog(sup, running.rootId, running.actorId);
    // nothing was closed: the attempt is still open in the log, and the stop said it let go
    expect(before.slice(-2).map((e) => e.type)).toEqual(['attempt/start', 'actor/released']);
    expect(before.at(-1)!.data).toEqual({ reason: 'host test drained' });
    const { actor, ended } = await hydrateAndFinish(sup, running.actorId);
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'slow answer' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/end').map((e) => e.data.outcome)).toEqual(['interrupted', 'succeeded']);
    // a clean stop is no kill
    expect(ofType(log, 'actor/killed')).toEqual([]);
    expectClean(log);
    expect(actor.projection).toEqual(replay(actor.actorId, log));
  });
});
