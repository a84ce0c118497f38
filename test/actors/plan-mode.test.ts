import { UNTRUSTED_NOTE } from '../../src/context/assembly.js';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { acceptedPlanText, PLAN_MODE_INSTRUCTIONS, requestAfterPlan } from '../../src/actors/agent/plan-mode.js';
import { DEFAULT_INSTRUCTIONS, resolveSettings } from '../../src/actors/agent/turn-settings.js';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, message, ofType, startTurn, waitForLog } from './harness.js';

const world = actorTestWorld();

const write = { name: 'write_file', arguments: { path: 'src/a.txt', content: 'changed\n' } };
const shell = { name: 'shell', arguments: { command: 'touch made-by-shell' } };
const read = { name: 'read_file', arguments: { path: 'src/a.txt' } };
const plan = { name: 'update_plan', arguments: { items: [{ content: 'Change src/a.txt', status: 'pending' }] } };

describe('plan mode', () => {
  it('denies write_file and shell with reason plan mode, even in full-auto; allows read_file and update_plan', async () => {
    const models = captureModels([{ tool_calls: [read, write, shell, plan] }, { content: 'planned' }]);
    const rt = await world.rts.open({ models });
    const sup = rt.supervisor();
    // a tool list without update_plan: plan mode offers it all the same
    const req = turnRequest(world.ws, { approvalMode: 'full-auto', planMode: true, tools: ['read_file', 'write_file', 'shell'] });
    const { actor, ended } = await startTurn(sup, 'plan a change', req);
    await expect(ended).resolves.toMatchObject({ outcome: 'completed', answer: 'planned' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const start = ofType(log, 'turn/start')[0]!;
    expect(start.data.settings).toMatchObject({ planMode: true, tools: ['read_file', 'write_file', 'shell', 'update_plan'] });
    const byCall = new Map(ofType(log, 'tool/call').map((c) => [c.call, c.data.name]));
    const decided = ofType(log, 'policy/decided').map((d) => ({ tool: byCall.get(d.call), decision: d.data.decision, rule: d.data.rule, reason: d.data.reason }));
    expect(decided).toEqual([
      { tool: 'read_file', decision: 'allow', rule: 'default:read', reason: null },
      { tool: 'write_file', decision: 'deny', rule: 'mode:plan', reason: expect.stringMatching(/^plan mode: the turn is read-only/) },
      { tool: 'shell', decision: 'deny', rule: 'mode:plan', reason: expect.stringMatching(/^plan mode: /) },
      { tool: 'update_plan', decision: 'allow', rule: 'default:read', reason: null },
    ]);
    expect(ofType(log, 'tool/denied').map((d) => byCall.get(d.call))).toEqual(['write_file', 'shell']);
    expect(ofType(log, 'approval/requested')).toEqual([]);
    expect(await readFile(join(world.ws, 'src', 'a.txt'), 'utf8')).toBe('alpha\nbeta\n');
    expect(actor.projection.plan?.version).toBe(1);
    // the model is told it is in plan mode
    expect(models.requests()[0]!.request.instructions).toBe(`${DEFAULT_INSTRUCTIONS}${PLAN_MODE_INSTRUCTIONS}\n\n${UNTRUSTED_NOTE}`);
    expect(models.requests()[0]!.request.tools.map((t) => t.name)).toContain('update_plan');
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('is kept by a turn resumed after a crash: its recorded settings still deny effects', async () => {
    const script: ScriptResponse[] = [{ tool_calls: [read] }, { tool_calls: [write] }, { content: 'planned' }];
    const rt = await world.rts.open({ script });
    const first = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('before:tool/result=drop')) });
    const { actor, ended } = await startTurn(first, 'plan', turnRequest(world.ws, { approvalMode: 'full-auto', planMode: true }));
    await expect(ended).rejects.toThrow();
    const next = rt.supervisor();
    let resumed!: Promise<unknown>;
    await next.hydrate(actor.actorId, (a) => (resumed = a.whenTurnEnds()));
    await expect(resumed).resolves.toMatchObject({ outcome: 'completed' });
    const log = await readLog(next, actor.rootId, actor.actorId);
    expect(ofType(log, 'tool/denied')).toHaveLength(1);
    expect(ofType(log, 'tool/denied')[0]!.data.reason).toMatch(/^plan mode: /);
    expect(await readFile(join(world.ws, 'src', 'a.txt'), 'utf8')).toBe('alpha\nbeta\n');
  });

  it('accepting: the next turn runs in normal mode with the plan pinned in its prepared request', async () => {
    const models = captureModels([{ tool_calls: [plan] }, { content: 'planned' }, { tool_calls: [write] }, { content: 'done' }]);
    const rt = await world.rts.open({ models });
    const sup = rt.supervisor();
    const ws = world.ws;
    const { actor, ended } = await startTurn(sup, 'plan a change', turnRequest(ws, { planMode: true, maxSteps: 7 }));
    await ended;
    const p = actor.projection;
    const request = requestAfterPlan(p.lastSettings!);
    expect(request).toMatchObject({ planMode: false, instructions: DEFAULT_INSTRUCTIONS, approvalMode: 'auto-edit', maxSteps: 7, workspace: ws });
    await sup.send(message(actor.actorId, acceptedPlanText(p.plan!), { request, from: 'client:cli' }));
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2);
    const second = ofType(log, 'turn/start')[1]!;
    expect(second.data.settings.planMode).toBeUndefined();
    expect(second.data.settings.instructions).toBe(DEFAULT_INSTRUCTIONS);
    expect(ofType(log, 'turn/end')[1]!.data.outcome).toBe('completed');
    // the plan is in the request the model was sent, as the turn's user message
    const sent = models.requests()[2]!;
    const last = sent.request.messages.at(-1)!;
    expect(last.role).toBe('user');
    expect(last.content).toContain('The plan you wrote (version 1) was accepted');
    expect(last.content).toContain('[ ] Change src/a.txt');
    expect(sent.body).toContain('[ ] Change src/a.txt');
    // and the write it was planned for now runs
    expect(await readFile(join(ws, 'src', 'a.txt'), 'utf8')).toBe('changed\n');
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('resolves a request without plan mode to settings without it, and a turn without a request keeps it', () => {
    const plain = resolveSettings(turnRequest('/w'), null, 0, ['read_file', 'update_plan']);
    expect(plain.planMode).toBeUndefined();
    expect(plain.instructions).toBe(DEFAULT_INSTRUCTIONS);
    const planning = resolveSettings(turnRequest('/w', { planMode: true }), null, 0, ['read_file', 'update_plan']);
    expect(resolveSettings(null, planning, 0, []).planMode).toBe(true);
    expect(resolveSettings(requestAfterPlan(planning), planning, 0, ['read_file', 'update_plan'])).toEqual(plain);
  });
});
