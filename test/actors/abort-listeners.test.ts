import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createOpenAIChatModel } from '../../src/model/openai-chat.js';
import { startFakeOpenAI, type FakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';
import { runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld } from './harness.js';

let fake: FakeOpenAI;
const STEPS = 14;

const world = actorTestWorld();
beforeAll(async () => {
  const turns: FakeTurn[] = [
    ...Array.from({ length: STEPS }, (_, i): FakeTurn => ({ toolCalls: [{ id: `c${i}`, name: 'list_dir', arguments: '{"path":"."}' }] })),
    { content: 'done' },
  ];
  fake = await startFakeOpenAI({ turns });
});
afterAll(async () => {
  await fake.close();
});
const file = world.shared(() => ({
  modelFor: async () => createOpenAIChatModel({ apiKey: 'test', baseURL: fake.baseURL, model: 'test-model' }),
}));
it('a long turn leaves no abort listeners behind on the turn signal (one attempt must not leak into the next)', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(w.name);
  };
  process.on('warning', onWarning);
  try {
    const { actor, ended } = await runTurn(file.rt.supervisor(), 'look around', turnRequest(world.ws, { model: 'openai:test-model' }));
    expect(ended.outcome).toBe('completed');
    expect(getEventListeners(actor.turnAbort.signal, 'abort')).toHaveLength(0);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  } finally {
    process.off('warning', onWarning);
  }
});
