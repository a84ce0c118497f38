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
