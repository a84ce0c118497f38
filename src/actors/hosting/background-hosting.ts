import type { ActorEvent } from '../../protocol/events.js';
import { createMemoryJobSlots } from '../../jobs/memory-job-slots.js';
import { createJobScheduler } from '../../jobs/scheduler.js';
import type { ToolingPorts } from '../agent/tooling.js';
import { JobHosting } from './job-hosting.js';
import type { ResourceLeaseStore } from '../../bus/resource-lease-port.js';
import type { InboxConsumerOptions } from '../../bus/inbox-port.js';
import type { ModelAdapter } from '../../model/model-port.js';
import type { TurnSettings } from '../../protocol/events.js';
import type { BlobStore } from '../../store/blob-port.js';
import type { Logger } from 'pino';
import type { FaultInjector } from '../faults/faults.js';
import type { SupervisorPorts } from './supervisor-ports.js';
import { WorkflowHosting } from './workflow-hosting.js';

/** Limits of the background jobs a supervisor hosts (`max_running_jobs`, …); absent ones take the scheduler's defaults. */
export interface JobLimits {
  maxRunningPerHost?: number;
  maxRunningPerTree?: number;
  maxQueued?: number;
  /** How long a job runs when its `start_job` names no timeout. */
  timeoutSeconds?: number;
  /** SIGTERM-to-SIGKILL grace of a job's stop. */
  killGraceMs?: number;
}

/** The supervisor's options background hosting reads (a subset of `SupervisorOptions`). */
export interface BackgroundOptions {
  ports: SupervisorPorts;
  blobs: BlobStore;
  faults: FaultInjector;
  logger: Logger;
  modelFor(settings: TurnSettings, cursor: number): Promise<ModelAdapter>;
  inbox?: InboxConsumerOptions;
  resourceLeases?: ResourceLeaseStore;
  jobLimits?: JobLimits;
  hostId?: string;
}

/** What the background hosting takes of its supervisor besides the options. */
export interface BackgroundDeps {
  tooling: ToolingPorts;
  clock: { nowMs(): number };
  onCommit(actorId: string, events: ActorEvent[]): void;
  /** Makes sure the supervisor's inbox watch is on. */
  listen(): Promise<void>;
}

/**
 * A supervisor's background work (design §11b): the jobs its agents start, under this host's one
 * scheduler (its limits, the tree places shared by the hosts, the resource leases), and the
 * workflow runs whose nodes are jobs. Each is an actor of its own, hosted beside the agents.
 */
export function backgroundHosting(opts: BackgroundOptions, deps: BackgroundDeps): { jobs: JobHosting; workflows: WorkflowHosting } {
  const limits = opts.jobLimits ?? {};
  const hostId = opts.hostId ?? 'local';
  // without a shared store the places are this supervisor's own: exact for the trees it hosts alone
  const slots = opts.ports.jobSlots ?? createMemoryJobSlots();
  const inboxOptions = opts.inbox ? { inboxOptions: opts.inbox } : {};
  const jobs = new JobHosting({
    hostId,
    directory: opts.ports.directory,
    inbox: opts.ports.inbox,
    ...inboxOptions,
    logs: opts.ports.logs,
    live: opts.ports.live,
    blobs: opts.blobs,
    slots,
    ...(opts.resourceLeases ? { resources: opts.resourceLeases } : {}),
    scheduler: createJobScheduler({
      hostId, slots, logger: opts.logger,
      ...(limits.maxRunningPerHost !== undefined ? { maxRunningPerHost: limits.maxRunningPerHost } : {}),
      ...(limits.maxRunningPerTree !== undefined ? { maxRunningPerTree: limits.maxRunningPerTree } : {}),
      ...(limits.maxQueued !== undefined ? { maxQueued: limits.maxQueued } : {}),
    }),
    tooling: deps.tooling,
    faults: opts.faults,
    clock: deps.clock,
    logger: opts.logger,
    ...(limits.killGraceMs !== undefined ? { killGraceMs: limits.killGraceMs } : {}),
    ...(limits.timeoutSeconds !== undefined ? { timeoutSeconds: limits.timeoutSeconds } : {}),
    onCommit: deps.onCommit,
    listen: deps.listen,
  });
  const workflows = new WorkflowHosting({
    directory: opts.ports.directory, inbox: opts.ports.inbox, ...inboxOptions,
    logs: opts.ports.logs, jobs: jobs.port, faults: opts.faults, clock: deps.clock, logger: opts.logger, modelFor: opts.modelFor,
    onCommit: deps.onCommit,
    listen: deps.listen,
  });
  return { jobs, workflows };
}
