import { mkdir, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ToolDefinition } from '../../src/tools/tool.js';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import type { ModelAdapter, PreparedRequest } from '../../src/model/model-port.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { createScriptedModel, ScriptedModelError } from '../../src/model/scripted-model.js';
import type { ActorEvent, TurnRequest } from '../../src/protocol/events.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest as baseRequest, type TestRuntime } from '../helpers/runtime.js';
import { fakeContext, openTurnAndStep } from './fake-effect-context.js';
import { MAX_REQUEST_REVISIONS, maybeCompact } from '../../src/actors/effects/compaction.js';
import { compactionState } from '../../src/store/compaction-projection.js';
import { activeStates } from '../../src/server/machine-states.js';
import { captureModels, message, ofType, only, replay, startTurn, actorTestWorld, waitForLog } from './harness.js';

// Compaction (design §10) on the real actor over in-memory ports: a turn whose tool results do
// not fit its window compacts closed steps into checkpoints that keep the task, the user's
// corrections, the files changed, the plan and the calls whose outcome is unknown, and goes on.

const world = actorTestWorld();
const rts = world.rts;
const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

const TASK = 'Find why the parser drops the last token in src/parse.txt and write your findings to notes.md';

/** A workspace with `n` files of 4 KB each (`f0.txt` …), distinct so no two results are equal. */
async function workspace(n: number): Promise<string> {
  const ws = await tempDir('compaction-ws');
  dirs.push(ws);
  await mkdir(join(ws, 'src'), { recursive: true });
  for (let i = 0; i < n; i++) await writeFile(join(ws, `f${i}.txt`), `file ${i}: ${'lorem ipsum dolor sit amet '.repeat(150)}`.slice(0, 4096));
  await writeFile(join(ws, 'src', 'parse.txt'), 'tokens: a b c\n');
  return ws;
}

const read = (i: number): ScriptResponse => ({ tool_calls: [{ id: `c_read_${i}`, name: 'read_file', arguments: { path: `f${i}.txt` } }] });
const plan: ScriptResponse = { tool_calls: [{ id: 'c_plan', name: 'update_plan', arguments: { items: [{ content: 'read every file', status: 'in_progress' }, { content: 'write notes.md', status: 'pending' }] } }] };
const writeNotes: ScriptResponse = { tool_calls: [{ id: 'c_write', name: 'write_file', arguments: { path: 'notes.md', content: 'the last token is dropped by the loop bound\n' } }] };

function request(ws: string, over: Partial<TurnRequest> = {}): TurnRequest {
  return baseRequest(ws, { tools: ['read_file', 'write_file', 'update_plan'], maxSteps: 400, context: { window: 8_000 }, ...over });
}

function expectClean(log: ActorEvent[]): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
}

/**
 * A scripted model over `script` whose compaction summaries first pass `before` (which may wait
 * or throw); the step's own requests go through as they are.
 */
function summariesThrough(script: ScriptResponse[], before: () => Promise<void>) {
  return async (_s: unknown, cursor: number): Promise<ModelAdapter> => {
    const m = createScriptedModel({ responses: script, cursor });
    return {
      ...m,
      prepare: (r) => m.prepare(r),
      async *stream(prepared, signal) {
        if (prepared.request.purpose) await before();
        yield* m.stream(prepared, signal);
      },
    };
  };
}

/** The model-visible text of a prepared request (its messages and instructions). */
function textOf(r: PreparedRequest): string {
  return r.body;
}

describe('compaction', () => {
  it('a turn of 30 × 4 KB tool results in an 8,000-token window completes with checkpoints that keep the task, the plan and the files', async () => {
    const ws = await workspace(30);
    const script = [plan, ...Array.from({ length: 30 }, (_, i) => read(i)), writeNotes, { content: 'The loop bound skips the last token; notes.md says so.' }];
    const models = captureModels(script);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws));
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expectClean(log);
    const checkpoints = ofType(log, 'checkpoint/committed');
    expect(checkpoints.length).toBeGreaterThanOrEqual(1);
    // every request the step sent fit the window it was assembled for
    for (const p of ofType(log, 'request/prepared')) {
      const b = p.data.budget!;
      expect(b.tokens + b.reserve, `request at seq ${p.seq}`).toBeLessThanOrEqual(8_000);
    }
    // every compaction's summary was its own attempt, not a script response
    const compactions = ofType(log, 'attempt/start').filter((e) => e.data.kind === 'compaction');
    expect(compactions.length).toBeGreaterThanOrEqual(checkpoints.length);
    for (const c of checkpoints) {
      expect(c.data.tokensAfter).toBeLessThan(c.data.tokensBefore);
      expect(c.data.kept).toEqual(expect.arrayContaining(['task', 'plan', 'permissions']));
    }
    // every request after the first checkpoint holds the task's words and the plan
    const first = log.indexOf(checkpoints[0]!);
    const later = models.requests().filter((r) => r.request.purpose === undefined).slice(-1 * ofType(log.slice(first), 'attempt/start').filter((e) => e.data.kind !== 'compaction').length);
    expect(later.length).toBeGreaterThan(0);
    for (const r of later) {
      expect(textOf(r)).toContain(TASK);
      expect(textOf(r)).toContain('read every file');
    }
    // each request after a checkpoint records it as a contribution of its own, apart from the history
    const after = ofType(log.slice(first), 'request/prepared');
    expect(after.every((r) => r.data.contributions!.some((c) => c.source === 'checkpoint' && c.scope.startsWith('ckpt_')))).toBe(true);
    // the full log is untouched: each tool result is still in it
    expect(ofType(log, 'tool/result')).toHaveLength(32);
    // the projection's history starts with the task, then the newest checkpoint
    const p = replay(actor.actorId, log);
    expect(p.history[0]).toMatchObject({ role: 'user', content: TASK });
    expect(p.history[1]!.role === 'user' && p.history[1]!.content).toMatch(/^Checkpoint: /);
  });

  it('a step whose fixed instructions alone exceed the window ends context_cannot_fit, saying so', async () => {
    const ws = await workspace(0);
    const rt = await rts.open({ script: [{ content: 'never asked' }] });
    const sup = rt.supervisor();
    const { ended } = await startTurn(sup, TASK, request(ws, { instructions: 'Follow the house rules. '.repeat(2_000) }));
    const end = await ended;
    expect(end.outcome).toBe('failed');
    expect(end.reason).toMatch(/^context_cannot_fit: the instructions, docs, tool schemas and this step's messages alone need \d+ tokens/);
  });

  it('a task that alone does not fit ends context_cannot_fit: nothing closed is left to compact', async () => {
    const ws = await workspace(0);
    const rt = await rts.open({ script: [{ content: 'never asked' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, `${TASK}\n${'context '.repeat(6_000)}`, request(ws));
    const end = await ended;
    expect(end.outcome).toBe('failed');
    expect(end.reason).toMatch(/^context_cannot_fit: nothing closed is left to compact/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'compaction/rejected').data).toMatchObject({ reason: 'nothing_to_compact', endsStep: true });
    expect(ofType(log, 'attempt/start')).toHaveLength(0);
    expectClean(log);
  });

  it('a checkpoint that saves less than compaction_min_gain_tokens is not committed: context_cannot_fit, no progress', async () => {
    const ws = await workspace(8);
    const rt = await rts.open({ script: Array.from({ length: 8 }, (_, i) => read(i)) });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws, { context: { window: 8_000, compactionMinGainTokens: 1_000_000 } }));
    const end = await ended;
    expect(end.outcome).toBe('failed');
    expect(end.reason).toMatch(/^context_cannot_fit: no progress: the checkpoint saves \d+ tokens of \d+, fewer than compaction_min_gain_tokens \(1000000\)/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'checkpoint/committed')).toHaveLength(0);
    expect(only(log, 'compaction/rejected').data.reason).toBe('no_gain');
    expectClean(log);
  });

  it('the provider refusing a request after the fact (context_overflow) compacts and sends it again', async () => {
    const ws = await workspace(4);
    const script: ScriptResponse[] = [read(0), read(1), read(2), { error: { type: 'context_overflow' } }, { content: 'done' }];
    const rt = await rts.open({ script });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws, { context: { window: 100_000, compactionKeepSteps: 1, compactionMinGainTokens: 100 } }));
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'done' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'compaction/started').data.trigger).toBe('overflow');
    expect(ofType(log, 'checkpoint/committed')).toHaveLength(1);
    expectClean(log);
  });

  it('a steer that arrives while the summary is made fails the CAS: a new range is taken, and the steer is kept', async () => {
    const ws = await workspace(12);
    const script = [...Array.from({ length: 12 }, (_, i) => read(i)), { content: 'done' }];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let held = 0;
    // the first summary waits until the test has steered
    const modelFor = summariesThrough(script, async () => {
      if (held++ === 0) await gate;
    });
    const rt = await rts.open({ modelFor });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws));
    await waitForLog(sup, actor, (log) => log.some((e) => e.type === 'attempt/start' && e.data.kind === 'compaction'));
    const steer = message(actor.actorId, 'ignore f5.txt, it is generated', { kind: 'steer', target: 'next_step', wakeup: true, from: 'client:test' });
    await sup.send(steer);
    await waitForLog(sup, actor, (log) => log.some((e) => e.type === 'inbox/received' && e.data.messageId === steer.id));
    open();
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const rejected = ofType(log, 'compaction/rejected');
    expect(rejected[0]!.data).toMatchObject({ reason: 'conflict', endsStep: false });
    const committed = ofType(log, 'checkpoint/committed');
    expect(committed.length).toBeGreaterThanOrEqual(1);
    // the conflicting candidate was never committed, and the next one keeps the steer
    expect(committed.map((c) => c.data.id)).not.toContain(rejected[0]!.data.checkpoint);
    expect(committed[0]!.data.text).toContain('User, later: ignore f5.txt, it is generated');
    // two checkpoints never replace the same history revision
    expect(new Set(committed.map((c) => c.data.historyRevision)).size).toBe(committed.length);
    expectClean(log);
  });
});

/** Runs a turn on a supervisor whose faults drop the actor at `spec`; resolves once it was dropped. */
async function runUntilDropped(rt: TestRuntime, spec: string, task: string, req: TurnRequest): Promise<AgentActor> {
  const sup = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs(spec), undefined, rt.faultRecords) });
  const { actor, ended } = await startTurn(sup, task, req);
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  return actor;
}

describe('compaction across a drop', () => {
  for (const point of ['after:compaction/started', 'before:checkpoint/committed'] as const) {
    it(`dropped at ${point}, the next incarnation commits exactly one checkpoint for the compaction and completes`, async () => {
      const ws = await workspace(10);
      const rt = await rts.open({ script: [...Array.from({ length: 10 }, (_, i) => read(i)), { content: 'done' }] });
      const dropped = await runUntilDropped(rt, `${point}=drop`, TASK, request(ws));
      const sup = rt.supervisor();
      const before = await readLog(sup, dropped.rootId, dropped.actorId);
      const started = ofType(before, 'compaction/started');
      expect(started).toHaveLength(1);
      expect(ofType(before, 'checkpoint/committed')).toHaveLength(0);
      // what the gateway says of the dropped actor's machines: its step is compacting
      expect(activeStates(replay(dropped.actorId, before)).step).toBe('compacting');
      let ended: Promise<TurnEnded> | null = null;
      const { actor, recovered } = await sup.hydrate(dropped.actorId, (a) => {
        ended = a.whenTurnEnds();
      });
      expect(recovered).toBe(true);
      expect(await ended!).toMatchObject({ outcome: 'completed', answer: 'done' });
      const log = await readLog(sup, actor.rootId, actor.actorId);
      expectClean(log);
      const committed = ofType(log, 'checkpoint/committed');
      expect(committed.filter((c) => c.data.id === started[0]!.data.checkpoint)).toHaveLength(1);
      const summaries = ofType(log, 'attempt/start').filter((e) => e.data.kind === 'compaction');
      if (point === 'before:checkpoint/committed') {
        // the summary that was back but not committed is an interrupted attempt; a new one replaced it
        const ends = ofType(log, 'attempt/end').filter((e) => e.attempt === summaries[0]!.attempt);
        expect(ends.map((e) => e.data.outcome)).toEqual(['interrupted']);
      }
      expect(summaries.length).toBeGreaterThanOrEqual(point === 'before:checkpoint/committed' ? 2 : 1);
    });
  }
});

describe('compaction retention', () => {
  it('a 300-step investigation compacted many times keeps every pinned fact in its final request: a correction, a changed file, a call whose outcome is unknown, the latest error, the plan and the task', async () => {
    const ws = await workspace(30);
    let release!: () => void;
    const gateOpen = new Promise<void>((r) => (release = r));
    const gate: ToolDefinition<{ text: string }> = {
      name: 'gate', version: '1', description: 'Waits for the test.', input: z.strictObject({ text: z.string() }), level: 'read',
      executionSemantics: () => ({ effects: 'none', retry: 'auto' }), resources: () => [],
      async execute() {
        await gateOpen;
        return { ok: true, output: 'open' };
      },
    };
    const patch = '--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+x\n';
    const script: ScriptResponse[] = [plan, read(0), { tool_calls: [{ id: 'c_gate', name: 'gate', arguments: { text: 'step 3' } }] }];
    for (let i = 4; i <= 300; i++) {
      if (i === 10) script.push(writeNotes);
      else if (i === 20) script.push({ tool_calls: [{ id: 'c_patch', name: 'apply_patch', arguments: { patch } }] });
      else if (i === 25) script.push({ tool_calls: [{ id: 'c_missing', name: 'read_file', arguments: { path: 'missing.txt' } }] });
      else script.push(read(i % 30));
    }
    script.push({ content: 'The loop bound skips the last token.' });
    const models = captureModels(script);
    const rt = await rts.open({ models, tools: [gate] });
    const tools = ['read_file', 'write_file', 'apply_patch', 'update_plan', 'gate'];
    // the 20th tool/start is apply_patch's, at step 20
    const sup1 = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:tool/start@20=drop'), undefined, rt.faultRecords) });
    const { actor: first, ended: firstEnded } = await startTurn(sup1, TASK, request(ws, { tools, maxSteps: 400 }));
    await waitForLog(sup1, first, (log) => log.some((e) => e.type === 'tool/start' && e.data.name === 'gate'));
    const correction = message(first.actorId, 'the bug is in the loop bound, not the tokenizer', { kind: 'steer', target: 'next_step', wakeup: true, from: 'client:test' });
    await sup1.send(correction);
    await waitForLog(sup1, first, (log) => log.some((e) => e.type === 'inbox/received' && e.data.messageId === correction.id));
    release();
    await expect(firstEnded).rejects.toMatchObject({ code: 'actor.dropped' });
    const sup = rt.supervisor();
    const dropped = await readLog(sup, first.rootId, first.actorId);
    expect(dropped.at(-1)).toMatchObject({ type: 'tool/start', data: { name: 'apply_patch' } });
    let ended: Promise<TurnEnded> | null = null;
    const { actor } = await sup.hydrate(first.actorId, (a) => {
      ended = a.whenTurnEnds();
    });
    expect(await ended!).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expectClean(log);
    const checkpoints = ofType(log, 'checkpoint/committed');
    expect(checkpoints.length).toBeGreaterThanOrEqual(5);
    const unknown = only(log, 'tool/outcome_unknown');
    const final = models.requests().filter((r) => r.request.purpose === undefined).at(-1)!;
    const facts = {
      task: `Task (the user's words): ${TASK}`,
      correction: 'User, later: the bug is in the loop bound, not the tokenizer',
      file: 'Changed: notes.md (sha256:',
      unknown: `Outcome unknown (may or may not have taken effect): apply_patch ${unknown.call}`,
      plan: 'Plan: [in_progress] read every file; [pending] write notes.md',
      error: 'Latest error: read_file call_',
    };
    const kept = Object.entries(facts).filter(([, line]) => final.body.includes(JSON.stringify(line).slice(1, -1)));
    expect(kept.map(([k]) => k)).toEqual(Object.keys(facts));
  }, 120_000);
});

describe('compaction that makes no progress', () => {
  it('a summary that is the one of the checkpoint at the head of its range is not committed: context_cannot_fit', async () => {
    const ws = await workspace(30);
    const script = [...Array.from({ length: 30 }, (_, i) => read(i)), { content: 'done' }];
    const same = 'The files hold filler text; nothing about the parser yet.';
    const rt = await rts.open({ models: captureModels(script, [same, same, same]) });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws));
    const end = await ended;
    expect(end.outcome).toBe('failed');
    expect(end.reason).toBe('context_cannot_fit: the summary is the one of the checkpoint already there: compacting again makes no progress');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'checkpoint/committed')).toHaveLength(1);
    expect(only(log, 'compaction/rejected').data).toMatchObject({ reason: 'unchanged', endsStep: true });
    expectClean(log);
  });

  it('a summary that streams past its cap is cut: the attempt fails output_too_large and the step ends context_cannot_fit', async () => {
    const ws = await workspace(10);
    const rt = await rts.open({ models: captureModels([...Array.from({ length: 10 }, (_, i) => read(i)), { content: 'done' }], ['words '.repeat(20_000)]) });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws));
    const end = await ended;
    expect(end.outcome).toBe('failed');
    expect(end.reason).toMatch(/^context_cannot_fit: the summary's model attempt failed: output_too_large: the summary ran past 65536 characters/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/end').at(-1)!.data).toMatchObject({ outcome: 'failed', error: { class: 'output_too_large' } });
    expectClean(log);
  });

  it('a step that already made its most checkpoints ends context_cannot_fit at the next overflow, starting no compaction', async () => {
    const ctx = fakeContext();
    openTurnAndStep(ctx);
    compactionState(ctx.projection).requestRevision = MAX_REQUEST_REVISIONS;
    const assembly = { request: {} as never, contributions: [{ source: 'history' as const, scope: '9 items', trust: 'system' as const, digest: 'sha256:h', tokens: 9_000 }], budget: { tokens: 9_000, window: 8_000, reserve: 1_000, estimated: true }, overflow: 'the request needs 9000 tokens' };
    expect(await maybeCompact(ctx, assembly)).toBe(true);
    expect(ctx.staged.map((e) => e.type)).toEqual(['compaction/rejected']);
    expect(ctx.staged[0]!.data).toMatchObject({ reason: 'revision_limit', endsStep: true, message: `this step compacted ${MAX_REQUEST_REVISIONS - 1} times and its request still does not fit (at most ${MAX_REQUEST_REVISIONS - 1} checkpoints a step)` });
  });
});

describe('a summary attempt that fails', () => {
  async function run(failures: number) {
    const ws = await workspace(10);
    const script = [...Array.from({ length: 10 }, (_, i) => read(i)), { content: 'done' }];
    let failed = 0;
    const modelFor = summariesThrough(script, async () => {
      if (failed < failures) {
        failed += 1;
        throw new ScriptedModelError('rate_limit', 'scripted rate limit of a summary', { retryable: true, retryAfterMs: 5 });
      }
    });
    const rt = await rts.open({ modelFor });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws, { maxAttempts: 3 }));
    const end = await ended;
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expectClean(log);
    const summaryIds = new Set(ofType(log, 'attempt/start').filter((e) => e.data.kind === 'compaction').map((e) => e.attempt));
    return { end, log, ends: ofType(log, 'attempt/end').filter((e) => summaryIds.has(e.attempt)) };
  }

  it('is asked again after its backoff when the error is retryable, and the checkpoint is committed', async () => {
    const { end, log, ends } = await run(2);
    expect(end.outcome).toBe('completed');
    expect(ends.slice(0, 3).map((e) => [e.data.outcome, e.data.backoffMs])).toEqual([['failed', 5], ['failed', 5], ['succeeded', null]]);
    expect(ofType(log, 'compaction/rejected')).toHaveLength(0);
  });

  it('ends the step context_cannot_fit once its attempts are used up', async () => {
    const { end, ends } = await run(3);
    expect(end.outcome).toBe('failed');
    expect(end.reason).toMatch(/^context_cannot_fit: the summary's model attempt failed: rate_limit: scripted rate limit of a summary/);
    expect(ends.map((e) => e.data.backoffMs)).toEqual([5, 5, null]);
  });
});

describe('the files a checkpoint names', () => {
  it('are hashed inside the workspace only: a link the agent made to a file outside is named without a digest', async () => {
    const ws = await workspace(10);
    const outside = await tempDir('compaction-outside');
    dirs.push(outside);
    await writeFile(join(outside, 'secret.txt'), 'not the workspace\'s');
    let release!: () => void;
    const gateOpen = new Promise<void>((r) => (release = r));
    let gated!: () => void;
    const atGate = new Promise<void>((r) => (gated = r));
    const gate: ToolDefinition<{ text: string }> = {
      name: 'gate', version: '1', description: 'Waits for the test.', input: z.strictObject({ text: z.string() }), level: 'read',
      executionSemantics: () => ({ effects: 'none', retry: 'auto' }), resources: () => [],
      async execute() {
        gated();
        await gateOpen;
        return { ok: true, output: 'open' };
      },
    };
    const script: ScriptResponse[] = [
      { tool_calls: [{ id: 'c_w', name: 'write_file', arguments: { path: 'inside.md', content: 'mine\n' } }] },
      { tool_calls: [{ id: 'c_gate', name: 'gate', arguments: { text: 'swap' } }] },
      ...Array.from({ length: 10 }, (_, i) => read(i)),
      { content: 'done' },
    ];
    const rt = await rts.open({ script, tools: [gate] });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, TASK, request(ws, { tools: ['read_file', 'write_file', 'gate'] }));
    // the file the agent wrote becomes a link out of the workspace before any compaction
    await atGate;
    await unlink(join(ws, 'inside.md'));
    await symlink(join(outside, 'secret.txt'), join(ws, 'inside.md'));
    release();
    expect(await ended).toMatchObject({ outcome: 'completed' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const committed = ofType(log, 'checkpoint/committed');
    expect(committed.length).toBeGreaterThanOrEqual(1);
    for (const c of committed) expect(c.data.files).toEqual([{ path: 'inside.md', digest: null }]);
    expectClean(log);
  });
});
