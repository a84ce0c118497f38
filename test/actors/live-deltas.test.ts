import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { liveSubject } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { openTestRuntime, turnRequest, type TestRuntime } from '../helpers/runtime.js';

let nats: TestNats;
let rt: TestRuntime;
let ws: string;
beforeAll(async () => {
  nats = await startTestNats();
  ws = await tempDir('ws');
  rt = await openTestRuntime({ natsUrl: nats.url, script: [{ content: 'one two three four five six' }] });
});
afterAll(async () => {
  await rt.close();
  await nats.stop();
  await rm(ws, { recursive: true, force: true });
});

it('publishes stream deltas live on live.<root>.<actor>, and commits only the accepted output', async () => {
  const sup = rt.supervisor();
  const actorId = newId('agent');
  const deltas: string[] = [];
  const sub = rt.bus.nc.subscribe(liveSubject(actorId, actorId), {
    callback: (_err, msg) => {
      deltas.push((msg.json() as { text: string }).text);
    },
  });
  const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: '/', labels: {} });
  const ended = actor.whenTurnEnds();
  await sup.send({
    id: newId('message'), from: 'test', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: 'count', request: turnRequest(ws), sentAt: new Date().toISOString(),
  });
  expect((await ended).answer).toBe('one two three four five six');
  await rt.bus.nc.flush();
  sub.unsubscribe();
  expect(deltas.length).toBeGreaterThanOrEqual(2);
  expect(deltas.join('')).toBe('one two three four five six');
  const committed = rt.commits.get(actorId)!.flat().map((e) => e.type);
  expect(committed).toContain('assistant/accepted');
  expect(committed.filter((t) => t.includes('delta'))).toEqual([]);
});
