import { describe, expect, it } from 'vitest';
import { verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { captureModels, ofType, only, actorTestWorld } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

const readA: ScriptResponse = { tool_calls: [{ name: 'read_file', arguments: { path: 'src/a.txt' } }] };

describe('agent actor', () => {
  it('runs a tool step and a final answer in two commits per step', async () => {
    const rt = await rts.open({ script: [readA, { content: 'a.txt holds alpha and beta.' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'what is in a.txt?', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    expect(ended.answer).toBe('a.txt holds alpha and beta.');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(log.map((e) => e.type)).toEqual([
      'inbox/received', 'turn/start', 'user/message', 'step/start', 'request/prepared', 'attempt/start',
      'attempt/end', 'assistant/accepted', 'tool/call', 'policy/decided', 'tool/start',
      'tool/result', 'step/end', 'step/start', 'request/prepared', 'attempt/start',
      'attempt/end', 'assistant/accepted', 'step/end', 'turn/end',
    ]);
    const result = log.find((e) => e.type === 'tool/result');
    expect(result?.type === 'tool/result' && result.data.output).toContain('alpha');
    // intent before act: [claim .. attempt/start], [.. tool/start], [result .. attempt/start], [final]
    expect(rt.commits.get(actor.actorId)!.map((c) => c.length)).toEqual([6, 5, 5, 4]);
  });

  it('commits about twice per step over a 10-step tool loop', async () => {
    const rt = await rts.open({ script: [...Array.from({ length: 10 }, () => readA), { content: 'read it ten times' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'read a.txt ten times', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const steps = ofType(log, 'step/start').length;
    expect(steps).toBe(11);
    expect(ofType(log, 'tool/result')).toHaveLength(10);
    const commits = rt.commits.get(actor.actorId)!;
    // every commit seen once, in log order
    expect(commits.flat().map((e) => e.seq)).toEqual(log.map((e) => e.seq));
    expect(commits.length).toBeLessThanOrEqual(3 * steps);
    // a tool step is two commits (up to attempt/start, up to tool/start); the final step one more
    expect(commits.length).toBe(2 * steps);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('budgets', () => {
  it('stops the turn with step_budget after exactly maxSteps steps', async () => {
    const rt = await rts.open({ script: [readA, readA, readA, readA] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'keep reading', turnRequest(world.ws, { maxSteps: 2 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'step_budget', answer: null });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'step/start')).toHaveLength(2);
    expect(ofType(log, 'attempt/start')).toHaveLength(2);
    expect(ofType(log, 'tool/result')).toHaveLength(2);
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'stopped', reason: 'step_budget', steps: 2, toolCalls: 2 });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('cancels the call past maxToolCalls with tool_budget and stops the turn', async () => {
    const rt = await rts.open({
      script: [
        {
          tool_calls: [
            { name: 'read_file', arguments: { path: 'src/a.txt' } },
            { name: 'list_dir', arguments: { path: 'src' } },
          ],
        },
        { content: 'never asked for' },
      ],
    });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'read and list', turnRequest(world.ws, { maxToolCalls: 1 }));
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'tool_budget' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const [first, second] = ofType(log, 'tool/call');
    expect(first!.data).toMatchObject({ index: 0, name: 'read_file', withinBudget: true });
    expect(second!.data).toMatchObject({ index: 1, name: 'list_dir', withinBudget: false });
    expect(only(log, 'tool/start').call).toBe(first!.call);
    expect(only(log, 'tool/result').call).toBe(first!.call);
    const cancelled = only(log, 'tool/cancelled');
    expect(cancelled.call).toBe(second!.call);
    expect(cancelled.data.reason).toMatch(/^tool_budget: /);
    expect(ofType(log, 'step/start')).toHaveLength(1);
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'stopped', reason: 'tool_budget', steps: 1, toolCalls: 1 });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('aborts a slow attempt at the deadline and stops the turn quickly', async () => {
    const rt = await rts.open({ script: [{ content: 'too late', delay_ms: 5000 }] });
    const sup = rt.supervisor();
    const t0 = Date.now();
    const { actor, ended } = await runTurn(sup, 'answer slowly', turnRequest(world.ws, { deadlineSeconds: 0.3 }));
    const elapsedMs = Date.now() - t0;
    expect(ended).toMatchObject({ outcome: 'stopped', reason: 'deadline', answer: null });
    // far sooner than the 5 s the response takes (a generous bound: no timing figure is asserted)
    expect(elapsedMs).toBeLessThan(4000);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = only(log, 'attempt/end');
    expect(end.data.outcome).toBe('aborted');
    expect(end.data.error).toMatchObject({ class: 'cancelled', retryable: false });
    // every attempt's usage is settled, even an aborted one
    expect(end.data.usage.inputTokens).toBeGreaterThan(0);
    expect(ofType(log, 'assistant/accepted')).toHaveLength(0);
    expect(only(log, 'step/end').data).toMatchObject({ outcome: 'stopped', reason: 'deadline' });
    expect(only(log, 'turn/end').data).toMatchObject({ outcome: 'stopped', reason: 'deadline' });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});

describe('observations', () => {
  it('answers an unknown tool with the available tools, and the next request carries it', async () => {
    const models = captureModels([
      { tool_calls: [{ id: 'c1', name: 'delete_everything', arguments: {} }] },
      { content: 'I cannot do that.' },
    ]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'delete it', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const call = only(log, 'tool/call');
    expect(call.data).toMatchObject({ name: 'delete_everything', status: 'unknown_tool', effects: null });
    const result = only(log, 'tool/result');
    expect(result.data.ok).toBe(false);
    expect(result.data.output).toBe('unknown tool "delete_everything"; available tools: apply_patch, artifact_read, ask_user, cancel_job, interrupt_agent, job_status, list_dir, load_skill, memory, memory_search, read_file, search, send_message, shell, spawn_agent, start_job, start_workflow, stop, update_plan, wait_agents, wait_jobs, write_file');
    expect(result.data.error).toMatchObject({ code: 'invalid_call', retryable: false });
    expect(ofType(log, 'tool/start')).toHaveLength(0);

    const requests = models.requests();
    expect(requests).toHaveLength(2);
    // a recorded request keeps saying what was sent, though the history grew after it
    for (const r of requests) expect(r.request.messages).toEqual((JSON.parse(r.body) as { messages: unknown }).messages);
    expect(requests[0]!.request.messages).toEqual([{ role: 'user', content: 'delete it' }]);
    expect(requests[1]!.request.messages.at(-1)).toEqual({
      role: 'tool', callId: 'c1', name: 'delete_everything', content: result.data.output,
    });
    expect(requests[1]!.body).toContain('available tools: apply_patch, artifact_read, ask_user, cancel_job, interrupt_agent, job_status, list_dir, load_skill, memory, memory_search, read_file, search, send_message, shell, spawn_agent, start_job, start_workflow, stop, update_plan, wait_agents, wait_jobs, write_file');
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('answers arguments that are not JSON with invalid_arguments, running nothing', async () => {
    const models = captureModels([
      { tool_calls: [{ id: 'c1', name: 'write_file', arguments: '{not json' }] },
      { content: 'I will send JSON next time.' },
    ]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'write it', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'tool/call').data).toMatchObject({ name: 'write_file', arguments: '{not json', status: 'invalid_arguments' });
    const result = only(log, 'tool/result');
    expect(result.data.ok).toBe(false);
    expect(result.data.output).toMatch(/^arguments for write_file are not valid JSON/);
    expect(ofType(log, 'policy/decided')).toHaveLength(0);
    expect(ofType(log, 'tool/start')).toHaveLength(0);
    expect(models.requests()[1]!.request.messages.at(-1)).toMatchObject({ role: 'tool', callId: 'c1', content: result.data.output });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('answers a tool outside the visible set exactly like a missing one, and offers only the visible', async () => {
    const models = captureModels([
      {
        tool_calls: [
          { id: 'c1', name: 'list_dir', arguments: { path: 'src' } },
          { id: 'c2', name: 'no_such_tool', arguments: {} },
        ],
      },
      { content: 'Only read_file is there.' },
    ]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'list src', turnRequest(world.ws, { tools: ['read_file'] }));
    expect(ended.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const [hidden, missing] = ofType(log, 'tool/call');
    expect(hidden!.data.status).toBe('unknown_tool');
    expect(missing!.data.status).toBe('unknown_tool');
    const [r1, r2] = ofType(log, 'tool/result');
    expect(r1!.data.output).toBe('unknown tool "list_dir"; available tools: read_file');
    // the same words, name aside: a hidden tool's existence is not revealed
    expect(r2!.data.output).toBe(r1!.data.output.replace('list_dir', 'no_such_tool'));
    expect(ofType(log, 'tool/start')).toHaveLength(0);

    const requests = models.requests();
    for (const r of requests) {
      expect(r.request.tools.map((t) => t.name)).toEqual(['read_file']);
      expect((JSON.parse(r.body) as { tools: Array<{ name: string }> }).tools.map((t) => t.name)).toEqual(['read_file']);
    }
    expect(requests[1]!.request.messages.slice(-2)).toEqual([
      { role: 'tool', callId: 'c1', name: 'list_dir', content: r1!.data.output },
      { role: 'tool', callId: 'c2', name: 'no_such_tool', content: r2!.data.output },
    ]);
  });
});

describe('model errors', () => {
  it('retries a rate limit after retry_after_ms with the same prepared request', async () => {
    const models = captureModels([{ error: { type: 'rate_limit', retry_after_ms: 50 } }, { content: 'done' }]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'answer', turnRequest(world.ws));
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'done' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const prepared = only(log, 'request/prepared');
    const starts = ofType(log, 'attempt/start');
    const ends = ofType(log, 'attempt/end');
    expect(starts.map((s) => s.data.index)).toEqual([1, 2]);
    expect(starts.map((s) => s.data.requestDigest)).toEqual([prepared.data.digest, prepared.data.digest]);
    expect(ends[0]!.data).toMatchObject({
      outcome: 'failed', backoffMs: 50, error: { class: 'rate_limit', retryable: true },
    });
    expect(ends[1]!.data.outcome).toBe('succeeded');
    // the retry waited out the backoff from the failed attempt's end
    expect(Date.parse(starts[1]!.at) - Date.parse(ends[0]!.at)).toBeGreaterThanOrEqual(45);

    // the blob named by the digest is the very body both attempts sent
    const requests = models.requests();
    expect(requests).toHaveLength(2);
    expect(requests[1]!.body).toBe(requests[0]!.body);
    expect(requests[0]!.digest).toBe(prepared.data.digest);
    expect(await rt.blobs.has(prepared.data.digest)).toBe(true);
    const blob = await rt.blobs.get(prepared.data.digest);
    expect(Buffer.from(blob!).equals(Buffer.from(requests[0]!.body, 'utf8'))).toBe(true);
    expect(prepared.data.bytes).toBe(blob!.byteLength);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('fails the turn when the script runs out', async () => {
    const rt = await rts.open({ script: [] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'answer', turnRequest(world.ws));
    expect(ended.outcome).toBe('failed');
    expect(ended.reason).toContain('ran out');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    // not retryable: one attempt
    expect(only(log, 'attempt/end').data).toMatchObject({ outcome: 'failed', backoffMs: null, error: { class: 'server', retryable: false } });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('fails on context_overflow without a retry when nothing closed is left to compact', async () => {
    const rt = await rts.open({ script: [{ error: { type: 'context_overflow' } }, { content: 'never asked for' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'answer', turnRequest(world.ws));
    expect(ended.outcome).toBe('failed');
    expect(ended.reason).toMatch(/^context_cannot_fit: nothing closed is left to compact.*the provider refused the request/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'attempt/start')).toHaveLength(1);
    expect(only(log, 'attempt/end').data).toMatchObject({
      outcome: 'overflow', backoffMs: null, error: { class: 'context_overflow', retryable: false },
    });
    expect(only(log, 'turn/end').data.outcome).toBe('failed');
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});
