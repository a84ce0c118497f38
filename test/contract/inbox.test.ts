import { createJetStreamInboxes } from '../../src/bus/inbox.js';
import type { InboxPort } from '../../src/bus/inbox-port.js';
import { createMemoryInboxes } from '../../src/bus/memory-inbox.js';
import { useTestBus } from '../helpers/test-bus.js';
import { inboxContract } from './inbox.contract.js';

const memory = createMemoryInboxes();
inboxContract('memory', () => memory);

const nats = useTestBus();
let jetStream: InboxPort | undefined;
inboxContract('JetStream', () =>
  (jetStream ??= createJetStreamInboxes({ nc: nats.bus.nc, js: nats.bus.js, jsm: nats.bus.jsm, person: () => nats.bus.person() })));
