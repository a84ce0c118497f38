import { PermissionViolationError } from '@nats-io/nats-core';
import { describe, expect, it } from 'vitest';
import { listDeadLetters } from '../../src/bus/dead-letters.js';
import { ensureInboxConsumer, openInbox, publishInbox } from '../../src/bus/inbox.js';
import { inboxConsumerName, inboxFilter, inboxSubject, STREAMS } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import { useTestBus } from '../helpers/test-bus.js';

function message(to: string, content: string): InboxMessage {
  return {
    id: newId('message'), from: 'user', to, kind: 'user_message', target: 'next_turn', wakeup: true,
    content, request: null, sentAt: new Date().toISOString(),
  };
}

describe('inbox', () => {
  const t = useTestBus();

  it('stores a message published twice with the same ID once', async () => {
    const actor = newId('agent');
    const msg = message(actor, 'hello');
    const first = await publishInbox(t.bus.js, msg, 'person');
    const second = await publishInbox(t.bus.js, msg, 'person');
    expect(first.duplicate).toBe(false);
    expect(second).toEqual({ seq: first.seq, duplicate: true });
    const info = await t.bus.jsm.streams.info(STREAMS.inbox, { subjects_filter: inboxSubject(actor, 'person') });
    expect(info.state.subjects?.[inboxSubject(actor, 'person')]).toBe(1);
  });

  it('sets up a consumer through unanswered adds (a busy meta leader): the one an unanswered add made is found, a refusal is final', async () => {
    const actor = newId('agent');
    // the server's own jsm, whose first add is made but its answer lost, and whose second times out
    const add = t.bus.jsm.consumers.add.bind(t.bus.jsm.consumers);
    let calls = 0;
    const jsm = Object.create(t.bus.jsm) as typeof t.bus.jsm;
    Object.defineProperty(jsm, 'consumers', { value: Object.create(t.bus.jsm.consumers) });
    jsm.consumers.add = async (stream, cfg) => {
      calls++;
      if (calls === 1) {
        await add(stream, cfg);
        throw new Error('TIMEOUT');
      }
      return add(stream, cfg);
    };
    await ensureInboxConsumer(jsm, actor);
    // made once, found by the retry's look: no second add
    expect(calls).toBe(1);
    expect((await t.bus.jsm.consumers.info(STREAMS.inbox, inboxConsumerName(actor))).config.filter_subject).toBe(inboxFilter(actor));
    const refusing = Object.create(t.bus.jsm) as typeof t.bus.jsm;
    Object.defineProperty(refusing, 'consumers', { value: Object.create(t.bus.jsm.consumers) });
    refusing.consumers.add = async () => {
      throw new PermissionViolationError('Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.INBOX"', 'publish', '$JS.API.CONSUMER.CREATE.INBOX');
    };
    const started = Date.now();
    await expect(ensureInboxConsumer(refusing, newId('agent'))).rejects.toMatchObject({ code: 'bus.consumer_failed' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('refuses an invalid message before publishing it', async () => {
    const bad = { ...message(newId('agent'), 'x'), id: 'not-a-msg-id' };
    await expect(publishInbox(t.bus.js, bad, 'person')).rejects.toMatchObject({ code: 'bus.invalid_message' });
  });

  it('delivers, redelivers after nak, and forgets after ack', async () => {
    const actor = newId('agent');
    const inbox = await openInbox(t.bus.js, t.bus.jsm, actor, { consumer: { backoffMs: [] } });
    expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();

    const msg = message(actor, 'work');
    await publishInbox(t.bus.js, msg, 'person');
    expect(await inbox.pending()).toBe(1);
    const d1 = await inbox.next({ expiresMs: 2_000 });
    expect(d1?.message).toEqual(msg);
    expect(d1?.deliveryCount).toBe(1);
    d1!.nak();

    const d2 = await inbox.next({ expiresMs: 2_000 });
    expect(d2?.message.id).toBe(msg.id);
    expect(d2?.deliveryCount).toBe(2);
    await d2!.ack();
    expect(await inbox.pending()).toBe(0);
    expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
  });

  it('sets invalid messages aside, keeps reading, and dead-letters them after max_deliver', async () => {
    const actor = newId('agent');
    const inbox = await openInbox(t.bus.js, t.bus.jsm, actor, { consumer: { maxDeliver: 2, backoffMs: [300] } });
    await t.bus.js.publish(inboxSubject(actor, 'person'), '{"not":"an inbox message"}');
    await t.bus.js.publish(inboxSubject(actor, 'person'), 'not even json');
    const good = message(actor, 'after the junk');
    await publishInbox(t.bus.js, good, 'person');
    const d = await inbox.next({ expiresMs: 3_000 });
    expect(d?.message).toEqual(good);
    await d!.ack();
    // their redeliveries are the last: recorded as dead letters and terminated, never returned
    expect(await inbox.next({ expiresMs: 1_500 })).toBeNull();
    expect(await inbox.pending()).toBe(0);
    const letters = await listDeadLetters(t.bus, { actorId: actor });
    expect(letters.map((l) => [l.deliveries, l.error.code])).toEqual([[2, 'inbox.invalid_message'], [2, 'inbox.invalid_message']]);
  });

  it('creates the durable consumer as specified, idempotently', async () => {
    const actor = newId('agent');
    await ensureInboxConsumer(t.bus.jsm, actor, { maxDeliver: 4, backoffMs: [1_000, 2_000] });
    await ensureInboxConsumer(t.bus.jsm, actor, { maxDeliver: 4, backoffMs: [1_000, 2_000] });
    const info = await t.bus.jsm.consumers.info(STREAMS.inbox, inboxConsumerName(actor));
    expect(info.config.durable_name).toBe(inboxConsumerName(actor));
    expect(info.config.filter_subject).toBe(inboxFilter(actor));
    expect(info.config.ack_policy).toBe('explicit');
    expect(info.config.max_deliver).toBe(4);
    expect(info.config.backoff).toEqual([1e9, 2e9]);

    await ensureInboxConsumer(t.bus.jsm, actor, { maxDeliver: 6, backoffMs: [1_000] });
    const updated = await t.bus.jsm.consumers.info(STREAMS.inbox, inboxConsumerName(actor));
    expect(updated.config.max_deliver).toBe(6);
    expect(updated.config.backoff).toEqual([1e9]);

    await expect(ensureInboxConsumer(t.bus.jsm, actor, { maxDeliver: 2, backoffMs: [1, 2, 3] }))
      .rejects.toMatchObject({ code: 'bus.invalid_consumer' });
  });
});
