import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTIONS } from '../../src/actors/effects/compaction.js';
import { createOpenAIChatModel } from '../../src/model/openai-chat.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { startFakeOpenAI, type FakeTurn } from '../helpers/fake-openai.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn } from './harness.js';

// Compaction through the OpenAI-compatible adapter, over real HTTP to a fake server that speaks the
// wire format: the summary's request is a request of its own (the compaction prompt, no tools, the
// range as one message, nothing of the runtime's bookkeeping on the wire), and its answer becomes
// the checkpoint.

const world = actorTestWorld();
const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

it('a turn over the OpenAI chat adapter compacts with a summary request of its own, and completes', async () => {
  const ws = await tempDir('compaction-openai');
  dirs.push(ws);
  await mkdir(ws, { recursive: true });
  for (let i = 0; i < 10; i++) await writeFile(join(ws, `f${i}.txt`), `file ${i}: ${'filler text '.repeat(400)}`.slice(0, 4096));
  let step = 0;
  const summaries: string[] = [];
  const server = await startFakeOpenAI({
    handler(req): FakeTurn {
      const body = req.body as { messages: Array<{ role: string; content: string }> };
      if (body.messages[0]?.content === COMPACTION_INSTRUCTIONS) {
        summaries.push(req.rawBody);
        return { content: `Summary ${summaries.length}: read the files; each is filler.` };
      }
      const i = step++;
      return i < 10 ? { toolCalls: [{ id: `c${i}`, name: 'read_file', arguments: JSON.stringify({ path: `f${i}.txt` }) }] } : { content: 'All ten files are filler.' };
    },
  });
  closers.push(() => server.close());
  const rt = await world.rts.open({
    modelFor: async () => createOpenAIChatModel({ apiKey: 'sk-test', model: 'test-model', baseURL: server.baseURL }),
  });
  const sup = rt.supervisor();
  const { actor, ended } = await startTurn(sup, 'read every file', turnRequest(ws, { model: 'openai:test-model', tools: ['read_file'], maxSteps: 20, context: { window: 8_000 } }));
  expect(await ended).toMatchObject({ outcome: 'completed', answer: 'All ten files are filler.' });
  const log = await readLog(sup, actor.rootId, actor.actorId);
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
  const checkpoints = ofType(log, 'checkpoint/committed');
  expect(checkpoints.length).toBeGreaterThanOrEqual(1);
  expect(summaries.length).toBe(ofType(log, 'attempt/start').filter((e) => e.data.kind === 'compaction').length);
  expect(checkpoints[0]!.data.text).toContain('Summary 1: read the files; each is filler.');
  // the summary's request: the compaction prompt, one message holding the range, no tools, and no runtime field on the wire
  const first = JSON.parse(summaries[0]!) as Record<string, unknown> & { messages: Array<{ role: string; content: string }> };
  expect(first.messages.map((m) => m.role)).toEqual(['system', 'user']);
  expect(first.messages[1]!.content).toMatch(/^Messages \d+-\d+ of the conversation, oldest first:\n\[assistant\] /);
  expect(first).not.toHaveProperty('tools');
  expect(summaries[0]).not.toContain('purpose');
  // every request of the step after a checkpoint holds it
  const after = server.requests.filter((q) => q.path === '/v1/chat/completions' && !summaries.includes(q.rawBody)).at(-1)!;
  expect(after.rawBody).toContain("Task (the user's words): read every file");
});
