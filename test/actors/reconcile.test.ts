// Recovery by reconcile, in process on the in-memory ports and LMDB: a call with reconcile
// semantics is dropped after its tool/start (never ran) or before its result (ran), and the next
// incarnation asks its tool, commits the verdict as tool/reconciled, and settles the call by it.
import { appendFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { approvalMessage } from '../../src/client/messages.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { ReconcileContext, ReconcileVerdict, ToolDefinition } from '../../src/tools/tool.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, ofType, only, replay, startTurn } from './harness.js';

let ws: string;
let rt: TestRuntime | null = null;

const world = actorTestWorld();
beforeEach(async () => {
  ws = await tempDir('ws-reconcile');
  asked = [];
  answer = null;
});
afterEach(async () => {
  await world.rts.closeAll();
  rt = null;
  await rm(ws, { recursive: true, force: true });
});

/** Every reconcile the tool was asked, with what it was given. */
let asked: Array<{ input: { line: string }; ctx: ReconcileContext }> = [];
/** Overrides the honest answer (below) when set. */
let answer: ((input: { line: string }, ctx: ReconcileContext) => Promise<ReconcileVerdict>) | null = null;

/**
 * An effectful tool that appends `<line> <callId>` to effects.log, and reconciles honestly by
 * looking for that line: its call ID makes it the call's own.
 */
const appendLine: ToolDefinition<{ line: string }> = {
  name: 'append_line',
  version: '1',
  description: 'Append a line to effects.log',
  input: z.strictObject({ line: z.string() }),
  level: 'write',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'reconcile' } }),
  resources: (_input, { workspace }) => [{ key: `path:${workspace}/effects.log`, mode: 'write' }],
  timeoutMs: 2_000,
  async execute(input, ctx) {
    await appendFile(join(ctx.workspace, 'effects.log'), `${input.line} ${ctx.callId}\n`);
    return { ok: true, output: `appended ${input.line}` };
  },
  async reconcile(input, ctx) {
    asked.push({ input, ctx });
    if (answer) return answer(input, ctx);
    const lines = await effects();
    return lines.includes(`${input.line} ${ctx.callId}`) ? { status: 'applied', output: `appended ${input.line}` } : { status: 'not_applied' };
  },
};

const SCRIPT: ScriptResponse[] = [
  { tool_calls: [{ id: 'a1', name: 'append_line', arguments: { line: 'one' } }] },
  { content: 'appended one' },
];

const effects = async (): Promise<string[]> => (await readFile(join(ws, 'effects.log'), 'utf8').catch(() => '')).split('\n').filter(Boolean);

/** Runs the script until the drop at `spec`; the drop leaves its point in the runtime's fault records. */
async function dropAt(spec: string): Promise<AgentActor> {
  rt = await world.rts.open({ script: SCRIPT, tools: [appendLine] });
  const sup = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs(spec), undefined, rt.faultRecords) });
  const { actor, ended } = await startTurn(sup, 'append one', turnRequest(ws));
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  return actor;
}

/** Rehydrates on a new supervisor; `ended` resolves when the open turn ends. */
async function rehydrate(actorId: string): Promise<{ sup: Supervisor; actor: AgentActor; ended: Promise<TurnEnded> }> {
  const sup = rt!.supervisor();
  let ended!: Promise<TurnEnded>;
  const { actor, recovered } = await sup.hydrate(actorId, (a) => {
    ended = a.whenTurnEnds();
  });
  expect(recovered).toBe(true);
  return { sup, actor, ended };
}

function expectClean(log: ActorEvent[], actor: AgentActor): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
  expect(actor.projection).toEqual(replay(actor.actorId, log));
}

/** Types of the recovery's events, from its actor/killed on. */
const fromKill = (log: ActorEvent[]): string[] => log.slice(log.findIndex((e) => e.type === 'actor/killed')).map((e) => e.type);

describe('reconcile recovery', () => {
  it('applied: the call ran before the drop; its result is recorded from the verdict and it never runs again', async () => {
    const dropped = await dropAt('before:tool/result=drop');
    expect(await effects()).toHaveLength(1);
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'appended one' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(fromKill(log).slice(0, 6)).toEqual([
      'actor/killed', 'actor/rehydrated', 'recovery/started', 'tool/reconciled', 'tool/result', 'recovery/continuation',
    ]);
    const start = only(log, 'tool/start');
    expect(only(log, 'tool/reconciled')).toMatchObject({ call: start.call, data: { verdict: 'applied', reason: null, output: 'appended one' } });
    expect(only(log, 'tool/result').data).toMatchObject({ ok: true, output: 'appended one', source: 'tool:append_line' });
    expect(only(log, 'recovery/continuation').data.closed).toEqual([expect.stringMatching(/reconciled: it had taken effect/)]);
    // the tool was asked with the call's identity, key and the recovering epoch as fencing token
    expect(asked).toHaveLength(1);
    expect(asked[0]!.ctx).toMatchObject({ callId: start.call, idempotencyKey: start.data.idempotencyKey, epoch: 2, workspace: ws });
    expect(await effects()).toEqual([`one ${start.call}`]);
    expect(only(log, 'actor/killed').data).toEqual({ point: 'before:tool/result', detectedBy: 'fault record (drop)', epoch: 1, lastSeq: dropped.projection.seq });
    expectClean(log, actor);
  });

  it('not applied: the call never ran; it runs again once, with its key, marked a rerun', async () => {
    const dropped = await dropAt('after:tool/start=drop');
    expect(await effects()).toEqual([]);
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(fromKill(log).slice(0, 7)).toEqual([
      'actor/killed', 'actor/rehydrated', 'recovery/started', 'tool/reconciled', 'tool/start', 'recovery/continuation', 'tool/result',
    ]);
    expect(only(log, 'tool/reconciled').data).toMatchObject({ verdict: 'not_applied', output: null });
    const starts = ofType(log, 'tool/start');
    expect(starts.map((s) => s.data.rerun)).toEqual([false, true]);
    expect(starts[1]!.data.idempotencyKey).toBe(starts[0]!.data.idempotencyKey);
    expect(only(log, 'recovery/continuation').data.closed).toEqual([expect.stringMatching(/run again: reconcile found it not applied/)]);
    // one line: the rerun's
    expect(await effects()).toEqual([`one ${starts[0]!.call}`]);
    // a rerun is not a second call against the budget
    expect(only(log, 'turn/end').data).toMatchObject({ toolCalls: 1 });
    expectClean(log, actor);
  });

  it('unknown: a person is asked with the tool\'s reason, and the call ends outcome_unknown saying it', async () => {
    const dropped = await dropAt('before:tool/result=drop');
    answer = async () => ({ status: 'unknown', reason: 'effects.log was rotated' });
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    const [approvalId] = await actor.whenAwaitingApproval();
    const approval = actor.projection.approvals![approvalId!]!;
    expect(approval).toMatchObject({ rule: 'recovery:outcome-unknown', reason: expect.stringContaining('could not tell whether it took effect (effects.log was rotated)') });
    await sup.send(approvalMessage(actor.actorId, approvalId!, approval.planDigest, { decision: 'approve', always: false }));
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'tool/reconciled').data).toMatchObject({ verdict: 'unknown', reason: 'effects.log was rotated' });
    expect(only(log, 'tool/outcome_unknown').data.reason).toMatch(/reconcile could not tell: effects.log was rotated; a person checked/);
    expect(ofType(log, 'tool/result')).toEqual([]);
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(await effects()).toHaveLength(1);
    expectClean(log, actor);
  });

  it('a reconcile that throws is unknown with its error; a person denying ends the call outcome_unknown', async () => {
    const dropped = await dropAt('after:tool/start=drop');
    answer = async () => {
      throw new Error('disk on fire');
    };
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    const [approvalId] = await actor.whenAwaitingApproval();
    const planDigest = actor.projection.approvals![approvalId!]!.planDigest;
    await sup.send(approvalMessage(actor.actorId, approvalId!, planDigest, { decision: 'deny', reason: 'it did not run' }));
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'tool/reconciled').data).toMatchObject({ verdict: 'unknown', reason: "append_line's reconcile failed: disk on fire" });
    expect(only(log, 'tool/outcome_unknown').data.reason).toMatch(/disk on fire; denied by a person: it did not run/);
    // unknown never runs the call again
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(await effects()).toEqual([]);
    expectClean(log, actor);
  });

  it('a reconcile that gives no answer in time is unknown, saying so', async () => {
    const dropped = await dropAt('after:tool/start=drop');
    answer = () => new Promise(() => {});
    const { actor } = await rehydrate(dropped.actorId);
    await actor.whenAwaitingApproval();
    const log = await readLog(rt!.supervisor(), actor.rootId, actor.actorId);
    expect(only(log, 'tool/reconciled').data).toMatchObject({ verdict: 'unknown', reason: "append_line's reconcile gave no answer within 2000 ms" });
  });

  it('resumed by a runtime without the tool: unknown (nobody to ask), and a person is still asked', async () => {
    const dropped = await dropAt('before:tool/result=drop');
    const other = await world.rts.open({ script: SCRIPT });
    try {
      const sup = other.supervisor();
      let ended!: Promise<TurnEnded>;
      const { actor } = await sup.hydrate(dropped.actorId, (a) => (ended = a.whenTurnEnds()));
      const [approvalId] = await actor.whenAwaitingApproval();
      const approval = actor.projection.approvals![approvalId!]!;
      expect(approval).toMatchObject({ tool: 'append_line', toolVersion: 'unresolved', rule: 'recovery:outcome-unknown' });
      await sup.send(approvalMessage(actor.actorId, approvalId!, approval.planDigest, { decision: 'approve', always: false }));
      expect(await ended).toMatchObject({ outcome: 'completed' });
      const log = await readLog(sup, actor.rootId, actor.actorId);
      expect(only(log, 'tool/reconciled').data).toMatchObject({ verdict: 'unknown', reason: expect.stringMatching(/no longer resolves: unknown tool "append_line"/) });
      expect(only(log, 'tool/outcome_unknown').data.reason).toMatch(/a person checked/);
      expect(asked).toEqual([]);
      expectClean(log, actor);
    } finally {
      await other.close();
    }
  });

  it('a crash while the tool is asked commits nothing of that recovery: the next one asks again, and the log holds it once', async () => {
    const dropped = await dropAt('after:tool/start=drop');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reached!: () => void;
    const inReconcile = new Promise<void>((r) => (reached = r));
    answer = async () => {
      reached();
      await held;
      return { status: 'not_applied' };
    };
    // the first recovery dies while its tool looks
    const first = rt!.supervisor();
    const { actor: dying } = await first.hydrate(dropped.actorId);
    await inReconcile;
    first.evict(dropped.actorId, new Error('killed while reconciling'));
    release();
    await new Promise((r) => setTimeout(r, 100));
    expect((await readLog(first, dying.rootId, dying.actorId)).length).toBe(dropped.projection.seq);
    // the next one asks again and settles the call
    answer = null;
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    expect(await ended).toMatchObject({ outcome: 'completed' });
    expect(asked).toHaveLength(2);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    for (const type of ['actor/killed', 'actor/rehydrated', 'recovery/started', 'tool/reconciled', 'recovery/continuation'] as const) {
      expect(ofType(log, type), type).toHaveLength(1);
    }
    expect(ofType(log, 'tool/start').map((s) => s.data.rerun)).toEqual([false, true]);
    expect(await effects()).toHaveLength(1);
    expectClean(log, actor);
  });
});

describe('write_file reconcile through recovery', () => {
  const writeScript = (content: string): ScriptResponse[] => [
    { tool_calls: [{ id: 'w1', name: 'write_file', arguments: { path: 'src/a.txt', content } }] },
    { content: 'written' },
  ];

  it.each([
    ['after:tool/start=drop', 'not_applied', 2],
    ['before:tool/result=drop', 'applied', 1],
  ] as const)('a drop at %s: %s, the file written once', async (spec, verdict, starts) => {
    await mkdir(join(ws, 'src'), { recursive: true });
    await writeFile(join(ws, 'src', 'a.txt'), 'old\n');
    rt = await world.rts.open({ script: writeScript('new\n') });
    const sup1 = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs(spec), undefined, rt.faultRecords) });
    const { actor: dropped, ended: dead } = await startTurn(sup1, 'write it', turnRequest(ws));
    await expect(dead).rejects.toMatchObject({ code: 'actor.dropped' });
    const { sup, actor, ended } = await rehydrate(dropped.actorId);
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'tool/reconciled').data.verdict).toBe(verdict);
    expect(ofType(log, 'tool/start')).toHaveLength(starts);
    // the first start recorded the file as it was: the identity reconcile compared with
    expect(ofType(log, 'tool/start')[0]!.data.preimage).toMatchObject({ exists: true, path: join(ws, 'src', 'a.txt'), size: '4' });
    expect(only(log, 'tool/result').data).toMatchObject({ ok: true, output: 'wrote 4 bytes to src/a.txt' });
    expect(await readFile(join(ws, 'src', 'a.txt'), 'utf8')).toBe('new\n');
    expectClean(log, actor);
  });
});
