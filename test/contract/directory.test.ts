import { createMemoryDirectory } from '../../src/bus/memory-directory.js';
import { useTestBus } from '../helpers/test-bus.js';
import { directoryContract } from './directory.contract.js';

const memory = createMemoryDirectory();
directoryContract('memory', () => memory);

const nats = useTestBus();
directoryContract('JetStream KV', () => nats.bus.directory);
