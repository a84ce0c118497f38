import type { Bus } from '../../bus/connection.js';
import type { ActorDirectory } from '../../bus/directory.js';
import { createJetStreamInboxes } from '../../bus/inbox.js';
import type { InboxPort } from '../../bus/inbox-port.js';
import type { LivePublisher } from '../../bus/log-publisher.js';
import { createMemoryDirectory } from '../../bus/memory-directory.js';
import { createMemoryInboxes, type MemoryInboxes } from '../../bus/memory-inbox.js';
import { createMemoryTreeSlots } from '../../bus/memory-tree-slots.js';
import { createKvTreeSlots, type TreeSlotStore } from '../../bus/tree-slots.js';
import { createJetStreamLogs } from '../../store/jetstream-log.js';
import type { ActorLogs } from '../../store/log-port.js';
import type { JobSlotStore } from '../../jobs/job-slot-port.js';
import { createKvJobSlots } from '../../jobs/kv-job-slots.js';
import { createMemoryJobSlots } from '../../jobs/memory-job-slots.js';
import { createMemoryLogs, type MemoryLogs } from '../../store/memory-log.js';

/** The I/O a supervisor hosts agents on: inboxes and their signals, the directory, the logs, live deltas. */
export interface SupervisorPorts {
  inbox: InboxPort;
  directory: ActorDirectory;
  logs: ActorLogs;
  /** Model deltas for live watchers (never persisted, best effort). */
  live: LivePublisher;
  /** The places of trees (`max_children_per_tree`), shared by every host; absent: each supervisor counts its own. */
  treeSlots?: TreeSlotStore;
  /** The job places of trees (`max_running_jobs_per_tree`), shared by every host; absent: each supervisor counts its own. */
  jobSlots?: JobSlotStore;
}

/** The ports over an open bus: the INBOX stream, KV `actors`, the LOGS stream, core NATS live messages, KV `tree_slots`. */
export function createJetStreamPorts(bus: Bus): SupervisorPorts {
  return {
    inbox: createJetStreamInboxes({ nc: bus.nc, js: bus.js, jsm: bus.jsm, person: () => bus.person() }),
    directory: bus.directory,
    logs: createJetStreamLogs({ publisher: bus.logJs, js: bus.js, jsm: bus.jsm }),
    live: bus.live,
    // the bucket is made on the first spawn: a command that hosts no tree never touches it
    treeSlots: createKvTreeSlots({ js: bus.js }),
    jobSlots: createKvJobSlots({ js: bus.js }),
  };
}

/** In-memory ports, with what tests look at besides the ports. */
export interface MemoryPorts extends SupervisorPorts {
  inbox: MemoryInboxes;
  logs: MemoryLogs;
}

/**
 * Ports in this process's memory, for tests and embedders that need no NATS: supervisors given
 * the same ports share inboxes, directory and logs, as hosts on one server do. Live deltas go
 * nowhere (a supervisor's `onDelta` still sees them).
 */
export function createMemoryPorts(): MemoryPorts {
  return {
    inbox: createMemoryInboxes(),
    directory: createMemoryDirectory(),
    logs: createMemoryLogs(),
    live: { publish: () => {}, flush: () => {} },
    treeSlots: createMemoryTreeSlots(),
    jobSlots: createMemoryJobSlots(),
  };
}
