import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Mailbox } from '../../src/actors/hosting/mailbox.js';
import { createMemoryInboxes } from '../../src/bus/memory-inbox.js';
import { newId } from '../../src/protocol/ids.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';

const logger = pino({ level: 'silent' });

function cancel(to: string): InboxMessage {
  return { id: newId('message'), from: 'client:cli', to, kind: 'interrupt', target: 'now', wakeup: true, content: 'interrupted', request: null, sentAt: new Date().toISOString() };
}

describe('a background actor\'s mailbox', () => {
  it('takes each message once, in order, and acks it after its receipt', async () => {
    const inbox = createMemoryInboxes();
    const id = newId('job');
    await inbox.ensure(id, { maxDeliver: 5, backoffMs: [100] });
    const got: string[] = [];
    const box = new Mailbox({ inbox, logger, id, live: () => true, receive: async (m) => void got.push(m.id) });
    const a = cancel(id);
    const b = cancel(id);
    await inbox.publish(a, 'person');
    await inbox.publish(b, 'person');
    box.wake();
    await until(() => got.length === 2);
    expect(got).toEqual([a.id, b.id]);
    const opened = await inbox.open(id, { logger });
    await until(async () => (await opened.counts()).unacked === 0);
    expect(await opened.counts()).toEqual({ undelivered: 0, unacked: 0 });
    box.close();
  });

  it('a take that failed is looked at again after its backoff, with no new mail to wake it', async () => {
    const inbox = createMemoryInboxes();
    const id = newId('job');
    await inbox.ensure(id, { maxDeliver: 5, backoffMs: [200] });
    let tries = 0;
    const box = new Mailbox({
      inbox, logger, id, live: () => true,
      receive: async () => {
        tries += 1;
        if (tries === 1) throw new Error('the log was away');
      },
    });
    await inbox.publish(cancel(id), 'person');
    box.wake();
    await until(() => tries === 2, 5_000);
    const opened = await inbox.open(id, { logger });
    await until(async () => (await opened.counts()).unacked === 0);
    box.close();
  });

  it('reads nothing once its actor is no longer hosted', async () => {
    const inbox = createMemoryInboxes();
    const id = newId('job');
    await inbox.ensure(id, { maxDeliver: 5, backoffMs: [100] });
    let got = 0;
    const box = new Mailbox({ inbox, logger, id, live: () => false, receive: async () => void (got += 1) });
    await inbox.publish(cancel(id), 'person');
    box.wake();
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toBe(0);
  });
});

async function until(cond: () => boolean | Promise<boolean>, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
