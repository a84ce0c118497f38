import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/cli/chaos/plan.js';
import type { ModelAdapter, ModelRequest } from '../../src/model/model-port.js';
import { createOpenAIChatModel, prepareOpenAIChat } from '../../src/model/openai-chat.js';
import { createOpenAIResponsesModel, prepareOpenAIResponses } from '../../src/model/openai-responses.js';
import { GrowingBody, writeBody } from '../../src/model/request-body.js';
import { createScriptedModel, prepareScripted } from '../../src/model/scripted-model.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import type { HistoryItem } from '../../src/protocol/history.js';

type Rand = () => number;
const pick = <T,>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

function randomItem(r: Rand, n: number): HistoryItem {
  switch (pick(r, ['user', 'assistant', 'calls', 'tool'] as const)) {
    case 'user':
      return { role: 'user', content: pick(r, ['go', 'héllo "quoted" \\ and \n newline', '😀 emoji', '']) };
    case 'assistant':
      return { role: 'assistant', content: pick(r, ['done', null, '']), toolCalls: [] };
    case 'calls':
      return {
        role: 'assistant',
        content: pick(r, [null, 'thinking']),
        toolCalls: Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => ({ id: `call_${n}_${i}`, name: 'echo', arguments: `{"text":"${n}"}` })),
      };
    case 'tool':
      return { role: 'tool', callId: `call_${n}_0`, name: 'echo', content: `result ${n} ${'x'.repeat(Math.floor(r() * 50))}` };
  }
}

const TOOLS = [{ name: 'echo', description: 'Echo text', parameters: { type: 'object', properties: { text: { type: 'string' } } } }];

function request(r: Rand, messages: HistoryItem[], variant: number): ModelRequest {
  return {
    model: 'test-model',
    instructions: variant === 0 ? 'Be brief.' : 'Be thorough.',
    tools: variant === 2 ? [] : TOOLS,
    messages,
    maxOutputTokens: pick(r, [null, 512]),
    ...(variant === 3 ? { outputSchema: { type: 'object' }, effort: 'low' as const } : {}),
  } as ModelRequest;
}

const ADAPTERS: Array<{ name: string; make: () => ModelAdapter; reference: (q: ModelRequest) => { body: string; digest: string } }> = [
  { name: 'scripted', make: () => createScriptedModel({ responses: [] }), reference: prepareScripted },
  { name: 'openai-chat', make: () => createOpenAIChatModel({ apiKey: 'k', baseURL: 'http://127.0.0.1:9/v1', model: 'm' }), reference: prepareOpenAIChat },
  { name: 'openai-responses', make: () => createOpenAIResponsesModel({ apiKey: 'k', baseURL: 'http://127.0.0.1:9/v1', model: 'm' }), reference: prepareOpenAIResponses },
];

describe('request bodies written step by step', () => {
  for (const { name, make, reference } of ADAPTERS) {
    it(`${name}: the same bytes and digest as writing each body at once, over growing, restarted and changed histories`, () => {
      let reused = 0;
      let continued = 0;
      const bodies = new Map<string, string>();
      for (let seed = 1; seed <= 60; seed++) {
        const r = mulberry32(seed);
        const adapter = make();
        let history: HistoryItem[] = [];
        let variant = 0;
        let n = 0;
        for (let step = 0; step < 25; step++) {
          const roll = r();
          if (roll < 0.08) {
            // a rehydrate: equal items, new objects
            history = history.map((h) => structuredClone(h));
          } else if (roll < 0.12) {
            // something before the history changed (another instruction, tool list, schema)
            variant = Math.floor(r() * 4);
          } else if (roll < 0.15) {
            // a shorter history (as compaction would leave)
            history = history.slice(0, Math.floor(history.length / 2));
          } else {
            reused += 1;
          }
          for (let k = Math.floor(r() * 3); k > 0; k--) history.push(randomItem(r, n++));
          const q = request(r, [...history], variant);
          const got = adapter.prepare(q);
          const want = reference(q);
          expect(got.body, `seed ${seed} step ${step}`).toBe(want.body);
          expect(got.digest).toBe(want.digest);
          expect(got.digest).toBe(sha256Digest(got.body));
          expect(JSON.parse(got.body)).toBeTypeOf('object');
          // its size, and what it continues: the base's first bytes and the suffix are its bytes
          expect(got.bytes).toBe(Buffer.byteLength(got.body));
          if (got.delta) {
            const base = bodies.get(got.delta.base);
            expect(base, `seed ${seed} step ${step}: the base is a body written before`).toBeDefined();
            const rebuilt = Buffer.concat([Buffer.from(base!).subarray(0, got.delta.bytes), Buffer.from(got.delta.suffix as string)]);
            expect(rebuilt.equals(Buffer.from(got.body))).toBe(true);
            continued += 1;
          }
          bodies.set(got.digest, got.body);
        }
      }
      expect(reused).toBeGreaterThan(1_000);
      // many steps continue the last body; a restart, a changed head (here the scripted body's
      // varying output cap is in its head) or a shorter history do not
      expect(continued).toBeGreaterThan(500);
    });
  }

  it('handles items that write no element, and a lead before them', () => {
    const wire = (item: HistoryItem): unknown[] => (item.role === 'user' && item.content === '' ? [] : [item]);
    const layout = { head: {}, key: 'xs', lead: [{ first: true }], tail: {} };
    const items: HistoryItem[] = [{ role: 'user', content: '' }, { role: 'user', content: 'a' }, { role: 'user', content: '' }];
    const bodies = new GrowingBody(wire);
    for (let i = 0; i <= items.length; i++) {
      const got = bodies.write(layout, items.slice(0, i));
      expect(got.body).toBe(writeBody(layout, items.slice(0, i), wire));
      expect(got.digest).toBe(sha256Digest(got.body));
    }
    const noLead = { head: { a: 1 }, key: 'xs', lead: [], tail: { z: undefined, y: 2 } };
    const fresh = new GrowingBody(wire);
    for (let i = 0; i <= items.length; i++) expect(fresh.write(noLead, items.slice(0, i)).body).toBe(writeBody(noLead, items.slice(0, i), wire));
  });
});
