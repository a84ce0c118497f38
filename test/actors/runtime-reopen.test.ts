// The embedding API after a restart and with run's per-turn options: a new runtime on the same
// data dir and NATS reopens an agent by ID, reads its state and continues it; a turn's options
// reach its turn/start as `actorloop run`'s flags do, and bad ones are refused before sending.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../../src/actors/runtime.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import { newId } from '../../src/protocol/ids.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { demoWorkspace } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

const runtimes: Runtime[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** The events of a turn, as committed. */
async function eventsOf(turn: { events(): AsyncIterable<ActorEvent> }): Promise<ActorEvent[]> {
  const out: ActorEvent[] = [];
  for await (const e of turn.events()) out.push(e);
  return out;
}

describe('runtime.agent(id) after a restart', () => {
  let nats: TestNats;
  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it('reopens the agent on the same data dir and NATS, reads its state and continues it on its workspace and model', async () => {
    const dataDir = await tempDir('reopen');
    dirs.push(dataDir);
    const ws = await demoWorkspace();
    const script = join(dataDir, 'script.json');
    await writeFile(script, JSON.stringify({ responses: [
      { tool_calls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'one\n' } }] }, { content: 'first' },
      { tool_calls: [{ name: 'write_file', arguments: { path: 'b.txt', content: 'two\n' } }] }, { content: 'second' },
    ] }));
    const first = await createRuntime({ dataDir, natsUrl: nats.url, model: `scripted:${script}` });
    runtimes.push(first);
    const agent = await first.agent({ workspace: ws, approvalMode: 'auto-edit' });
    const turn = await agent.send('write a.txt');
    expect(await turn.outcome).toMatchObject({ outcome: 'completed', answer: 'first' });
    await first.close();
    runtimes.splice(runtimes.indexOf(first), 1);

    // a second process: nothing but the ID carries over, and no model is named
    const second = await createRuntime({ dataDir, natsUrl: nats.url });
    runtimes.push(second);
    const again = await second.agent(agent.id);
    expect(again.id).toBe(agent.id);
    expect(again.state.lastTurn).toMatchObject({ outcome: 'completed', answer: 'first' });
    expect(again.state.lastSettings).toMatchObject({ workspace: ws, approvalMode: 'auto-edit' });
    expect(await second.agent(agent.id)).toMatchObject({ id: agent.id });
    const next = await again.send('write b.txt');
    expect(await next.outcome).toMatchObject({ outcome: 'completed', answer: 'second' });
    expect(await readFile(join(ws, 'b.txt'), 'utf8')).toBe('two\n');
    const start = (await eventsOf(next)).find((e) => e.type === 'turn/start');
    expect(start?.data).toMatchObject({ settings: { model: `scripted:${script}`, workspace: ws, approvalMode: 'auto-edit' } });
  }, 60_000);

  it('refuses a malformed ID and one the directory does not hold, each with its code', async () => {
    const rt = await createRuntime({ memory: true });
    runtimes.push(rt);
    await expect(rt.agent('agt_nope')).rejects.toMatchObject({ name: 'BadIdError', code: 'protocol.bad_id', message: expect.stringContaining('is not an agent ID') });
    const unknown = newId('agent');
    await expect(rt.agent(unknown)).rejects.toMatchObject({ code: 'actor.not_found', message: `no agent ${unknown} in this data dir` });
  });
});

describe('per-turn options', () => {
  const runtime = async (responses: object[]) => {
    const rt = await createRuntime({ memory: true, model: 'scripted:inline', modelFor: async (_s, cursor) => createScriptedModel({ responses, cursor }) });
    runtimes.push(rt);
    return rt;
  };

  it('a goal, budgets, an output schema and a completion policy reach the turn as run\'s flags do', async () => {
    const rt = await runtime([{ content: '{"ok":true}' }]);
    const agent = await rt.agent({ workspace: await demoWorkspace() });
    const outputSchema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    const turn = await agent.send('say ok', {
      goal: { objective: 'say ok', tokens: 50_000, seconds: 600 }, maxTokens: 10_000, outputSchema, completeWhen: 'answer', maxSteps: 4,
    });
    expect((await turn.outcome).outcome).toBe('completed');
    const events = await eventsOf(turn);
    expect(events.find((e) => e.type === 'goal/created')?.data).toMatchObject({ objective: 'say ok', budget: { tokens: 50_000, seconds: 600 } });
    const start = events.find((e) => e.type === 'turn/start');
    expect(start?.data).toMatchObject({ settings: { outputSchema, budgets: { maxTokens: 10_000, maxSteps: 4 } } });
    expect(agent.state.goal).toMatchObject({ objective: 'say ok' });
  });

  it('plan mode runs the turn read-only', async () => {
    const rt = await runtime([{ content: '## Plan\n1. nothing' }]);
    const agent = await rt.agent({ workspace: await demoWorkspace() });
    const turn = await agent.send('plan it', { planMode: true });
    await turn.outcome;
    const start = (await eventsOf(turn)).find((e) => e.type === 'turn/start');
    expect(start?.data).toMatchObject({ settings: { planMode: true } });
  });

  it('refuses bad options before sending, each in one line with its code', async () => {
    const rt = await runtime([{ content: 'never' }]);
    const agent = await rt.agent({ workspace: await demoWorkspace() });
    await expect(agent.send('x', { maxTokens: 1.5 })).rejects.toMatchObject({ code: 'config.turn_option', message: expect.stringContaining('maxTokens') });
    await expect(agent.send('x', { maxCostUsd: -1 })).rejects.toMatchObject({ code: 'config.turn_option', message: expect.stringContaining('maxCostUsd') });
    await expect(agent.send('x', { goal: { objective: 'g' }, planMode: true })).rejects.toMatchObject({ code: 'config.goal_plan_mode' });
    await expect(agent.send('x', { goal: { objective: '  ' } })).rejects.toMatchObject({ code: 'config.goal' });
    await expect(agent.send('x', { completeWhen: 'code-change' })).rejects.toMatchObject({ code: 'config.verify_commands' });
    await expect(agent.send('x', { completeWhen: 'maybe' as never })).rejects.toMatchObject({ code: 'config.turn_option' });
    await expect(agent.send('x', { maxCostUsd: 0.5 })).rejects.toMatchObject({ code: 'config.max_cost_unpriced' });
    await expect(agent.send('x', { outputSchema: { type: 'nonsense' } })).rejects.toMatchObject({ code: 'config.output_schema' });
    // nothing reached the inbox: the agent never started a turn
    expect(agent.state.lastSettings).toBeNull();
  });
});
