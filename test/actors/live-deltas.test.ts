import { expect, it } from 'vitest';
import { liveSubject } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { turnRequest } from '../helpers/runtime.js';
import { actorTestWorld } from './harness.js';

// live deltas are core NATS messages: a real server
const world = actorTestWorld({ nats: true });
const file = world.shared(() => ({ script: [{ content: 'one two three four five six' }] }));

it('publishes stream deltas live on live.<root>.<actor>, and commits only the accepted output', async () => {
  const { rt } = file;
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
    content: 'count', request: turnRequest(world.ws), sentAt: new Date().toISOString(),
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
