import { appendFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { defaultTooling, staticPolicy, type ToolingPorts } from '../../src/actors/agent/tooling.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { shapeObservation } from '../../src/tools/observation.js';
import { createRedactor } from '../../src/tools/redact.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, ofType, only, startTurn } from './harness.js';

let ws: string;
let rt: TestRuntime | null = null;

const world = actorTestWorld();
beforeEach(async () => {
  ws = await tempDir('ws');
  intervals.length = 0;
});
afterEach(async () => {
  await world.rts.closeAll();
  rt = null;
  await rm(ws, { recursive: true, force: true });
});

/** When each run of `slow` began and ended, by label. */
const intervals: Array<{ label: string; start: number; end: number }> = [];

/** A tool that takes 150 ms on a path, reading or writing it as asked. */
const slowTool: ToolDefinition<{ label: string; path: string; mode: 'read' | 'write' }> = {
  name: 'slow',
  version: '1',
  description: 'Take a while on a path',
  input: z.strictObject({ label: z.string(), path: z.string(), mode: z.enum(['read', 'write']) }),
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: (input, { workspace }) => [{ key: `path:${join(workspace, input.path)}`, mode: input.mode }],
  async execute(input) {
    const start = performance.now();
    await new Promise((r) => setTimeout(r, 150));
    intervals.push({ label: input.label, start, end: performance.now() });
    return { ok: true, output: `${input.label} done` };
  },
};

/** An idempotent effect: appends `key line` to effects.log, keyed by the call's idempotency key. */
const keyedTool: ToolDefinition<{ line: string }> = {
  name: 'keyed_append',
  version: '1',
  description: 'Append a line once per key',
  input: z.strictObject({ line: z.string() }),
  level: 'read',
  executionSemantics: (input) => ({ effects: 'possible', recovery: { kind: 'idempotent', key: input.line } }),
  resources: () => [],
  async execute(input, ctx) {
    await appendFile(join(ctx.workspace, 'effects.log'), `${ctx.idempotencyKey} ${input.line}\n`);
    return { ok: true, output: 'appended' };
  },
};

const SECRET = 'sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2m3N4';
const CONFIGURED = 'hunter2-but-longer-value';

/** Prints what it is given (repeated), or, for `leak`, secrets the model never saw. */
const echoTool: ToolDefinition<{ text?: string; repeat?: number }> = {
  name: 'emit',
  version: '1',
  description: 'Print text',
  input: z.strictObject({ text: z.string().optional(), repeat: z.number().int().optional() }),
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  async execute(input) {
    const line = input.text === 'leak' ? `key=${SECRET} pass ${CONFIGURED}\n` : (input.text ?? 'x');
    return { ok: true, output: Buffer.from(line.repeat(input.repeat ?? 1)) };
  },
};

async function open(script: ScriptResponse[], tooling: Partial<ToolingPorts> = {}, faults = '') {
  rt = await world.rts.open({ script, tools: [slowTool, keyedTool, echoTool] });
  return rt.supervisor({ extra: { tooling: defaultTooling(tooling) }, faults: createFaultInjector(parseFaultSpecs(faults)) });
}

const slow = (label: string, path: string, mode: 'read' | 'write') => ({ name: 'slow', arguments: { label, path, mode } });
const overlaps = (a: string, b: string) => {
  const x = intervals.find((i) => i.label === a)!;
  const y = intervals.find((i) => i.label === b)!;
  return x.start < y.end && y.start < x.end;
};

describe('parallel calls', () => {
  it('runs reads together, serializes writes to one path in model order, and answers in call order', async () => {
    const sup = await open([
      { tool_calls: [slow('w1', 'a.txt', 'write'), slow('r1', 'b.txt', 'read'), slow('w2', 'a.txt', 'write'), slow('r2', 'b.txt', 'read')] },
      { content: 'done' },
    ]);
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws));
    await ended;
    expect(overlaps('r1', 'r2')).toBe(true);
    expect(overlaps('w1', 'r1')).toBe(true);
    expect(overlaps('w1', 'w2')).toBe(false);
    const w1 = intervals.find((i) => i.label === 'w1')!;
    const w2 = intervals.find((i) => i.label === 'w2')!;
    expect(w1.end).toBeLessThanOrEqual(w2.start);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // all four intents can be in the log before any result: the first three start at once
    const firstResult = log.findIndex((e) => e.type === 'tool/result');
    expect(log.slice(0, firstResult).filter((e) => e.type === 'tool/start')).toHaveLength(3);
    // the model reads the results in call order, whatever order they ended in
    const history = actor.projection.history.filter((h) => h.role === 'tool').map((h) => h.content);
    expect(history).toEqual(['w1 done', 'r1 done', 'w2 done', 'r2 done']);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('bounds how many calls run at once', async () => {
    const calls = Array.from({ length: 6 }, (_, i) => slow(`r${i}`, `f${i}.txt`, 'read'));
    const sup = await open([{ tool_calls: calls }, { content: 'done' }], { maxParallelCalls: 2 });
    const { ended } = await startTurn(sup, 'go', turnRequest(ws));
    await ended;
    // calls running at the moment each one starts (not intervals overlapping each one: under load a
    // late timer stretches one call across two others that ran one after the other)
    const most = Math.max(...intervals.map((a) => intervals.filter((b) => b.start <= a.start && a.start < b.end).length));
    expect(most).toBe(2);
  });
});

describe('recovery by semantics', () => {
  it('runs an idempotent call again with the same key, once, after a crash after tool/start', async () => {
    const sup = await open([{ tool_calls: [{ name: 'keyed_append', arguments: { line: 'one' } }] }, { content: 'done' }], {}, 'before:tool/result=drop');
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws));
    await expect(ended).rejects.toThrow();
    const next = rt!.supervisor({ extra: { tooling: defaultTooling() } });
    let resumed!: Promise<unknown>;
    await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
    await expect(resumed).resolves.toMatchObject({ outcome: 'completed' });
    const lines = (await readFile(join(ws, 'effects.log'), 'utf8')).trim().split('\n');
    // the first run happened before the drop; the rerun carries the very same key
    expect(lines).toHaveLength(2);
    expect(new Set(lines.map((l) => l.split(' ')[0])).size).toBe(1);
    const log = await readLog(next, actor.rootId, actor.actorId);
    const starts = ofType(log, 'tool/start');
    expect(starts.map((s) => s.data.rerun)).toEqual([false, true]);
    expect(starts[0]!.data.idempotencyKey).toBe(starts[1]!.data.idempotencyKey);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('observations', () => {
  it('stores output over the budget as an artifact, shows a preview, and artifact_read reads it back', async () => {
    const big = 'line of output\n'.repeat(5_000); // 75 KB
    // the ID is derived from the content, so the script can name it in advance
    const id = shapeObservation(big, { budgetBytes: 16 * 1024, redactor: createRedactor([]) }).artifact!.id;
    const sup = await open([
      { tool_calls: [{ name: 'emit', arguments: { text: 'line of output\n', repeat: 5_000 } }] },
      { tool_calls: [{ name: 'artifact_read', arguments: { id, offset: 4_999, limit: 5 } }] },
      { content: 'done' },
    ]);
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws));
    await ended;
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const first = ofType(log, 'tool/result')[0]!;
    expect(first.data.artifact).toMatchObject({ bytes: Buffer.byteLength(big), binary: false });
    expect(Buffer.byteLength(first.data.output)).toBeLessThan(17 * 1024);
    expect(first.data.output).toContain(first.data.artifact!.id);
    expect(await rt!.blobs.getText(first.data.artifact!.digest)).toBe(big);
    expect(actor.projection.artifacts![id]).toBe(first.data.artifact!.digest);
    const page = ofType(log, 'tool/result')[1]!;
    expect(page.data.ok).toBe(true);
    expect(page.data.output).toMatch(/lines 4999-5000 of 5,000/);
    // every commit stays far below max_payload
    for (const commit of rt!.commits.get(actor.actorId)!) expect(Buffer.byteLength(JSON.stringify(commit))).toBeLessThan(64 * 1024);
  });

  it('redacts secrets from tool output before the log and the model see it, and marks it untrusted', async () => {
    const sup = await open([{ tool_calls: [{ name: 'emit', arguments: { text: 'leak' } }] }, { content: 'done' }], {
      redactor: createRedactor([CONFIGURED]),
    });
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws));
    await ended;
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const raw = JSON.stringify(log);
    expect(raw).not.toContain(SECRET);
    expect(raw).not.toContain(CONFIGURED);
    expect(JSON.stringify(actor.projection.history)).not.toContain(SECRET);
    const result = only(log, 'tool/result');
    expect(result.data).toMatchObject({ source: 'tool:emit', trust: 'untrusted', redactions: 2 });
    expect(result.data.output).toContain('[REDACTED:');
  });

  it('a rule on untrusted context asks for an effectful call once tool output is in the context', async () => {
    const sup = await open(
      [
        { tool_calls: [{ name: 'keyed_append', arguments: { line: 'before' } }] },
        { tool_calls: [{ name: 'keyed_append', arguments: { line: 'after' } }] },
        { content: 'done' },
      ],
      { policy: staticPolicy([{ untrusted_context: true, decision: 'ask', reason: 'tool output is in the context' }]) },
    );
    const { actor } = await startTurn(sup, 'go', turnRequest(ws));
    const [approvalId] = await actor.whenAwaitingApproval();
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const decided = ofType(log, 'policy/decided');
    expect(decided.map((d) => d.data.decision)).toEqual(['allow', 'ask']);
    expect(actor.projection.approvals![approvalId!]!.reason).toMatch(/tool output is in the context/);
    expect((await readFile(join(ws, 'effects.log'), 'utf8')).trim().split('\n')).toHaveLength(1);
  });
});


describe('shell through the pipeline', () => {
  const shell = (command: string): ScriptResponse => ({ tool_calls: [{ name: 'shell', arguments: { command } }] });
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', OPENAI_API_KEY: 'sk-test-not-for-children-0123456789' };

  it('runs sandboxed in full-auto: writes in the workspace, 50 MB of output becomes an artifact, secrets stay out', async () => {
    const bwrapPath = await findBubblewrap(env.PATH);
    expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
    const sup = await open(
      [shell('echo made > made.txt && head -c 50000000 /dev/zero | tr "\\0" a; echo "key=${OPENAI_API_KEY:-absent}" >&2'), { content: 'done' }],
      { bwrapPath, env },
    );
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws, { approvalMode: 'full-auto' }));
    await ended;
    expect(await readFile(join(ws, 'made.txt'), 'utf8')).toBe('made\n');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'policy/decided').data).toMatchObject({ decision: 'allow', rule: 'mode:full-auto' });
    const result = only(log, 'tool/result');
    expect(result.data.artifact?.bytes).toBeGreaterThan(4 * 1024 * 1024);
    expect(result.data.artifact?.bytes).toBeLessThan(5 * 1024 * 1024);
    expect(Buffer.byteLength(result.data.output)).toBeLessThan(17 * 1024);
    const full = await rt!.blobs.getText(result.data.artifact!.digest);
    expect(full).toContain('stdout truncated');
    expect(full).toContain('key=absent');
    for (const commit of rt!.commits.get(actor.actorId)!) expect(Buffer.byteLength(JSON.stringify(commit))).toBeLessThan(64 * 1024);
  });

  it.each([
    ['an unparseable command', 'echo "unterminated', /could not be parsed/],
    ['more than 16 chained commands', Array.from({ length: 17 }, () => 'true').join(' && '), /17 commands; at most 16/],
    ['a program only known at run time', 'CMD=rm; $CMD -rf x', /which program/],
  ])('denies %s with the reason, running nothing', async (_, command, why) => {
    const sup = await open([shell(command), { content: 'ok' }], { bwrapPath: await findBubblewrap(env.PATH), env });
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws, { approvalMode: 'full-auto' }));
    await ended;
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'policy/decided').data.decision).toBe('deny');
    expect(only(log, 'tool/denied').data.reason).toMatch(why);
    expect(ofType(log, 'tool/start')).toHaveLength(0);
  });

  it.each(['env X=1 git push', 'sh -c "git push"', "bash -lc 'git push origin main'", '/usr/bin/git push', '\\git push', 'true && git push'])(
    'a deny rule on "git push" sees through %s',
    async (command) => {
      const sup = await open([shell(command), { content: 'ok' }], {
        bwrapPath: await findBubblewrap(env.PATH),
        env,
        policy: staticPolicy([{ tool: 'shell', command: 'git push', decision: 'deny', reason: 'pushing is for people' }]),
      });
      const { actor, ended } = await startTurn(sup, 'go', turnRequest(ws, { approvalMode: 'full-auto' }));
      await ended;
      const log = await readLog(sup, actor.rootId, actor.actorId);
      expect(only(log, 'policy/decided').data).toMatchObject({ decision: 'deny', rule: 'config:1' });
      expect(ofType(log, 'tool/start')).toHaveLength(0);
    },
  );

  it('without bubblewrap, shell asks even in full-auto and says why', async () => {
    const sup = await open([shell('echo hi'), { content: 'ok' }], { bwrapPath: null, env });
    const { actor } = await startTurn(sup, 'go', turnRequest(ws, { approvalMode: 'full-auto' }));
    const [approvalId] = await actor.whenAwaitingApproval();
    expect(actor.projection.approvals![approvalId!]!.reason).toMatch(/bubblewrap is not installed/);
  });
});
