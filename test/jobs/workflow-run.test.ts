import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultTooling, staticPolicy } from '../../src/actors/agent/tooling.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { parseWorkflow } from '../../src/jobs/workflow-file.js';
import { foldRunLog, runNodes } from '../../src/jobs/workflow-state.js';
import { NODE_KIND_UNSUPPORTED } from '../../src/jobs/workflow-run.js';
import { newId } from '../../src/protocol/ids.js';
import { nodeJobIdOf } from '../../src/protocol/workflow-events.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { foldJobLog } from '../../src/store/job-projection.js';
import { findBubblewrap } from '../../src/tools/sandbox.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { symlink, writeFile } from 'node:fs/promises';
import { actorTestWorld, ofType, startTurn, waitForLog } from '../actors/harness.js';
import { interruptMessage } from '../../src/client/messages.js';
import { sleepers } from '../helpers/processes.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import { JobNoticeSchema } from '../../src/protocol/job-events.js';
import { workflowRunIdOf } from '../../src/protocol/workflow-events.js';

// A workflow run on in-memory ports with real sandboxed shell jobs: each node is a job owned by
// the run, its `node/ended` committed before a dependent starts; a run taken over by another
// supervisor from its log never runs an ended node again.

const world = actorTestWorld();
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' };

async function sandboxed() {
  const bwrapPath = await findBubblewrap(env.PATH);
  expect(bwrapPath, 'bubblewrap must work here (.ci/run installs it)').not.toBeNull();
  return defaultTooling({ bwrapPath, env });
}

/** a → b, a → c; each node appends its name to order.txt and a line to its own file. */
function threeNodes(tag: string, more: Record<string, unknown> = {}) {
  const cmd = (n: string) => `echo ${n} >> ${tag}-order.txt; echo run >> ${tag}-${n}.txt`;
  return parseWorkflow(JSON.stringify({
    name: `three-${tag}`,
    nodes: [
      { id: 'a', run: 'shell', command: cmd('a'), ...more },
      { id: 'b', run: 'shell', command: cmd('b'), needs: ['a'] },
      { id: 'c', run: 'shell', command: cmd('c'), needs: ['a'] },
    ],
  }), `three-${tag}.json`);
}

const ended = (l: ActorEvent[]) => l.some((e) => e.type === 'workflow/ended');
const lines = async (p: string) => (await readFile(p, 'utf8').catch(() => '')).split('\n').filter(Boolean);

describe('workflow runs', () => {
  it('a → b, a → c: b and c start only after a ended, each runs once, and the run succeeds', async () => {
    const rt = await world.rts.open();
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const runId = newId('workflow');
    await sup.workflowPort.start({ runId, name: 'three-m', workflow: threeNodes('m'), ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws });
    const log = await waitForLog(sup, { rootId: runId, actorId: runId }, ended, 30_000);
    expect(ofType(log, 'workflow/ended')[0]!.data).toEqual({ outcome: 'succeeded', failed: [] });
    const seqOf = (type: string, node: string) => log.find((e) => e.type === type && (e.data as { node: string }).node === node)!.seq;
    for (const n of ['b', 'c']) expect(seqOf('node/started', n)).toBeGreaterThan(seqOf('node/ended', 'a'));
    expect(ofType(log, 'node/started').map((e) => e.data.node).sort()).toEqual(['a', 'b', 'c']);
    expect(ofType(log, 'node/ended').map((e) => [e.data.node, e.data.outcome])).toHaveLength(3);
    const order = await lines(join(world.ws, 'm-order.txt'));
    expect(order[0]).toBe('a');
    expect([...order].sort()).toEqual(['a', 'b', 'c']);
    for (const n of ['a', 'b', 'c']) expect(await lines(join(world.ws, `m-${n}.txt`))).toEqual(['run']);
    // each node's job is the run's, its ID derived from (run, node, attempt)
    const a = ofType(log, 'node/started').find((e) => e.data.node === 'a')!;
    expect(a.data.jobId).toBe(nodeJobIdOf(runId, 'a', 1));
    const job = foldJobLog(await readLog(sup, runId, a.data.jobId))!;
    expect(job).toMatchObject({ ownerId: runId, phase: 'completed' });
    const s = foldRunLog(log)!;
    expect(runNodes(s).map((n) => [n.id, n.status, n.attempt])).toEqual([['a', 'succeeded', 1], ['b', 'succeeded', 1], ['c', 'succeeded', 1]]);
    expect((await rt.ports.directory.get(runId))).toMatchObject({ kind: 'workflow', status: 'completed' });
  });

  it('a failing node: its dependents are skipped, the run fails naming it; a model node fails clearly', async () => {
    const rt = await world.rts.open();
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const runId = newId('workflow');
    const wf = parseWorkflow(JSON.stringify({
      name: 'failing',
      nodes: [
        { id: 'a', run: 'shell', command: 'exit 3' },
        { id: 'b', run: 'shell', command: 'echo b', needs: ['a'] },
        { id: 'm', run: 'model', prompt: 'say hi' },
        { id: 'g', run: 'agent', task: 'do it' },
      ],
    }), 'failing.json');
    await sup.workflowPort.start({ runId, name: 'failing', workflow: wf, ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws });
    const log = await waitForLog(sup, { rootId: runId, actorId: runId }, ended, 30_000);
    expect(ofType(log, 'workflow/ended')[0]!.data).toEqual({ outcome: 'failed', failed: ['a', 'm', 'g'] });
    const nodes = runNodes(foldRunLog(log)!);
    expect(nodes.map((n) => [n.id, n.status])).toEqual([['a', 'failed'], ['b', 'skipped'], ['m', 'failed'], ['g', 'failed']]);
    expect(nodes[0]!.error).toBe('its command exited with code 3');
    expect(nodes[2]!.error).toContain('the run was given no model');
    expect(nodes[3]!.error).toContain(NODE_KIND_UNSUPPORTED);
    expect((await rt.ports.directory.get(runId))).toMatchObject({ status: 'failed' });
  });

  it('taken over after a ended: the next supervisor runs b and c once each, never a again', async () => {
    await rm(join(world.ws, 'k-a.txt'), { force: true });
    const rt = await world.rts.open();
    const tooling = await sandboxed();
    // the first holder stops right after a's end is committed, before b and c are started
    const faults = createFaultInjector(parseFaultSpecs('after:node/ended=drop'));
    const first = rt.supervisor({ faults, extra: { tooling } });
    const runId = newId('workflow');
    await first.workflowPort.start({ runId, name: 'three-k', workflow: threeNodes('k'), ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws });
    const log1 = await waitForLog(first, { rootId: runId, actorId: runId }, (l) => l.some((e) => e.type === 'node/ended'), 30_000);
    await first.stop();
    expect(ofType(log1, 'node/started').map((e) => e.data.node)).toEqual(['a']);
    const second = rt.supervisor({ extra: { tooling } });
    await second.hostClaimed(runId, 5);
    const log = await waitForLog(second, { rootId: runId, actorId: runId }, ended, 30_000);
    expect(ofType(log, 'workflow/ended')[0]!.data.outcome).toBe('succeeded');
    expect(ofType(log, 'node/started').map((e) => e.data.node).sort()).toEqual(['a', 'b', 'c']);
    for (const n of ['a', 'b', 'c']) expect(await lines(join(world.ws, `k-${n}.txt`))).toEqual(['run']);
    expect(log.filter((e) => e.epoch >= 5).map((e) => e.type)).not.toContain('workflow/created');
  });

  it('start_workflow: the run ID at once, the run owned by the agent in its tree; its end starts a turn of source job_notice', async () => {
    await writeFile(join(world.ws, 'tool-wf.json'), JSON.stringify({
      name: 'tooled',
      nodes: [{ id: 'a', run: 'shell', command: 'echo run >> t-a.txt' }, { id: 'b', run: 'shell', command: 'echo run >> t-b.txt', needs: ['a'] }],
    }));
    await writeFile(join(world.ws, 'bad-wf.json'), JSON.stringify({ name: 'bad', nodes: [{ id: 'a', run: 'shell', command: 'true', needs: ['zz'] }] }));
    const rt = await world.rts.open({
      modelFor: treeModels({ main: [call('start_workflow', { file: 'bad-wf.json' }), call('start_workflow', { file: 'tool-wf.json' }), answer('started it'), answer('it ended')] }),
    });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const { actor, ended } = await startTurn(sup, 'run the workflow', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const log = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2, 30_000);
    const results = ofType(log, 'tool/result');
    expect(results[0]!.data).toMatchObject({ ok: false });
    expect(results[0]!.data.output).toContain('bad-wf.json: node a: needs names zz');
    const runId = workflowRunIdOf(results[1]!.call!);
    expect(results[1]!.data.output).toContain(`Started workflow tooled (${runId})`);
    expect(ofType(log, 'turn/start').map((e) => e.data.source)).toEqual(['user_message', 'job_notice']);
    // to its owner the run is a job: started by the call, ended by its notice
    expect(actor.projection.jobs?.[runId]).toMatchObject({ name: 'workflow tool-wf.json', phase: 'completed', notified: true, onOwnerEnd: 'detach' });
    // over, its owner told: no longer hosted here, and its entry says how it ended
    await until(async () => !sup.hosts(runId));
    expect((await rt.ports.directory.get(runId))?.status).toBe('completed');
    const notice = ofType(log, 'inbox/received').find((e) => e.data.kind === 'job_notice')!;
    expect(JobNoticeSchema.parse(JSON.parse(notice.data.content))).toMatchObject({ jobId: runId, phase: 'completed', name: 'workflow tooled' });
    const runLog = await readLog(sup, actor.rootId, runId);
    expect(runLog[0]).toMatchObject({ type: 'workflow/created', data: { ownerId: actor.actorId, rootId: actor.rootId } });
    expect(ofType(runLog, 'workflow/ended')[0]!.data.outcome).toBe('succeeded');
    for (const n of ['a', 'b']) expect(await lines(join(world.ws, `t-${n}.txt`))).toEqual(['run']);
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('start_workflow holds the policy: a node the rules deny, a node that would ask, a file that links outside the workspace: refused, nothing started', async () => {
    await writeFile(join(world.ws, 'push-wf.json'), JSON.stringify({ name: 'push', nodes: [{ id: 'a', run: 'shell', command: 'echo ok' }, { id: 'p', run: 'shell', command: 'git push origin main', needs: ['a'] }] }));
    await writeFile(join(world.ws, 'plain-wf.json'), JSON.stringify({ name: 'plain', nodes: [{ id: 'a', run: 'shell', command: 'echo ok' }] }));
    await rm(join(world.ws, 'outside-wf.json'), { force: true });
    await symlink('/etc/hostname', join(world.ws, 'outside-wf.json'));
    const rt = await world.rts.open({
      modelFor: treeModels({ main: [
        { tool_calls: [
          { name: 'start_workflow', arguments: { file: 'push-wf.json' } },
          { name: 'start_workflow', arguments: { file: 'outside-wf.json' } },
        ] },
        answer('refused'),
      ] }),
    });
    const policy = staticPolicy([{ command: 'git push', decision: 'deny', reason: 'pushing is for people' }]);
    const sup = rt.supervisor({ extra: { tooling: { ...(await sandboxed()), policy } } });
    const { actor, ended } = await startTurn(sup, 'try', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const results = ofType(await readLog(sup, actor.rootId, actor.actorId), 'tool/result').map((e) => [e.data.error?.code, e.data.output]);
    // the two calls ran in one step: their results come in the order they ended
    expect(results).toHaveLength(2);
    expect(results).toEqual(expect.arrayContaining([
      ['workflow.not_allowed', expect.stringContaining("node p's command is denied as a shell call would be: denied by policy rule 1 (pushing is for people)")],
      ['workflow.outside_workspace', expect.stringContaining('leads outside the workspace')],
    ]));
    // full-auto with the sandbox allows a plain command: that run starts
    const rt2 = await world.rts.open({ modelFor: treeModels({ main: [call('start_workflow', { file: 'plain-wf.json' }), answer('refused')] }) });
    const sup2 = rt2.supervisor({ extra: { tooling: await sandboxed() } });
    const second = await startTurn(sup2, 'try', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(second.ended).resolves.toMatchObject({ outcome: 'completed' });
    expect(ofType(await readLog(sup2, second.actor.rootId, second.actor.actorId), 'tool/result')[0]!.data.output).toContain('Started workflow plain');
    // a command a rule says to ask about: no agent-started workflow runs it unasked
    const askPolicy = staticPolicy([{ command: 'echo', decision: 'ask', reason: 'echo is watched' }]);
    const rt3 = await world.rts.open({ modelFor: treeModels({ main: [call('start_workflow', { file: 'plain-wf.json' }), answer('refused')] }) });
    const sup3 = rt3.supervisor({ extra: { tooling: { ...(await sandboxed()), policy: askPolicy } } });
    const third = await startTurn(sup3, 'try', turnRequest(world.ws, { approvalMode: 'full-auto' }));
    await expect(third.ended).resolves.toMatchObject({ outcome: 'completed' });
    const asked = ofType(await readLog(sup3, third.actor.rootId, third.actor.actorId), 'tool/result').at(-1)!.data;
    expect(asked.error?.code).toBe('workflow.not_allowed');
    expect(asked.output).toContain("node a's command would ask for approval");
    const entries = (await rt.ports.directory.list()).filter((e) => e.kind === 'workflow' && (e.parentId === actor.actorId || e.parentId === third.actor.actorId));
    expect(entries).toEqual([]);
  });

  it('a node whose job was lost with its holder ends as its job does (interrupted: failed), and its retry runs as a new attempt', async () => {
    const rt = await world.rts.open();
    const tooling = await sandboxed();
    const first = rt.supervisor({ extra: { tooling, jobLimits: { killGraceMs: 500 } } });
    const runId = newId('workflow');
    const wf = parseWorkflow(JSON.stringify({
      name: 'lost',
      nodes: [
        { id: 'a', run: 'shell', command: 'echo run >> r-a.txt; test -f r-a.done || { touch r-a.done; sleep 30.0433; }', retries: 1 },
        { id: 'b', run: 'shell', command: 'echo run >> r-b.txt', needs: ['a'] },
      ],
    }), 'lost.json');
    await first.workflowPort.start({ runId, name: 'lost', workflow: wf, ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws });
    const jobId = nodeJobIdOf(runId, 'a', 1);
    await waitForLog(first, { rootId: runId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/phase' && e.data.phase === 'running'), 15_000);
    await until(async () => (await lines(join(world.ws, 'r-a.txt'))).length === 1);
    // its command is in its sleep (r-a.done made: a kill between the echo and the touch would make
    // attempt 2 sleep too)
    await until(async () => (await sleepers('30.0433')).length > 0);
    // its host goes: the run and the job stop here, nothing committed
    await first.stop();
    const second = rt.supervisor({ extra: { tooling } });
    await second.hostClaimed(runId, 5);
    const log = await waitForLog(second, { rootId: runId, actorId: runId }, ended, 30_000);
    const ends = ofType(log, 'node/ended').map((e) => [e.data.node, e.data.attempt, e.data.outcome]);
    expect(ends).toEqual([['a', 1, 'failed'], ['a', 2, 'succeeded'], ['b', 1, 'succeeded']]);
    expect(ofType(log, 'node/ended')[0]!.data.error).toMatch(/its job ended interrupted \(outcome_unknown/);
    expect(foldJobLog(await readLog(second, runId, jobId))).toMatchObject({ phase: 'interrupted' });
    expect(await lines(join(world.ws, 'r-a.txt'))).toEqual(['run', 'run']);
    expect(await lines(join(world.ws, 'r-b.txt'))).toEqual(['run']);
    expect(ofType(log, 'workflow/ended')[0]!.data.outcome).toBe('succeeded');
  });

  it('a person cancels a running run: its running node\'s job is stopped, what has not started is skipped, the run ends cancelled', async () => {
    const rt = await world.rts.open();
    const sup = rt.supervisor({ extra: { tooling: await sandboxed(), jobLimits: { killGraceMs: 500 } } });
    const runId = newId('workflow');
    const wf = parseWorkflow(JSON.stringify({
      name: 'stopped',
      nodes: [
        { id: 'a', run: 'shell', command: 'sleep 30.0441' },
        { id: 'b', run: 'shell', command: 'echo run >> c-b.txt', needs: ['a'] },
      ],
    }), 'stopped.json');
    await sup.workflowPort.start({ runId, name: 'stopped', workflow: wf, ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws });
    const jobId = nodeJobIdOf(runId, 'a', 1);
    await waitForLog(sup, { rootId: runId, actorId: jobId }, (l) => l.some((e) => e.type === 'job/phase' && e.data.phase === 'running'), 15_000);
    await until(async () => (await sleepers('30.0441')).length > 0);
    await sup.send(interruptMessage(runId));
    const log = await waitForLog(sup, { rootId: runId, actorId: runId }, ended, 20_000);
    expect(ofType(log, 'workflow/cancel_requested')).toHaveLength(1);
    expect(ofType(log, 'workflow/ended')[0]!.data).toMatchObject({ outcome: 'cancelled' });
    expect(ofType(log, 'node/ended').map((e) => [e.data.node, e.data.outcome])).toEqual([['a', 'failed']]);
    expect(foldRunLog(log)!.snap.context.nodes.b!.status).toBe('skipped');
    expect(foldJobLog(await readLog(sup, runId, jobId))).toMatchObject({ phase: 'cancelled', cancel: { reason: 'user_cancelled', by: runId } });
    expect((await sleepers('30.0441')).length).toBe(0);
    await expect(readFile(join(world.ws, 'c-b.txt'), 'utf8')).rejects.toThrow();
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });

  it('a model node: a refused answer is retried with the reason; its JSON decides which dependent runs (when)', async () => {
    const rt = await world.rts.open({ script: [{ content: 'it looks like a regression' }, { content: '{"verdict": "regression"}' }] });
    const sup = rt.supervisor({ extra: { tooling: await sandboxed() } });
    const runId = newId('workflow');
    const wf = parseWorkflow(JSON.stringify({
      name: 'triage',
      nodes: [
        { id: 'm', run: 'model', prompt: 'Is it a regression or flaky?', output_schema: { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] }, retries: 1 },
        { id: 'fix', run: 'shell', command: 'echo run >> tri-fix.txt', needs: ['m'], when: { node: 'm', path: 'verdict', equals: 'regression' } },
        { id: 'rerun', run: 'shell', command: 'echo run >> tri-rerun.txt', needs: ['m'], when: { node: 'm', path: 'verdict', equals: 'flaky' } },
      ],
    }), 'triage.json');
    await sup.workflowPort.start({ runId, name: 'triage', workflow: wf, ownerId: null, rootId: runId, cwd: world.ws, workspace: world.ws, model: { spec: 'scripted:the-test-script.json', baseUrl: null } });
    const log = await waitForLog(sup, { rootId: runId, actorId: runId }, ended, 30_000);
    const ends = ofType(log, 'node/ended');
    expect(ends.map((e) => [e.data.node, e.data.attempt, e.data.outcome])).toEqual([['m', 1, 'failed'], ['m', 2, 'succeeded'], ['fix', 1, 'succeeded']]);
    expect(ends[1]!.data.result).toEqual({ verdict: 'regression' });
    expect(runNodes(foldRunLog(log)!).map((n) => [n.id, n.status])).toEqual([['m', 'succeeded'], ['fix', 'succeeded'], ['rerun', 'skipped']]);
    expect(await lines(join(world.ws, 'tri-fix.txt'))).toEqual(['run']);
    expect(await lines(join(world.ws, 'tri-rerun.txt'))).toEqual([]);
    expect(ofType(log, 'workflow/ended')[0]!.data.outcome).toBe('succeeded');
  });
});

async function until(cond: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition never held');
    await new Promise((r) => setTimeout(r, 50));
  }
}
