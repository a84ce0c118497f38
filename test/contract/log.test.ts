import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import type { ActorLogs } from '../../src/store/log-port.js';
import { createMemoryLogs } from '../../src/store/memory-log.js';
import { useTestBus } from '../helpers/test-bus.js';
import { logContract } from './log.contract.js';

const memory = createMemoryLogs();
logContract('memory', () => memory);

const nats = useTestBus();
let jetStream: ActorLogs | undefined;
logContract('JetStream', () => (jetStream ??= createJetStreamLogs({ publisher: nats.bus.logJs, js: nats.bus.js, jsm: nats.bus.jsm })));
