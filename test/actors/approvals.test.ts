import { appendFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { defaultTooling, type ToolingPorts } from '../../src/actors/agent/tooling.js';
import { verifyLog } from '../../src/verify/verify.js';
import { pendingApprovals } from '../../src/store/projection.js';
import { approvalMessage } from '../../src/client/messages.js';
import { CLIENT_SENDER } from '../../src/actors/effects/tool-policy.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { PolicyRule } from '../../src/protocol/policy-rule.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, message, ofType, only, startTurn } from './harness.js';

let ws: string;
let rt: TestRuntime | null = null;

const world = actorTestWorld();
beforeEach(async () => {
  ws = await tempDir('ws');
});
afterEach(async () => {
  await world.rts.closeAll();
  rt = null;
  await rm(ws, { recursive: true, force: true });
});

/** A plan that a test can change under an approval: its `target` is read when the call is planned. */
let planTarget = 'a';
let toolVersion = '1';
let scopeFile = 'effects.log';

/** An effectful tool that appends one line per run to `effects.log`: what ran, and how often. */
const appendTool: ToolDefinition<{ line: string }> = {
  name: 'append',
  get version() {
    return toolVersion;
  },
  description: 'Append a line to effects.log',
  input: z.strictObject({ line: z.string() }),
  level: 'write',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (_input, { workspace }) => [{ key: `path:${workspace}/${scopeFile}`, mode: 'write' }],
  plan: (input) => ({ tool: 'append', version: toolVersion, paths: [{ path: 'effects.log', mode: 'write' }], network: false, input, command: planTarget }),
  async execute(input, ctx) {
    await appendFile(join(ctx.workspace, 'effects.log'), `${input.line}\n`);
    return { ok: true, output: `appended ${input.line}` };
  },
};

const append = (line: string): ScriptResponse => ({ tool_calls: [{ name: 'append', arguments: { line } }] });

async function open(script: ScriptResponse[], tooling: Partial<ToolingPorts> = {}, faults = '') {
  rt = await world.rts.open({ script, tools: [appendTool] });
  return rt.supervisor({ extra: { tooling: defaultTooling(tooling) }, faults: createFaultInjector(parseFaultSpecs(faults)) });
}

const effects = async () => (await readFile(join(ws, 'effects.log'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
const ask = () => turnRequest(ws, { approvalMode: 'ask' });

describe('approvals', () => {
  beforeEach(() => {
    planTarget = 'a';
    toolVersion = '1';
    scopeFile = 'effects.log';
  });

  it('asks for an effectful call, binds the request to the plan, and runs it once approved by a client', async () => {
    const sup = await open([append('one'), { content: 'appended' }]);
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    expect(await effects()).toEqual([]);
    const record = actor.projection.approvals![approvalId!]!;
    expect(record).toMatchObject({ tool: 'append', toolVersion: '1', state: 'pending', rule: 'default:write' });
    expect(record.planDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(record.expiresAt).toBeGreaterThan(Date.now() + 23 * 3600 * 1000);

    await sup.send(approvalMessage(actor.actorId, approvalId!, record.planDigest, { decision: 'approve', always: false }));
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'appended' });
    expect(await effects()).toEqual(['one']);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const decided = ofType(log, 'policy/decided').map((e) => [e.data.decision, e.data.rule]);
    expect(decided).toEqual([['ask', 'default:write'], ['allow', `approval:${approvalId}`]]);
    const requested = only(log, 'approval/requested');
    expect(requested.data).toMatchObject({ approvalId, tool: 'append', toolVersion: '1', scope: [{ key: `path:${ws}/effects.log`, mode: 'write' }] });
    expect(requested.data.plan).toMatchObject({ paths: [{ path: 'effects.log', mode: 'write' }] });
    expect(only(log, 'approval/granted').data).toMatchObject({ approvalId, by: 'client:cli' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it("denies with the person's reason; the model sees it and nothing runs", async () => {
    const sup = await open([append('one'), { content: 'ok, not appending' }]);
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    const digest = actor.projection.approvals![approvalId!]!.planDigest;
    await sup.send(approvalMessage(actor.actorId, approvalId!, digest, { decision: 'deny', reason: 'not today' }));
    expect(await ended).toMatchObject({ outcome: 'completed' });
    expect(await effects()).toEqual([]);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'tool/denied').data.reason).toBe('denied by a person: not today');
    expect(ofType(log, 'tool/start')).toHaveLength(0);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('refuses an answer that does not come from a client command, and keeps waiting', async () => {
    const sup = await open([append('one'), { content: 'done' }]);
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    const digest = actor.projection.approvals![approvalId!]!.planDigest;
    // what a host (an agent's runtime) may publish: the actors' channel, whatever `from` claims
    const forged = approvalMessage(actor.actorId, approvalId!, digest, { decision: 'approve', always: false });
    await rt!.ports.inbox.publish(forged, 'actor');
    await waitFor(() => actor.projection.inbox[forged.id]?.state === 'cancelled');
    expect(actor.projection.approvals![approvalId!]!.state).toBe('pending');
    expect(await effects()).toEqual([]);
    // the real answer still works
    await sup.send(approvalMessage(actor.actorId, approvalId!, digest, { decision: 'approve', always: false }));
    await ended;
    expect(await effects()).toEqual(['one']);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'inbox/cancelled').data).toMatchObject({ kind: 'approval_response', from: 'client:cli', reason: expect.stringMatching(/a person's to send; it came in on the actors' channel/) });
    // the same answer written by hand into an actor's log (a projection fed `from` as sent) is still checked
    expect(CLIENT_SENDER.test('agt_01J0000000000000000000000')).toBe(false);
  });

  it('refuses an answer for another plan, and an approval replayed on a second call', async () => {
    const sup = await open([{ tool_calls: [{ name: 'append', arguments: { line: 'one' } }, { name: 'append', arguments: { line: 'two' } }] }, { content: 'done' }]);
    const { actor, ended } = await startTurn(sup, 'append both', ask());
    const first = await actor.whenAwaitingApproval();
    // the two calls write one file: the second waits for the first, but both ask up front
    expect(first).toHaveLength(2);
    const [a1, a2] = first.map((id) => ({ id, ...actor.projection.approvals![id]! }));
    // an answer naming approval 1 with the plan of call 2: refused (another plan)
    const wrongPlan = approvalMessage(actor.actorId, a1!.id, a2!.planDigest, { decision: 'approve', always: false });
    await sup.send(wrongPlan);
    await waitFor(() => actor.projection.inbox[wrongPlan.id]?.state === 'cancelled');
    await sup.send(approvalMessage(actor.actorId, a1!.id, a1!.planDigest, { decision: 'approve', always: false }));
    await waitFor(async () => (await effects()).length === 1);
    // replaying approval 1 (already used) for anything: refused; call 2 still waits
    const replay = approvalMessage(actor.actorId, a1!.id, a1!.planDigest, { decision: 'approve', always: false });
    await sup.send(replay);
    await waitFor(() => actor.projection.inbox[replay.id]?.state === 'cancelled');
    expect(pendingApprovals(actor.projection).map((a) => a.approvalId)).toEqual([a2!.id]);
    await sup.send(approvalMessage(actor.actorId, a2!.id, a2!.planDigest, { decision: 'approve', always: false }));
    await ended;
    expect(await effects()).toEqual(['one', 'two']);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const refusals = ofType(log, 'inbox/cancelled').map((e) => e.data.reason);
    expect(refusals[0]).toMatch(/the answer is for plan sha256:.* but approval .* asks about/);
    expect(refusals[1]).toMatch(/is already used; an approval is single use/);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('denies the call when nobody answers before the expiry', async () => {
    const sup = await open([append('one'), { content: 'it was not approved' }], { approvalTtlMs: 300 });
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'it was not approved' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'approval/denied').data).toMatchObject({ by: 'expiry' });
    expect(only(log, 'tool/denied').data.reason).toMatch(/expired/);
    expect(await effects()).toEqual([]);
  });

  it('a deny rule added after the approval wins at the recheck', async () => {
    let rules: PolicyRule[] = [];
    const sup = await open([append('one'), { content: 'denied' }], { policy: (s) => ({ rules, mode: s.approvalMode ?? 'ask' }) });
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    rules = [{ tool: 'append', decision: 'deny', reason: 'appending is frozen' }];
    await sup.send(approvalMessage(actor.actorId, approvalId!, actor.projection.approvals![approvalId!]!.planDigest, { decision: 'approve', always: false }));
    await ended;
    expect(await effects()).toEqual([]);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'policy/decided').at(-1)!.data).toMatchObject({ decision: 'deny', recheck: true });
    expect(only(log, 'tool/denied').data.reason).toMatch(/appending is frozen/);
  });

  it.each([
    ['the plan changed (arguments as the tool now reads them)', () => (planTarget = 'b'), /the execution plan changed/],
    ['the tool version changed', () => (toolVersion = '2'), /the tool changed from version 1 to 2/],
    ['the resources it touches changed (another scope)', () => (scopeFile = 'other.log'), /the resources the call touches changed/],
  ])('asks again when %s after the approval, then runs once', async (_, change, why) => {
    const sup = await open([append('one'), { content: 'done' }]);
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [first] = await actor.whenAwaitingApproval();
    change();
    await sup.send(approvalMessage(actor.actorId, first!, actor.projection.approvals![first!]!.planDigest, { decision: 'approve', always: false }));
    const [second] = await waitForApproval(actor, first!);
    expect(await effects()).toEqual([]);
    await sup.send(approvalMessage(actor.actorId, second, actor.projection.approvals![second]!.planDigest, { decision: 'approve', always: false }));
    await ended;
    expect(await effects()).toEqual(['one']);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const recheck = ofType(log, 'policy/decided').find((e) => e.data.recheck && e.data.decision === 'ask');
    expect(recheck?.data.reason).toMatch(why);
    expect(ofType(log, 'approval/requested')).toHaveLength(2);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('"always" allows the same plan again without asking; another plan still asks', async () => {
    const sup = await open([append('same'), append('same'), append('other'), { content: 'done' }]);
    const { actor, ended } = await startTurn(sup, 'append', ask());
    const [first] = await actor.whenAwaitingApproval();
    await sup.send(approvalMessage(actor.actorId, first!, actor.projection.approvals![first!]!.planDigest, { decision: 'approve', always: true }));
    const [next] = await waitForApproval(actor, first!);
    expect(await effects()).toEqual(['same', 'same']);
    await sup.send(approvalMessage(actor.actorId, next, actor.projection.approvals![next]!.planDigest, { decision: 'approve', always: false }));
    await ended;
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'policy/decided').map((e) => e.data.rule)).toContain('approval:always');
    expect(await effects()).toEqual(['same', 'same', 'other']);
  });

  it('a crash between the approval and the execution runs the call exactly once after recovery', async () => {
    const sup = await open([append('one'), { content: 'done' }], {}, 'after:approval/granted=drop');
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    await sup.send(approvalMessage(actor.actorId, approvalId!, actor.projection.approvals![approvalId!]!.planDigest, { decision: 'approve', always: false }));
    await expect(ended).rejects.toThrow();
    expect(await effects()).toEqual([]);
    const next = rt!.supervisor({ extra: { tooling: defaultTooling() } });
    let resumed!: Promise<unknown>;
    const { recovered } = await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
    expect(recovered).toBe(true);
    await expect(resumed).resolves.toMatchObject({ outcome: 'completed' });
    expect(await effects()).toEqual(['one']);
    const log = await readLog(next, actor.rootId, actor.actorId);
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a resume whose runtime no longer offers the approved tool denies the call at the recheck, not a crash', async () => {
    const sup = await open([append('one'), { content: 'done' }], {}, 'after:approval/granted=drop');
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    await sup.send(approvalMessage(actor.actorId, approvalId!, actor.projection.approvals![approvalId!]!.planDigest, { decision: 'approve', always: false }));
    await expect(ended).rejects.toThrow();
    // another runtime on the same log, built without the tool
    const other = await world.rts.open({ script: [append('one'), { content: 'done' }] });
    try {
      const next = other.supervisor({ extra: { tooling: defaultTooling() } });
      let resumed!: Promise<unknown>;
      await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
      await expect(resumed).resolves.toMatchObject({ outcome: 'completed' });
      const log = await readLog(next, actor.rootId, actor.actorId);
      expect(ofType(log, 'policy/decided').at(-1)!.data).toMatchObject({ decision: 'deny', rule: 'tool:unplannable', recheck: true });
      expect(only(log, 'tool/denied').data.reason).toMatch(/no longer resolves: unknown tool "append"/);
      expect(await effects()).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('a pending approval keeps its absolute expiry across a crash: after the restart it expires on time, not never', async () => {
    const sup = await open([append('one'), { content: 'not approved in time' }], { approvalTtlMs: 2_000 });
    const { actor } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    const expiresAt = actor.projection.approvals![approvalId!]!.expiresAt;
    // the host dies while the approval waits (nothing is closed in the log), and stays down past the expiry
    await sup.stop();
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 200));
    // a new TTL of a minute: were the expiry restarted rather than re-armed, nothing would expire in this test
    const next = rt!.supervisor({ extra: { tooling: defaultTooling({ approvalTtlMs: 60_000 }) } });
    let resumed!: Promise<unknown>;
    await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
    await expect(resumed).resolves.toMatchObject({ outcome: 'completed', answer: 'not approved in time' });
    const log = await readLog(next, actor.rootId, actor.actorId);
    const denied = only(log, 'approval/denied');
    expect(denied.data).toMatchObject({ approvalId, by: 'expiry' });
    // re-armed from the log's absolute time, never before it
    expect(Date.parse(denied.at)).toBeGreaterThanOrEqual(expiresAt);
    expect(await effects()).toEqual([]);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('a crash after a manual call started leaves its outcome unknown and the turn waits for a person', async () => {
    const sup = await open([append('one'), { content: 'I will check' }], {}, 'after:tool/start=drop');
    const { actor, ended } = await startTurn(sup, 'append one', ask());
    const [approvalId] = await actor.whenAwaitingApproval();
    await sup.send(approvalMessage(actor.actorId, approvalId!, actor.projection.approvals![approvalId!]!.planDigest, { decision: 'approve', always: false }));
    await expect(ended).rejects.toThrow();
    const next = rt!.supervisor({ extra: { tooling: defaultTooling() } });
    let resumed!: Promise<unknown>;
    const { actor: again } = await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
    const [confirm] = await again.whenAwaitingApproval();
    expect(again.projection.approvals![confirm!]).toMatchObject({ rule: 'recovery:outcome-unknown' });
    await next.send(approvalMessage(actor.actorId, confirm!, again.projection.approvals![confirm!]!.planDigest, { decision: 'deny', reason: 'it did run' }));
    await expect(resumed).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(next, actor.rootId, actor.actorId);
    expect(only(log, 'tool/outcome_unknown').data.reason).toMatch(/may or may not have taken effect; denied by a person: it did run/);
    expect(ofType(log, 'tool/start')).toHaveLength(1);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('an unknown message kind named like an approval but malformed is refused with a reason', async () => {
    const sup = await open([append('one'), { content: 'done' }], { approvalTtlMs: 60_000 });
    const { actor } = await startTurn(sup, 'append one', ask());
    await actor.whenAwaitingApproval();
    const bad = message(actor.actorId, '{"approve": true}', { kind: 'approval_response', from: 'client:cli', target: 'now' });
    await sup.send(bad);
    await waitFor(() => actor.projection.inbox[bad.id]?.state === 'cancelled');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'inbox/cancelled').data.reason).toMatch(/not an approval answer/);
  });
});

async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until the actor asks for an approval other than `previous`. */
async function waitForApproval(actor: { whenAwaitingApproval(): Promise<string[]> }, previous: string): Promise<[string]> {
  for (;;) {
    const ids = (await actor.whenAwaitingApproval()).filter((id) => id !== previous);
    if (ids.length > 0) return [ids[0]!];
    await new Promise((r) => setTimeout(r, 10));
  }
}
