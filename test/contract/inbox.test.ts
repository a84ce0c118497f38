import { describe, expect, it } from 'vitest';
import { createJetStreamInboxes } from '../../src/bus/inbox.js';
import type { InboxPort } from '../../src/bus/inbox-port.js';
import { createMemoryInboxes } from '../../src/bus/memory-inbox.js';
import { BusError } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';
import { message } from '../actors/harness.js';
import { useTestBus } from '../helpers/test-bus.js';
import { inboxContract } from './inbox.contract.js';

const memory = createMemoryInboxes();
inboxContract('memory', () => memory);

const nats = useTestBus();
let jetStream: InboxPort | undefined;
inboxContract('JetStream', () =>
  (jetStream ??= createJetStreamInboxes({ nc: nats.bus.nc, js: nats.bus.js, jsm: nats.bus.jsm, person: () => nats.bus.person() })));

describe('memory inboxes, besides the contract', () => {
  it('keep what they gave up on, for a test to read as `dlq list` would', async () => {
    const inboxes = createMemoryInboxes();
    const actorId = newId('agent');
    await inboxes.ensure(actorId, { maxDeliver: 1, backoffMs: [] });
    const inbox = await inboxes.open(actorId);
    const m = message(actorId, 'poison');
    await inboxes.publish(m, 'actor');
    const d = await inbox.next({ expiresMs: 1_000 });
    expect(await d!.fail(new BusError('bus.test', 'refused'))).toBe('dead_letter');
    expect(inboxes.deadLetters()).toEqual([
      { actorId, messageId: m.id, inboxSeq: 1, deliveries: 1, error: { code: 'bus.test', message: 'refused' } },
    ]);
  });
});
