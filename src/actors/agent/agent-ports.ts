import type { JobPort } from './job-port.js';
import type { WorkflowPort } from './workflow-port.js';
import type { Logger } from 'pino';
import type { ActorEvent, TurnSettings } from '../../protocol/events.js';
import type { ModelAdapter, ModelStreamEvent } from '../../model/model-port.js';
import type { Price } from '../../model/pricing.js';
import type { BlobStore } from '../../store/blob-port.js';
import type { ActorLogWriter } from '../../store/log-port.js';
import type { SnapshotStore } from '../../store/snapshots.js';
import type { ToolRegistry } from '../../tools/registry.js';
import type { FaultInjector } from '../faults/faults.js';
import type { ToolingPorts } from './tooling.js';
import type { SubagentPort } from './subagent-port.js';
import type { ResourceLeaseStore } from '../../bus/resource-lease-port.js';
import type { FindBlobNaming } from './missing-blob.js';

/** The ports an agent actor acts through (design §2): everything outside the machines. */
export interface AgentPorts {
  log: ActorLogWriter;
  blobs: BlobStore;
  snapshots: SnapshotStore | null;
  tools: ToolRegistry;
  /** Policy rules, sandbox, secrets and budgets of the tool pipeline. */
  tooling: ToolingPorts;
  /** Builds the model adapter for a turn; `cursor` is how many responses the log says were consumed. */
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  /** Time; `sleep` (optional) waits on this clock, so retry backoff follows a fake clock in tests. */
  clock: { nowMs(): number; sleep?(ms: number, signal: AbortSignal): Promise<void> };
  /** The price of a model, for the cost of each attempt; null (or absent): unknown. */
  pricing?(model: string): Price | null;
  faults: FaultInjector;
  logger: Logger;
  /** Called with each commit once JetStream acknowledged it. */
  onCommit?(events: ActorEvent[]): void;
  /** Called with live stream deltas of a model attempt (never committed). */
  onDelta?(delta: ModelStreamEvent): void;
  /** Called once when this incarnation stops or fails: its log writer stops retrying commits. */
  onHalt?(): void;
  /** Other actors of the tree: children it creates, inboxes it writes to (absent: this runtime hosts no subagents). */
  subagents?: SubagentPort;
  /** Background jobs it starts (absent: this runtime runs none, and the job tools answer so). */
  jobs?: JobPort;
  /** Workflow runs it starts (absent: this runtime hosts none, and start_workflow answers so). */
  workflows?: WorkflowPort;
  /** Leases ordering conflicting calls across the agents of a tree (absent: each agent orders only its own calls). */
  resourceLeases?: ResourceLeaseStore;
  /** Finds the event of this agent's log that names a blob, for the error of a missing one (absent: the error names the digest only). */
  blobNaming?: FindBlobNaming;
}
