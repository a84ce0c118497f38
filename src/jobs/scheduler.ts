import { pino, type Logger } from 'pino';
import { ActorloopError } from '../protocol/errors.js';
import { DEFAULT_JOB_LIMITS } from '../protocol/job-events.js';
import type { JobSlotStore } from './job-slot-port.js';

// The one place that limits how much runs at once (design §6a, §11b): a host runs at most
// `maxRunningPerHost` jobs, a tree at most `maxRunningPerTree` across every host, and what waits
// stands in one FIFO queue whose positions clients show. The per-host count is this process's
// memory (a host is one process); the per-tree count is the `JobSlotStore`, shared by the hosts.
// Work is granted in queue order, except that a job whose tree is full lets the jobs behind it
// of other trees pass: one busy tree does not stall the host. Nothing here is specific to
// jobs but the names: a foreground tool call can take a slot the same way.

/** Jobs one host runs at once. */
export const DEFAULT_MAX_RUNNING_JOBS = DEFAULT_JOB_LIMITS.maxRunningPerHost;
/** Jobs one tree runs at once, across every host. */
export const DEFAULT_MAX_RUNNING_JOBS_PER_TREE = DEFAULT_JOB_LIMITS.maxRunningPerTree;
/** Jobs one host keeps waiting; an acquire beyond it is refused at once. */
export const DEFAULT_MAX_QUEUED_JOBS = DEFAULT_JOB_LIMITS.maxQueued;
/** How often a job waiting for a tree full with jobs of other hosts asks again. */
export const DEFAULT_TREE_RETRY_MS = 1_000;

/** Error codes of the scheduler. */
export const SCHEDULER_CODES = {
  queueFull: 'jobs.queue_full',
  aborted: 'jobs.acquire_aborted',
  duplicate: 'jobs.already_scheduled',
  closed: 'jobs.scheduler_closed',
} as const;

/** An acquire the scheduler refused or gave up; `code` is one of SCHEDULER_CODES, or the slot store's. */
export class SchedulerError extends ActorloopError {}

/** Limits and ports of a scheduler. */
export interface SchedulerOptions {
  /** This host, recorded as the holder of the tree places it takes. */
  hostId: string;
  slots: JobSlotStore;
  maxRunningPerHost?: number;
  maxRunningPerTree?: number;
  maxQueued?: number;
  treeRetryMs?: number;
  now?: () => number;
  logger?: Logger;
}

/** The right to run one job; give it back with `release` once the job's process is gone. */
export interface Slot {
  readonly jobId: string;
  readonly treeId: string;
  /** Gives the place back (in the host and in the tree). Idempotent. */
  release(): Promise<void>;
}

/** One waiting job as clients show it. */
export interface QueuedJob {
  jobId: string;
  treeId: string;
  /** 1 for the next in line. */
  position: number;
  queuedAtMs: number;
}

/** Options of one acquire. */
export interface AcquireOptions {
  treeId: string;
  /** Aborting takes a waiting job out of the queue; its acquire rejects with `jobs.acquire_aborted`. */
  signal?: AbortSignal;
}

/** The scheduler of one host. */
export interface JobScheduler {
  /** Resolves once the host and the job's tree both have room; waits in the queue until then. */
  acquire(jobId: string, opts: AcquireOptions): Promise<Slot>;
  /** Gives back a running job's slot; nothing for a job that holds none. */
  release(jobId: string): Promise<void>;
  /** The job's place in the queue (1 = next), or null when it is not waiting (running, or unknown). */
  position(jobId: string): number | null;
  /** The waiting jobs in queue order. */
  queued(): QueuedJob[];
  /** The jobs holding a slot of this host. */
  running(): { jobId: string; treeId: string }[];
  /** Refuses every waiting acquire (`jobs.scheduler_closed`) and any later one; running slots stay until released. */
  close(): void;
}

interface Waiting {
  jobId: string;
  treeId: string;
  queuedAtMs: number;
  resolve: (slot: Slot) => void;
  reject: (err: unknown) => void;
  /** Out of the queue: granted, aborted or refused. */
  done: boolean;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/** A scheduler for one host over a tree slot store shared by the hosts. */
export function createJobScheduler(opts: SchedulerOptions): JobScheduler {
  const maxHost = opts.maxRunningPerHost ?? DEFAULT_MAX_RUNNING_JOBS;
  const maxTree = opts.maxRunningPerTree ?? DEFAULT_MAX_RUNNING_JOBS_PER_TREE;
  const maxQueued = opts.maxQueued ?? DEFAULT_MAX_QUEUED_JOBS;
  const retryMs = opts.treeRetryMs ?? DEFAULT_TREE_RETRY_MS;
  const now = opts.now ?? Date.now;
  const logger = opts.logger ?? pino({ level: 'silent' });
  const queue: Waiting[] = [];
  const running = new Map<string, { treeId: string; slot: Slot }>();
  // tree places whose release failed (the bus was away): given back before anything is granted
  const owed = new Map<string, string>();
  let pumping = false;
  let again = false;
  let retry: NodeJS.Timeout | null = null;
  let closed = false;

  const leave = (w: Waiting): void => {
    w.done = true;
    const i = queue.indexOf(w);
    if (i >= 0) queue.splice(i, 1);
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
  };

  const giveBack = async (jobId: string, treeId: string): Promise<void> => {
    try {
      await opts.slots.release(treeId, jobId);
      owed.delete(jobId);
    } catch (err) {
      owed.set(jobId, treeId);
      logger.warn({ err, jobId, treeId }, 'could not give back a job place; will try again');
      schedule();
    }
  };

  const schedule = (): void => {
    if (retry || closed) return;
    retry = setTimeout(() => {
      retry = null;
      void pump();
    }, retryMs);
    // a waiting acquire keeps nothing alive by itself; its caller does
    retry.unref();
  };

  const grant = (w: Waiting): void => {
    leave(w);
    let released = false;
    const slot: Slot = {
      jobId: w.jobId,
      treeId: w.treeId,
      release: async () => {
        if (released) return;
        released = true;
        running.delete(w.jobId);
        await giveBack(w.jobId, w.treeId);
        void pump();
      },
    };
    running.set(w.jobId, { treeId: w.treeId, slot });
    w.resolve(slot);
  };

  const localInTree = (treeId: string): number => {
    let n = 0;
    for (const r of running.values()) if (r.treeId === treeId) n++;
    return n;
  };

  // One pass at a time: a take is a round trip, and two passes would both count the last place free.
  async function pump(): Promise<void> {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        for (const [jobId, treeId] of [...owed]) await giveBack(jobId, treeId);
        const full = new Set<string>();
        for (const w of [...queue]) {
          if (running.size >= maxHost) break;
          if (w.done || full.has(w.treeId)) continue;
          // this host's own jobs of the tree are in the record too: no round trip to learn it is full
          if (localInTree(w.treeId) >= maxTree) {
            full.add(w.treeId);
            continue;
          }
          let taken: boolean;
          try {
            taken = (await opts.slots.take(w.treeId, w.jobId, opts.hostId, maxTree, now())).taken;
          } catch (err) {
            if (err instanceof ActorloopError && err.retryable) {
              logger.warn({ err, jobId: w.jobId, treeId: w.treeId }, 'could not take a job place; will try again');
              full.add(w.treeId);
              schedule();
              continue;
            }
            leave(w);
            w.reject(err);
            continue;
          }
          if (w.done) {
            // aborted while the take was on its way: the place it got is not used
            if (taken) await giveBack(w.jobId, w.treeId);
            continue;
          }
          if (!taken) {
            // full with jobs of other hosts: nothing here frees it, so ask again later
            full.add(w.treeId);
            schedule();
            continue;
          }
          grant(w);
        }
      } while (again);
    } finally {
      pumping = false;
    }
  }

  return {
    acquire(jobId, { treeId, signal }) {
      if (closed) return Promise.reject(new SchedulerError(SCHEDULER_CODES.closed, 'the scheduler is closed: this host is shutting down'));
      if (running.has(jobId) || queue.some((w) => w.jobId === jobId)) {
        return Promise.reject(new SchedulerError(SCHEDULER_CODES.duplicate, `job ${jobId} is already running or waiting on this host`));
      }
      if (signal?.aborted) return Promise.reject(aborted(jobId, signal));
      if (queue.length >= maxQueued) {
        return Promise.reject(
          new SchedulerError(SCHEDULER_CODES.queueFull, `${queue.length} jobs are waiting on this host already, the most it queues`, {
            retryable: true,
            hint: 'wait for some to end, or raise the queue limit',
          }),
        );
      }
      return new Promise<Slot>((resolve, reject) => {
        const w: Waiting = { jobId, treeId, queuedAtMs: now(), resolve, reject, done: false, signal };
        if (signal) {
          w.onAbort = () => {
            if (w.done) return;
            leave(w);
            reject(aborted(jobId, signal));
          };
          signal.addEventListener('abort', w.onAbort, { once: true });
        }
        queue.push(w);
        void pump();
      });
    },
    async release(jobId) {
      await running.get(jobId)?.slot.release();
    },
    position(jobId) {
      const i = queue.findIndex((w) => w.jobId === jobId);
      return i < 0 ? null : i + 1;
    },
    queued: () => queue.map((w, i) => ({ jobId: w.jobId, treeId: w.treeId, position: i + 1, queuedAtMs: w.queuedAtMs })),
    running: () => [...running].map(([jobId, r]) => ({ jobId, treeId: r.treeId })),
    close() {
      closed = true;
      if (retry) clearTimeout(retry);
      retry = null;
      for (const w of [...queue]) {
        leave(w);
        w.reject(new SchedulerError(SCHEDULER_CODES.closed, 'the scheduler closed while the job waited: this host is shutting down'));
      }
    },
  };
}

function aborted(jobId: string, signal: AbortSignal): SchedulerError {
  return new SchedulerError(SCHEDULER_CODES.aborted, `job ${jobId} stopped waiting for a slot`, { cause: signal.reason });
}
