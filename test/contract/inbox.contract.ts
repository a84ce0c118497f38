import { describe, expect, it } from 'vitest';
import type { Inbox, InboxDelivery, InboxPort } from '../../src/bus/inbox-port.js';
import { hasCode } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';

const msg = (to: string, content: string, over: Partial<InboxMessage> = {}): InboxMessage => ({
  id: newId('message'), from: 'test', to, kind: 'user_message', target: 'next_turn', wakeup: true,
  content, request: null, sentAt: new Date().toISOString(), ...over,
});

async function next(inbox: Inbox): Promise<InboxDelivery> {
  const d = await inbox.next({ expiresMs: 5_000 });
  expect(d, 'a delivery').not.toBeNull();
  return d!;
}

/** Resolves with the first value `register` hands its callback, or rejects after `ms`. */
function firstOf<T>(register: (cb: (v: T) => void) => void, ms = 5_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no signal')), ms);
    register((v) => {
      clearTimeout(t);
      resolve(v);
    });
  });
}

/**
 * What every `InboxPort` implementation must do (design §6): dedupe by message ID, delivery in
 * publish order carrying the channel it came in on, each delivery settled once (ack: gone; nak:
 * again; term: gone; fail: again after the backoff, a dead letter on the last delivery; erase:
 * gone from the store), counts,
 * and the mail and claim signals a host listens to. `inboxes()` gives the implementation under test.
 */
export function inboxContract(name: string, inboxes: () => InboxPort): void {
  describe(`inbox contract: ${name}`, () => {
    const opened = async (actorId: string, opts?: Parameters<InboxPort['ensure']>[1]): Promise<Inbox> => {
      await inboxes().ensure(actorId, opts);
      return inboxes().open(actorId);
    };

    it('delivers in publish order, each with the channel it came in on, including mail sent before the consumer', async () => {
      const actorId = newId('agent');
      const sent = [msg(actorId, 'one'), msg(actorId, 'two'), msg(actorId, 'three')];
      await inboxes().publish(sent[0]!, 'person');
      const inbox = await opened(actorId);
      await inboxes().publish(sent[1]!, 'actor');
      await inboxes().publish(sent[2]!, 'person');
      expect(await inbox.counts()).toEqual({ undelivered: 3, unacked: 0 });
      const got: Array<[string, string, number]> = [];
      for (let i = 0; i < 3; i++) {
        const d = await next(inbox);
        got.push([d.message.content, d.channel, d.deliveryCount]);
        await d.ack();
      }
      expect(got).toEqual([['one', 'person', 1], ['two', 'actor', 1], ['three', 'person', 1]]);
      expect(await inbox.pending()).toBe(0);
    });

    it('stores a message ID once: a resend is a duplicate with the first one\'s seq', async () => {
      const actorId = newId('agent');
      const m = msg(actorId, 'once');
      const first = await inboxes().publish(m, 'person');
      const again = await inboxes().publish(m, 'person');
      expect(first.duplicate).toBe(false);
      expect(again).toEqual({ seq: first.seq, duplicate: true });
      const inbox = await opened(actorId);
      expect(await inbox.counts()).toEqual({ undelivered: 1, unacked: 0 });
      await (await next(inbox)).ack();
      expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
    });

    it('erases a delivered message: it is gone from the inbox, never delivered again, and the ack after it settles', async () => {
      const actorId = newId('agent');
      const inbox = await opened(actorId);
      await inboxes().publish(msg(actorId, 'secret'), 'person');
      await inboxes().publish(msg(actorId, 'plain'), 'person');
      const d = await next(inbox);
      expect(d.message.content).toBe('secret');
      await d.erase();
      await d.ack();
      expect(await inbox.counts()).toEqual({ undelivered: 1, unacked: 0 });
      const plain = await next(inbox);
      expect(plain.message.content).toBe('plain');
      await plain.ack();
      expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
    });

    it('refuses a message that is no inbox message', async () => {
      await expect(inboxes().publish({ ...msg(newId('agent'), 'x'), kind: 'nope' } as never, 'person'))
        .rejects.toSatisfy((e) => hasCode(e, 'bus.invalid_message'));
    });

    it('counts a delivery unacked until it is settled; ack settles it for good, a later nak changes nothing', async () => {
      const actorId = newId('agent');
      const inbox = await opened(actorId);
      await inboxes().publish(msg(actorId, 'a'), 'person');
      await inboxes().publish(msg(actorId, 'b'), 'person');
      const d = await next(inbox);
      expect(d.undeliveredAfter).toBe(1);
      expect(await inbox.counts()).toEqual({ undelivered: 1, unacked: 1 });
      await d.ack();
      d.nak();
      expect(await inbox.counts()).toEqual({ undelivered: 1, unacked: 0 });
      const b = await next(inbox);
      expect(b.message.content).toBe('b');
      await b.ack();
      expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
    });

    it('redelivers a nak at once with the next delivery count, and never a term', async () => {
      const actorId = newId('agent');
      const inbox = await opened(actorId);
      const m = msg(actorId, 'again');
      await inboxes().publish(m, 'actor');
      const first = await next(inbox);
      first.nak();
      const second = await next(inbox);
      expect([second.message.id, second.channel, second.deliveryCount]).toEqual([m.id, 'actor', 2]);
      second.term();
      expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
      expect(await inbox.counts()).toEqual({ undelivered: 0, unacked: 0 });
    });

    it('leaves a failed take for its backoff, and makes it a dead letter on the last delivery', async () => {
      const actorId = newId('agent');
      const inbox = await opened(actorId, { maxDeliver: 2, backoffMs: [300] });
      await inboxes().publish(msg(actorId, 'poison'), 'person');
      const first = await next(inbox);
      expect(first.lastDelivery).toBe(false);
      expect(await first.fail(new Error('cannot take it'))).toBe('retry');
      expect(await inbox.counts()).toEqual({ undelivered: 0, unacked: 1 });
      const second = await next(inbox);
      expect([second.deliveryCount, second.lastDelivery]).toEqual([2, true]);
      expect(await second.fail(new Error('cannot take it'))).toBe('dead_letter');
      expect(await inbox.next({ expiresMs: 1_000 })).toBeNull();
      expect(await inbox.counts()).toEqual({ undelivered: 0, unacked: 0 });
    });

    it('refuses more backoff steps than deliveries', async () => {
      await expect(inboxes().ensure(newId('agent'), { maxDeliver: 2, backoffMs: [1, 2] }))
        .rejects.toSatisfy((e) => hasCode(e, 'bus.invalid_consumer'));
    });

    it('signals mail to any inbox to a watcher, until it closes the watch', async () => {
      const actorId = newId('agent');
      const heard: string[] = [];
      const got = firstOf<string>((cb) => {
        void inboxes().watch({ mail: (id) => { heard.push(id); if (id === actorId) cb(id); }, resync: () => {} }).then((w) => {
          watch = w;
          void inboxes().publish(msg(actorId, 'hello'), 'person');
        });
      });
      let watch: { close(): void } | undefined;
      expect(await got).toBe(actorId);
      watch!.close();
      const other = newId('agent');
      await inboxes().publish(msg(other, 'unheard'), 'person');
      await new Promise((r) => setTimeout(r, 200));
      expect(heard).not.toContain(other);
    });

    it('hands claim requests to the hosts watching for them', async () => {
      const actorId = newId('agent');
      let watch: { close(): void } | undefined;
      const got = firstOf<string>((cb) => {
        watch = inboxes().watchClaims((id) => {
          if (id === actorId) cb(id);
        });
      });
      // a core subscription is registered with the server by the next round trip
      await inboxes().ensure(newId('agent'));
      inboxes().requestClaim(actorId);
      expect(await got).toBe(actorId);
      watch!.close();
    });
  });
}
