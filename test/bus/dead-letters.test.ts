// Inbox delivery hardening on a real nats-server: a message is included once however often it
// comes (lost ack, re-publish), a message that cannot be taken is retried with backoff and then
// becomes a dead letter (never dropped silently), and a dead letter can be sent again.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFaultInjector, type FaultInjector } from '../../src/actors/faults/faults.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { openBus, type Bus } from '../../src/bus/connection.js';
import { listDeadLetters, redriveDeadLetter, type DeadLetter } from '../../src/bus/dead-letters.js';
import { openInbox, publishInbox } from '../../src/bus/inbox.js';
import { inboxSubject } from '../../src/bus/subjects.js';
import { ActorloopError } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';
import { actorTestWorld, message, ofType, startTurn, waitForLog } from '../actors/harness.js';
import { turnRequest } from '../helpers/runtime.js';

const world = actorTestWorld({ nats: true });
const { rts } = world;
// a bus of the test's own, for what it publishes and reads besides the runtimes
let bus: Bus;
beforeAll(async () => {
  bus = await openBus({ natsUrl: world.natsUrl, dataDir: world.nats.storeDir, logger: pino({ level: 'silent' }) });
});
afterAll(async () => {
  await bus?.close();
});

const text = (data: Uint8Array) => new TextDecoder().decode(data);

/** Polls until `done` holds (the timeout fails the test). */
async function eventually<T>(what: string, fn: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (done(v)) return v;
    if (Date.now() > until) throw new Error(`${what} never happened; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const lettersOf = (actorId: string, includeRedriven = false) => listDeadLetters(bus, { actorId, includeRedriven });
const oneLetter = (actorId: string) => eventually(`a dead letter for ${actorId}`, () => lettersOf(actorId), (l) => l.length === 1)
  .then((l) => l[0]!);
const settled = (actorId: string) =>
  eventually('every inbox message settled', async () => (await openInbox(bus.js, bus.jsm, actorId, { ensured: true })).counts(),
    (c) => c.undelivered === 0 && c.unacked === 0);

describe('dead letters of an inbox reader', () => {
  it('retries an undecodable message with backoff, then records its bytes as a dead letter; the rest flows', async () => {
    const actorId = newId('agent');
    const inbox = await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 2, backoffMs: [300] } });
    await bus.js.publish(inboxSubject(actorId, 'person'), 'not even json', { msgID: 'raw-1' });
    const good = message(actorId, 'after the junk');
    await publishInbox(bus.js, good, 'person');

    // the junk is set aside (unacked, for its backoff), the good message comes
    const d = await inbox.next({ expiresMs: 3_000 });
    expect(d?.message).toEqual(good);
    await d!.ack();
    // its redelivery is the last one: recorded and terminated inside `next`, which finds nothing else
    expect(await inbox.next({ expiresMs: 2_000 })).toBeNull();

    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: 'raw-1', actorId, deliveries: 2, source: 'host', redriven: null, error: { code: 'inbox.invalid_message' } });
    expect(text(letter.data)).toBe('not even json');
    await settled(actorId);
  });

  it('makes a take that fails on every delivery a dead letter on the last one, with the error', async () => {
    const actorId = newId('agent');
    const inbox = await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 3, backoffMs: [200, 300] } });
    const msg = message(actorId, 'cannot be taken');
    await publishInbox(bus.js, msg, 'person');
    const outcomes: string[] = [];
    for (let i = 1; i <= 3; i++) {
      const d = await inbox.next({ expiresMs: 3_000 });
      expect(d).toMatchObject({ deliveryCount: i, lastDelivery: i === 3, message: { id: msg.id } });
      outcomes.push(await d!.fail(new ActorloopError('actor.busy', `attempt ${i}\nfailed`)));
    }
    expect(outcomes).toEqual(['retry', 'retry', 'dead_letter']);
    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: msg.id, deliveries: 3, source: 'host', error: { code: 'actor.busy', message: 'attempt 3 failed' } });
    expect(JSON.parse(text(letter.data))).toEqual(msg);
    expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
    await settled(actorId);
  });

  it('lists a message the server gave up on with no host recording it (the max-deliveries advisory)', async () => {
    const actorId = newId('agent');
    const inbox = await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 2, backoffMs: [200] } });
    const msg = message(actorId, 'its host died on the last delivery');
    await publishInbox(bus.js, msg, 'person');
    // two deliveries nobody settles, as from hosts that died; the next pull makes the server give up
    expect((await inbox.next({ expiresMs: 2_000 }))?.deliveryCount).toBe(1);
    expect((await inbox.next({ expiresMs: 2_000 }))?.deliveryCount).toBe(2);
    expect(await inbox.next({ expiresMs: 1_500 })).toBeNull();

    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: msg.id, deliveries: 2, source: 'advisory', error: { code: 'inbox.unsettled' } });
    expect(JSON.parse(text(letter.data))).toEqual(msg);
  });

  it('lists a message once when its host recorded it after the server gave up', async () => {
    const actorId = newId('agent');
    const inbox = await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 1, backoffMs: [], ackWaitMs: 300 } });
    const msg = message(actorId, 'slow last delivery');
    await publishInbox(bus.js, msg, 'person');
    const d = await inbox.next({ expiresMs: 2_000 });
    // past its ack wait, a pull makes the server give up (advisory) before the host records it
    await new Promise((r) => setTimeout(r, 500));
    expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
    expect(await d!.fail(new Error('too slow'))).toBe('dead_letter');
    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: msg.id, source: 'host', error: { message: 'too slow' } });
  });
});

describe('redrive', () => {
  async function deadLetterOf(actorId: string, content: string): Promise<{ letter: DeadLetter; msg: ReturnType<typeof message> }> {
    const inbox = await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 1, backoffMs: [] } });
    const msg = message(actorId, content);
    await publishInbox(bus.js, msg, 'person');
    const d = await inbox.next({ expiresMs: 2_000 });
    expect(await d!.fail(new Error('no host could take it'))).toBe('dead_letter');
    return { letter: await oneLetter(actorId), msg };
  }

  it('sends it again within the duplicate window, keeping its ID, and marks it redriven', async () => {
    const actorId = newId('agent');
    const { letter, msg } = await deadLetterOf(actorId, 'take me later');
    const r = await redriveDeadLetter(bus, msg.id);
    // the original's Nats-Msg-Id is still in the 10-minute window: a new one got it stored
    expect(r).toMatchObject({ duplicate: false, message: msg, letter: { seq: letter.seq } });
    expect(r.inboxSeq).toBeGreaterThan(letter.inboxSeq);

    const inbox = await openInbox(bus.js, bus.jsm, actorId, { ensured: true });
    const again = await inbox.next({ expiresMs: 2_000 });
    expect(again?.message).toEqual(msg);
    await again!.ack();

    expect(await lettersOf(actorId)).toEqual([]);
    const all = await lettersOf(actorId, true);
    expect(all).toHaveLength(1);
    expect(all[0]!.redriven).toMatchObject({ inboxSeq: r.inboxSeq });
    await expect(redriveDeadLetter(bus, msg.id)).rejects.toMatchObject({ code: 'dlq.already_redriven', name: 'ConfigError' });
  });

  it('refuses an unknown ID, and bytes that would fail again', async () => {
    await expect(redriveDeadLetter(bus, newId('message'))).rejects.toMatchObject({ code: 'dlq.not_found', name: 'NotFoundError' });
    const actorId = newId('agent');
    await openInbox(bus.js, bus.jsm, actorId, { consumer: { maxDeliver: 1, backoffMs: [] } }).then((i) => i.next({ expiresMs: 1_000 }));
    await bus.js.publish(inboxSubject(actorId, 'person'), '{"id":"junk-1"}');
    await eventually('the junk dead-lettered', async () => {
      await (await openInbox(bus.js, bus.jsm, actorId, { ensured: true })).next({ expiresMs: 1_000 });
      return lettersOf(actorId);
    }, (l) => l.length === 1);
    await expect(redriveDeadLetter(bus, 'junk-1')).rejects.toMatchObject({ code: 'dlq.not_redrivable', name: 'ConfigError' });
  });
});

describe('inbox delivery through a supervisor', () => {
  const turnEnds = (n: number) => (log: { type: string }[]) => log.filter((e) => e.type === 'turn/end').length >= n;

  it('includes a message once when its ack is lost: the next host acks and drops the redelivery', async () => {
    const rt = await rts.open({ script: [{ content: 'done' }] });
    // the first host commits inbox/received, then stops before acking (as a crash would)
    const first = rt.supervisor({ faults: createFaultInjector([{ point: 'before:inbox-ack', actorId: null, nth: 1, action: 'drop' }]) });
    const { actor, messageId } = await startTurn(first, 'hello', turnRequest(world.ws));
    await eventually('the first host dropped', async () => actor.failed !== null, Boolean);
    await first.stop();

    const second = rt.supervisor();
    const { actor: again } = await second.hydrate(actor.actorId);
    const log = await waitForLog(second, again, turnEnds(1));
    await settled(actor.actorId);
    expect(ofType(log, 'inbox/received').map((e) => e.data.messageId)).toEqual([messageId]);
    expect(ofType(log, 'turn/start')).toHaveLength(1);
    const violations = verifyLog(log, { complete: true });
    expect(violations, formatViolations(violations)).toEqual([]);
  });

  it('includes a message re-published with its ID once, even when the stream stores it twice', async () => {
    const rt = await rts.open({ script: [{ content: 'first' }, { content: 'second' }] });
    const sup = rt.supervisor();
    const { actor, ended, messageId } = await startTurn(sup, 'hello', turnRequest(world.ws));
    await ended;
    const before = (await waitForLog(sup, actor, turnEnds(1))).length;
    // past the 10-minute duplicate window (or from a redrive) the stream keeps a second copy
    const copy = message(actor.actorId, 'hello', { id: messageId as never, request: turnRequest(world.ws) });
    const stored = await bus.js.publish(inboxSubject(actor.actorId, 'person'), JSON.stringify(copy), { msgID: `${messageId}:again` });
    expect(stored.duplicate).toBe(false);
    await settled(actor.actorId);
    const log = await waitForLog(sup, actor, () => true);
    expect(log).toHaveLength(before);
    expect(ofType(log, 'inbox/received').map((e) => e.data.messageId)).toEqual([messageId]);
  });

  it('dead-letters a poison message after max_deliver while the actor keeps working', async () => {
    const rt = await rts.open({ script: [{ content: 'still here' }] });
    const sup = rt.supervisor({ extra: { inbox: { maxDeliver: 2, backoffMs: [300] } } });
    const actorId = newId('agent');
    const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: world.ws, labels: {} });
    await bus.js.publish(inboxSubject(actorId, 'person'), '{"kind":"user_message","content":"no id, no sender"}', { msgID: 'poison-1' });
    const ended = actor.whenTurnEnds();
    await sup.send(message(actorId, 'a real task', { request: turnRequest(world.ws) }));
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'still here' });

    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: 'poison-1', deliveries: 2, source: 'host', error: { code: 'inbox.invalid_message' } });
    await settled(actorId);
    expect(ofType(await waitForLog(sup, actor, () => true), 'inbox/received')).toHaveLength(1);
  });

  it('dead-letters a poison message waiting ahead of a real one in a backlog a host takes on', async () => {
    const rt = await rts.open({ script: [{ content: 'took the backlog' }] });
    const inbox = { maxDeliver: 2, backoffMs: [300] };
    const actorId = newId('agent');
    const first = rt.supervisor({ extra: { inbox } });
    await first.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: world.ws, labels: {} });
    await first.stop();
    // both wait while no host holds the agent: the pull that sets the poison aside gets the real one
    await bus.js.publish(inboxSubject(actorId, 'person'), '{"kind":"user_message","content":"no id, no sender"}', { msgID: 'poison-backlog' });
    await publishInbox(bus.js, message(actorId, 'the real task', { request: turnRequest(world.ws) }), 'person');
    const next = rt.supervisor({ extra: { inbox } });
    const { actor } = await next.hydrate(actorId);
    await waitForLog(next, actor, (l) => l.some((e) => e.type === 'turn/end'));
    // the poison was set aside unacked: the host must look again to pull its last delivery
    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: 'poison-backlog', deliveries: 2, source: 'host', error: { code: 'inbox.invalid_message' } });
    await settled(actorId);
  });

  it('dead-letters a message whose take throws every time, and takes it once redriven', async () => {
    let failing = true;
    const faults: FaultInjector = {
      hit(point) {
        if (point === 'before:inbox-receive' && failing) throw new Error('the actor cannot take mail now');
      },
    };
    const rt = await rts.open({ script: [{ content: 'taken at last' }] });
    const sup = rt.supervisor({ faults, extra: { inbox: { maxDeliver: 2, backoffMs: [200] } } });
    const actorId = newId('agent');
    const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 't', workspace: world.ws, labels: {} });
    const msg = message(actorId, 'do it', { request: turnRequest(world.ws) });
    await sup.send(msg);

    const letter = await oneLetter(actorId);
    expect(letter).toMatchObject({ id: msg.id, deliveries: 2, error: { code: 'inbox.take_failed', message: 'the actor cannot take mail now' } });
    await settled(actorId);
    expect(actor.failed).toBeNull();

    failing = false;
    const ended = actor.whenTurnEnds();
    await redriveDeadLetter(bus, msg.id);
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'taken at last' });
    const log = await waitForLog(sup, actor, turnEnds(1));
    expect(ofType(log, 'inbox/received').map((e) => e.data.messageId)).toEqual([msg.id]);
    expect(await lettersOf(actorId)).toEqual([]);
  });
});
