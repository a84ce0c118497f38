import { getEventListeners } from 'node:events';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createOpenAIChatModel } from '../../src/model/openai-chat.js';
import { startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { openTestRuntime, runTurn, turnRequest, type TestRuntime } from '../helpers/runtime.js';

let nats: TestNats;
let fake: FakeOpenAI;
let rt: TestRuntime;
let ws: string;
const STEPS = 14;

beforeAll(async () => {
  nats = await startTestNats();
  ws = await tempDir('ws');
  const turns: FakeTurn[] = [
    ...Array.from({ length: STEPS }, (_, i): FakeTurn => ({ toolCalls: [{ id: `c${i}`, name: 'list_dir', arguments: '{"path":"."}' }] })),
    { content: 'done' },
  ];
  fake = await startFakeOpenAI({ turns });
  rt = await openTestRuntime({
    natsUrl: nats.url,
    modelFor: async () => createOpenAIChatModel({ apiKey: 'test', baseURL: fake.baseURL, model: 'test-model' }),
  });
});
afterAll(async () => {
  await rt.close();
  await fake.close();
  await nats.stop();
  await rm(ws, { recursive: true, force: true });
});

it('a long turn leaves no abort listeners behind on the turn signal (one attempt must not leak into the next)', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(w.name);
  };
  process.on('warning', onWarning);
  try {
    const { actor, ended } = await runTurn(rt.supervisor(), 'look around', turnRequest(ws, { model: 'openai:test-model' }));
    expect(ended.outcome).toBe('completed');
    expect(getEventListeners(actor.turnAbort.signal, 'abort')).toHaveLength(0);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  } finally {
    process.off('warning', onWarning);
  }
});
