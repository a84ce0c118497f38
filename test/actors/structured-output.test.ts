import { describe, expect, it } from 'vitest';
import { verifyLog } from '../../src/verify/verify.js';
import { checkAnswer } from '../../src/model/output-schema.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, ofType } from './harness.js';

const SCHEMA = {
  type: 'object',
  properties: { bug: { type: 'string' }, fixed: { type: 'boolean' } },
  required: ['bug', 'fixed'],
  additionalProperties: false,
};

const world = actorTestWorld();
const { rts } = world;

describe('structured output', () => {
  it('checks answers against a JSON Schema with reasons a model can act on', () => {
    expect(checkAnswer(SCHEMA, '{"bug":"first space only","fixed":true}')).toBeNull();
    expect(checkAnswer(SCHEMA, '```json\n{"bug":"x","fixed":false}\n```')).toBeNull();
    expect(checkAnswer(SCHEMA, 'The bug is the first space.')).toMatch(/^the answer is not JSON/);
    expect(checkAnswer(SCHEMA, '{"bug":1}')).toMatch(/does not match the output schema: bug: .*; fixed: /);
    expect(checkAnswer(SCHEMA, '')).toMatch(/empty/);
    expect(checkAnswer(null, 'anything')).toBeNull();
  });

  it('refuses an answer that does not match, shows the model why, and accepts the corrected one', async () => {
    const models = captureModels([
      { content: 'The bug is that only the first space is replaced.' },
      { content: '{"bug":"only the first space is replaced","fixed":true}' },
    ]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'what is the bug?', turnRequest(world.ws, { outputSchema: SCHEMA }));
    expect(ended).toMatchObject({ outcome: 'completed', answer: '{"bug":"only the first space is replaced","fixed":true}' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'assistant/rejected')).toHaveLength(1);
    expect(ofType(log, 'assistant/rejected')[0]!.data.reason).toMatch(/not JSON/);
    expect(ofType(log, 'step/end').map((e) => e.data.outcome)).toEqual(['rejected', 'final']);
    // the second request carries the schema, the refused answer and the reason
    const second = JSON.parse(models.requests()[1]!.body) as { output_schema: unknown; messages: Array<{ role: string; content: string }> };
    expect(second.output_schema).toEqual(SCHEMA);
    expect(second.messages.at(-2)).toMatchObject({ role: 'assistant', content: 'The bug is that only the first space is replaced.' });
    expect(second.messages.at(-1)!.role).toBe('user');
    expect(second.messages.at(-1)!.content).toMatch(/not accepted: the answer is not JSON/);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });

  it('fails the turn with a clear reason after three refused answers', async () => {
    const rt = await rts.open({ script: [{ content: 'no' }, { content: '{"bug":2}' }, { content: '[]' }, { content: 'unused' }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'what is the bug?', turnRequest(world.ws, { outputSchema: SCHEMA }));
    expect(ended.outcome).toBe('failed');
    expect(ended.reason).toMatch(/^invalid final answer: the answer does not match the output schema/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'assistant/rejected')).toHaveLength(3);
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});
