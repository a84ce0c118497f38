import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { openTestRuntime, readLog, runTurn, turnRequest, type TestRuntime } from '../helpers/runtime.js';

let nats: TestNats;
let ws: string;

beforeAll(async () => {
  nats = await startTestNats();
  ws = await tempDir('ws');
  await mkdir(join(ws, 'src'));
  await writeFile(join(ws, 'src', 'a.txt'), 'alpha\nbeta\n');
});
afterAll(async () => {
  await nats.stop();
});

describe('agent actor', () => {
  let rt: TestRuntime;
  afterAll(async () => rt?.close());

  it('runs a tool step and a final answer in two commits per step', async () => {
    rt = await openTestRuntime({
      natsUrl: nats.url,
      script: [
        { tool_calls: [{ name: 'read_file', arguments: { path: 'src/a.txt' } }] },
        { content: 'a.txt holds alpha and beta.' },
      ],
    });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'what is in a.txt?', turnRequest(ws));
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
});
