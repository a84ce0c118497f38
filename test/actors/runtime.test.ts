import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../../src/actors/runtime.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import { demoWorkspace } from '../helpers/cli.js';

let rt: Runtime | null = null;
afterEach(async () => {
  await rt?.close();
  rt = null;
});

const write = (path: string, content: string) => ({ tool_calls: [{ name: 'write_file', arguments: { path, content } }] });

describe('createRuntime in memory (no NATS, no LMDB)', () => {
  it('hosts an agent, yields its turn\'s events as committed, and resolves the outcome', async () => {
    const ws = await demoWorkspace();
    rt = await createRuntime({ memory: true, modelFor: async (_s, cursor) => createScriptedModel({ responses: [write('a.txt', 'hi\n'), { content: 'wrote it' }], cursor }), model: 'scripted:inline' });
    const agent = await rt.agent({ workspace: ws, approvalMode: 'auto-edit' });
    const turn = await agent.send('write a.txt');
    const types: string[] = [];
    for await (const e of turn.events()) types.push(e.type);
    expect(types[0]).toBe('inbox/received');
    expect(types.at(-1)).toBe('turn/end');
    expect(types).toContain('tool/result');
    expect(await turn.outcome).toMatchObject({ outcome: 'completed', answer: 'wrote it' });
    expect(await readFile(join(ws, 'a.txt'), 'utf8')).toBe('hi\n');
    expect(agent.ref.getSnapshot().agentStatus).toBeDefined();
  });

  it('steers a running turn, asks and is answered, and interrupts: all through the inbox', async () => {
    const ws = await demoWorkspace();
    const script = [
      { content: 'first draft', delay_ms: 300 },
      { tool_calls: [{ name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } }] },
      { content: 'blue it is' },
      { content: 'never', delay_ms: 10_000 },
    ];
    rt = await createRuntime({ memory: true, modelFor: async (_s, cursor) => createScriptedModel({ responses: script, cursor }), model: 'scripted:inline' });
    const agent = await rt.agent({ workspace: ws });
    const turn = await agent.send('paint it');
    const steer = await agent.say('steer', 'ask me the colour first');
    const [questionId] = await agent.whenAwaitingQuestion();
    expect(agent.ref.getSnapshot().agentStatus).toBe('waiting_input');
    await agent.answerQuestion(questionId!, { optionId: 'blue' });
    expect(await turn.outcome).toMatchObject({ outcome: 'completed', answer: 'blue it is' });
    const events: string[] = [];
    for await (const e of turn.events()) if (e.type === 'request/prepared' && e.data.messageIds?.includes(steer)) events.push('steer included');
    expect(events).toEqual(['steer included']);
    const next = await agent.send('and again');
    await new Promise((r) => setTimeout(r, 50));
    await agent.interrupt();
    expect(await next.outcome).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
  });

  it('waits for a person on a write in ask mode; answer() approves it', async () => {
    const ws = await demoWorkspace();
    rt = await createRuntime({ memory: true, modelFor: async (_s, cursor) => createScriptedModel({ responses: [write('b.txt', 'x\n'), { content: 'done' }], cursor }), model: 'scripted:inline' });
    const agent = await rt.agent({ workspace: ws });
    const turn = await agent.send('write b.txt');
    const [approvalId] = await agent.whenAwaitingApproval();
    expect(approvalId).toMatch(/^apr_/);
    await agent.answer(approvalId!, 'approve');
    expect((await turn.outcome).outcome).toBe('completed');
    expect(await readFile(join(ws, 'b.txt'), 'utf8')).toBe('x\n');
  });

  it('says what is missing: no data dir, no model', async () => {
    await expect(createRuntime({})).rejects.toMatchObject({ code: 'runtime.no_data_dir' });
    rt = await createRuntime({ memory: true });
    const agent = await rt.agent({ workspace: await demoWorkspace() });
    await expect(agent.send('x')).rejects.toMatchObject({ code: 'runtime.no_model' });
  });
});
