import { describe, expect, it } from 'vitest';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { publishInbox } from '../../src/bus/inbox.js';
import { inboxConsumerName, STREAMS } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { actorTestWorld, message, ofType, startTurn, waitForLog } from './harness.js';

const world = actorTestWorld({ nats: true });
const { rts } = world;

const turnEnds = (n: number) => (log: { type: string }[]) => log.filter((e) => e.type === 'turn/end').length >= n;

describe('inbox', () => {
  it('takes a backlog of messages with one look at the consumer\'s counts, whatever its length', async () => {
    const rt = await rts.open({ script: Array.from({ length: 8 }, (_, i) => ({ content: `answer ${i}` })) });
    // the consumer-info requests each actor's inbox reader makes while a host takes its backlog
    const infos = new Map<string, number>();
    const watch = rt.bus.nc.subscribe(`$JS.API.CONSUMER.INFO.${STREAMS.inbox}.>`, {
      callback: (_err, msg) => {
        const consumer = msg.subject.split('.').at(-1)!;
        infos.set(consumer, (infos.get(consumer) ?? 0) + 1);
      },
    });
    try {
      const backlog = async (n: number): Promise<number> => {
        const actorId = newId('agent');
        const first = rt.supervisor();
        await first.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: world.ws, labels: {} });
        await first.stop();
        // mail that arrived while no host held the agent
        for (let i = 0; i < n; i++) await publishInbox(rt.bus.js, message(actorId, `task ${i}`, { request: turnRequest(world.ws) }), 'person');
        const next = rt.supervisor();
        const { actor } = await next.hydrate(actorId);
        const log = await waitForLog(next, actor, (l) => l.filter((e) => e.type === 'inbox/received').length === n);
        expect(ofType(log, 'inbox/received').map((e) => e.data.content)).toEqual(Array.from({ length: n }, (_, i) => `task ${i}`));
        await next.stop();
        await rt.bus.nc.flush();
        return infos.get(inboxConsumerName(actorId)) ?? 0;
      };
      const one = await backlog(1);
      const four = await backlog(4);
      // each taken delivery says how many are left: the counts are asked for once per look, not per message
      expect(one).toBeGreaterThan(0);
      expect(four).toBe(one);
    } finally {
      watch.unsubscribe();
    }
  });

  it('starts one turn for a message sent twice with the same ID', async () => {
    const rt = await rts.open({ script: [{ content: 'first' }, { content: 'second' }, { content: 'third' }] });
    const sup = rt.supervisor();
    const { actor, ended, messageId } = await startTurn(sup, 'hello', turnRequest(world.ws));
    // the same message again: the inbox dedupes by its ID
    const dup = message(actor.actorId, 'hello', { id: messageId as never, request: turnRequest(world.ws) });
    await sup.send(dup);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'first' });
    // a later, distinct message: anything delivered before it has been taken by the time its turn ends
    await sup.send(message(actor.actorId, 'next'));
    const log = await waitForLog(sup, actor, turnEnds(2));
    const received = ofType(log, 'inbox/received');
    expect(received.map((e) => e.data.content)).toEqual(['hello', 'next']);
    expect(received[0]!.data.messageId).toBe(messageId);
    expect(ofType(log, 'turn/start').map((e) => e.data.messageIds)).toEqual([[messageId], [received[1]!.data.messageId]]);
    expect(ofType(log, 'turn/end').map((e) => e.data.answer)).toEqual(['first', 'second']);
    const violations = verifyLog(log, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });

  it('takes a redelivered message that is already in the log without a new event', async () => {
    const rt = await rts.open({ script: [{ content: 'first' }] });
    const sup = rt.supervisor();
    const { actor, ended, messageId } = await startTurn(sup, 'hello', turnRequest(world.ws));
    await ended;
    const before = await readLog(sup, actor.rootId, actor.actorId);
    // as after a lost ack: the same message delivered to the actor again
    await actor.receive(message(actor.actorId, 'hello', { id: messageId as never, request: turnRequest(world.ws) }));
    await actor.idle();
    expect(await readLog(sup, actor.rootId, actor.actorId)).toEqual(before);
    expect(actor.projection.inbox[messageId]).toMatchObject({ state: 'included', content: '' });
  });

  it('starts a follow-up sent during a turn as the next turn once the first ends', async () => {
    const rt = await rts.open({ script: [{ content: 'first answer', delay_ms: 500 }, { content: 'follow-up answer' }] });
    const sup = rt.supervisor();
    const { actor, ended, messageId } = await startTurn(sup, 'first question', turnRequest(world.ws));
    await waitForLog(sup, actor, (l) => l.some((e) => e.type === 'attempt/start'));
    const followUp = message(actor.actorId, 'and then?', { kind: 'follow_up' });
    await sup.send(followUp);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'first answer' });
    const log = await waitForLog(sup, actor, turnEnds(2));

    // received while the first turn ran, claimed only after it ended
    const received = ofType(log, 'inbox/received');
    expect(received.map((e) => e.data.messageId)).toEqual([messageId, followUp.id]);
    const [firstEnd] = ofType(log, 'turn/end');
    expect(received[1]!.seq).toBeLessThan(firstEnd!.seq);
    const starts = ofType(log, 'turn/start');
    expect(starts.map((s) => s.data.source)).toEqual(['user_message', 'follow_up']);
    expect(starts[1]!.data.messageIds).toEqual([followUp.id]);
    expect(starts[1]!.seq).toBeGreaterThan(firstEnd!.seq);
    // a follow-up without a request runs with the last turn's settings
    expect(starts[1]!.data.settings).toMatchObject({ ...starts[0]!.data.settings, budgets: { ...starts[0]!.data.settings.budgets, deadlineAt: null } });
    expect(ofType(log, 'turn/end').map((e) => e.data.answer)).toEqual(['first answer', 'follow-up answer']);
    // the second turn's request holds the whole conversation
    const userMessages = ofType(log, 'user/message').map((e) => e.data.content);
    expect(userMessages).toEqual(['first question', 'and then?']);
    expect(actor.projection.history.map((h) => h.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    const violations = verifyLog(log, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });
});
