// The client's live subscriber on a real nats-server: an agent hosted by the runtime streams its
// model's text on `live.<root>.<agent>`, and a watch on another connection receives it, in order,
// as it is published; a watch on another agent receives none of it, and a closed one stops.
import { rm } from 'node:fs/promises';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRuntime } from '../../src/actors/runtime.js';
import { createNatsLiveSource, type LiveDelta } from '../../src/client/live.js';
import { liveSubject } from '../../src/bus/subjects.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import { demoWorkspace } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';

let nats: TestNats;
let nc: NatsConnection;
const dirs: string[] = [];

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connect({ servers: nats.url });
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe('createNatsLiveSource', () => {
  test("an agent's streamed text reaches a watch on its live subject, tool calls and all", async () => {
    const ws = await demoWorkspace();
    const dataDir = await tempDir('data');
    dirs.push(ws, dataDir);
    const responses = [
      { content: 'Looking at the notes first.', tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
      { content: 'All done here.' },
    ];
    const rt = await createRuntime({ dataDir, natsUrl: nats.url, model: 'scripted:inline', modelFor: async (_s, cursor) => createScriptedModel({ responses, cursor }) });
    try {
      const agent = await rt.agent({ workspace: ws });
      const got: LiveDelta[] = [];
      const watch = createNatsLiveSource(nc).watch({ rootId: agent.id, actorId: agent.id }, (d) => got.push(d));
      const elsewhere: LiveDelta[] = [];
      const other = createNatsLiveSource(nc).watch({ rootId: 'agt_other', actorId: 'agt_other' }, (d) => elsewhere.push(d));
      await Promise.all([watch.ready, other.ready]);
      const turn = await agent.send('look around');
      expect(await turn.outcome).toMatchObject({ outcome: 'completed', answer: 'All done here.' });
      // core NATS: the last deltas may still be on their way when the commit is read
      await nc.flush();
      await new Promise((r) => setTimeout(r, 100));
      const text = got.filter((d) => d.type === 'text_delta').map((d) => d.text).join('');
      expect(text).toBe('Looking at the notes first.All done here.');
      const call = got.filter((d) => d.type === 'tool_call_delta');
      expect(call[0]).toMatchObject({ type: 'tool_call_delta', index: 0, name: 'list_dir' });
      expect(call.map((d) => d.argumentsDelta).join('')).toBe('{"path":"."}');
      // the first text comes before the tool call's deltas, as the model sent them
      expect(got.findIndex((d) => d.type === 'tool_call_delta')).toBeGreaterThan(got.findIndex((d) => d.type === 'text_delta'));
      expect(elsewhere).toEqual([]);
      watch.close();
      other.close();
      watch.close();
      const before = got.length;
      nc.publish(liveSubject(agent.id, agent.id), JSON.stringify({ type: 'text_delta', text: 'after close' }));
      await nc.flush();
      expect(got.length).toBe(before);
    } finally {
      await rt.close();
    }
  });

  test('a message of a shape it does not know is skipped, the next delta still arrives', async () => {
    const got: LiveDelta[] = [];
    const watch = createNatsLiveSource(nc).watch({ rootId: 'agt_r', actorId: 'agt_a' }, (d) => got.push(d));
    await watch.ready;
    nc.publish(liveSubject('agt_r', 'agt_a'), 'not json');
    nc.publish(liveSubject('agt_r', 'agt_a'), JSON.stringify({ type: 'reasoning_delta', text: 'hm' }));
    nc.publish(liveSubject('agt_r', 'agt_a'), JSON.stringify({ type: 'text_delta', text: 'hi' }));
    await nc.flush();
    await new Promise((r) => setTimeout(r, 50));
    watch.close();
    expect(got).toEqual([{ type: 'text_delta', text: 'hi' }]);
  });
});
