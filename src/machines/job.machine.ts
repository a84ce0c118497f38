import { assign, setup } from 'xstate';
import type { EventData } from '../protocol/events.js';
import { JOB_EDGES, type JobEndPhase, type JobExecutor, type JobPhase, type JobReason } from '../protocol/job-events.js';
import { slot, type MachineEvent } from './machine-event.js';

/** Input of the job machine: the data of the job's `job/created`. */
export type JobInput = EventData<'job/created'>;

/** Why a running execution is being stopped (a stop signalled, its end not committed yet). */
export type JobStopReason = 'user_cancelled' | 'owner_ended' | 'timed_out';

/** Context of the job machine. */
export interface JobContext extends JobInput {
  /** Executions begun: the `attempt` of the last `job/started` (0: none yet). */
  attempts: number;
  /** Absolute time (ms since epoch) the running execution must end by; re-armed by `tick` after a rehydrate. */
  deadlineAt: number | null;
  /** A stop of the running execution was asked for (a cancel, or its deadline passed) and its end is not committed yet. */
  stopping: JobStopReason | null;
  /** A cancel was asked for (`job/cancel_requested`): whatever else happens, the job ends `cancelled`. */
  cancel: 'user_cancelled' | 'owner_ended' | null;
  /** How it ended, once it did. */
  end: { phase: JobEndPhase; reason: JobReason } | null;
}

/** Events the job machine reacts to. */
export type JobEvent = MachineEvent;

/** Params of `commitPhase`: a move no executor reports, which the host commits as `job/phase` (filling `end` for a terminal one). */
export interface CommitPhaseParams {
  jobId: string;
  from: JobPhase;
  phase: JobPhase;
  reason: JobReason;
  message: string | null;
  attempt: number;
}

type PhaseEvent = Extract<MachineEvent, { type: 'job/phase' }>;

/**
 * The `job/phase` transitions out of `from`: one per edge of `JOB_EDGES`, so the machine and what
 * `verify` holds a log to are one definition. A phase event along no edge is ignored here (and
 * reported by verify).
 */
function moves(from: JobPhase) {
  return JOB_EDGES[from].map((to) => ({ guard: ({ event }: { event: PhaseEvent }) => event.data.phase === to, target: to }));
}

const LOST = 'the host running it stopped before its end was recorded';

/** The move a `recover` in `running` commits: the execution's process went with its host. */
function lostMove(c: JobContext): CommitPhaseParams {
  const base = { jobId: c.jobId, from: 'running' as const, attempt: c.attempts };
  if (c.cancel !== null) return { ...base, phase: 'cancelled', reason: c.cancel, message: `${LOST}, while it was being cancelled` };
  if (c.stopping === 'timed_out') return { ...base, phase: 'failed', reason: 'timed_out', message: `${LOST}, while it was stopped for running past its timeout` };
  // attempts counts the first execution too: `retries` more may follow it
  if (c.idempotent && c.attempts <= c.retries) return { ...base, phase: 'pending', reason: 'runtime_restarted', message: `${LOST}; it is idempotent and runs again (${c.attempts} of ${c.retries + 1})` };
  if (c.effects === 'possible') return { ...base, phase: 'reconciling', reason: 'outcome_unknown', message: `${LOST}; it may have had effects, which are checked before it ends` };
  return { ...base, phase: 'interrupted', reason: 'runtime_restarted', message: LOST };
}

const startParams = ({ context }: { context: JobContext }) => ({ jobId: context.jobId, attempt: context.attempts + 1, executor: context.executor });
const notifyParams = ({ context }: { context: JobContext }) => ({ jobId: context.jobId, ownerId: context.ownerId, phase: context.end!.phase });
const cancelPending = ({ context }: { context: JobContext }): CommitPhaseParams => ({
  jobId: context.jobId, from: 'pending', phase: 'cancelled', reason: context.cancel ?? 'user_cancelled', message: null, attempt: context.attempts,
});

const jobSetup = setup({
  types: {} as { context: JobContext; events: JobEvent; input: JobInput },
  actions: {
    /** Take a scheduler slot, commit `job/started` and `job/phase pending → running` together, then spawn the execution. */
    startExecution: slot<{ jobId: string; attempt: number; executor: JobExecutor }>(),
    /** Signal the execution's process group, let it settle within the grace, then commit its end (`cancelled`, or `failed` timed_out). */
    stopExecution: slot<{ jobId: string; attempt: number; reason: JobStopReason }>(),
    commitPhase: slot<CommitPhaseParams>(),
    /** Find out what a lost execution did (changing nothing), then commit `completed | failed`, or `interrupted` outcome_unknown. */
    reconcileJob: slot<{ jobId: string; attempt: number; executor: JobExecutor }>(),
    /** Send the owner the `job_notice` (its ID derived from the job's), then commit `job/notified`. */
    notifyOwner: slot<{ jobId: string; ownerId: string; phase: JobEndPhase }>(),
  },
});

/** A terminal phase: the notice to the owner is owed (and asked for again on recover) until `job/notified`. */
function ended(phase: JobEndPhase) {
  return jobSetup.createStateConfig({
    // the entry's event is the `job/phase` that ended it (no other event enters a terminal state; the check is for the type)
    entry: assign({ end: ({ event }) => ({ phase, reason: event.type === 'job/phase' ? event.data.reason : 'runtime_restarted' }), stopping: null }),
    initial: 'notifying',
    states: {
      notifying: {
        entry: { type: 'notifyOwner', params: notifyParams },
        on: {
          'job/notified': { target: 'notified' },
          recover: { actions: { type: 'notifyOwner', params: notifyParams } },
        },
      },
      notified: {},
    },
  });
}

/**
 * A job (design §5, §11b): `pending` (entry asks for an execution: a scheduler slot, then
 * `job/started`) → `running` → `completed | failed | cancelled | interrupted`, each of which owes
 * its owner a notice until `job/notified`. Every move is a committed `job/phase` along `JOB_EDGES`.
 * A cancel (`job/cancel_requested`) ends a pending job at once and stops a running one. A `tick`
 * past the running execution's absolute deadline stops it (`timed_out`). A `recover` in `running`
 * means the process went with its host: a job being cancelled ends `cancelled`; an idempotent one
 * with retries left goes back to `pending` (and starts again); one that may have had effects goes
 * to `reconciling` (outcome_unknown), which checks and then ends it; any other ends `interrupted`
 * (runtime_restarted). In every other state `recover` re-issues the state's own effect.
 */
export const jobMachine = jobSetup.createMachine({
  id: 'job',
  initial: 'pending',
  context: ({ input }) => Object.assign({}, input, { attempts: 0, deadlineAt: null, stopping: null, cancel: null, end: null }),
  states: {
    pending: {
      // a restart enters here again: the lost execution's deadline and stop are its own
      entry: [assign({ deadlineAt: null, stopping: null }), { type: 'startExecution', params: startParams }],
      on: {
        'job/phase': moves('pending'),
        // committed with `job/phase pending → running`, before the process is spawned
        'job/started': { actions: assign({ attempts: ({ event }) => event.data.attempt, deadlineAt: ({ event }) => event.data.deadlineAt }) },
        'job/cancel_requested': {
          actions: [assign({ cancel: ({ event }) => event.data.reason }), { type: 'commitPhase', params: cancelPending }],
        },
        recover: [
          { guard: ({ context }) => context.cancel !== null, actions: { type: 'commitPhase', params: cancelPending } },
          { actions: { type: 'startExecution', params: startParams } },
        ],
      },
    },
    running: {
      on: {
        'job/phase': moves('running'),
        'job/started': { actions: assign({ attempts: ({ event }) => event.data.attempt, deadlineAt: ({ event }) => event.data.deadlineAt }) },
        'job/cancel_requested': [
          {
            guard: ({ context }) => context.stopping === null,
            actions: [
              assign({ cancel: ({ event }) => event.data.reason, stopping: ({ event }) => event.data.reason }),
              { type: 'stopExecution', params: ({ context, event }) => ({ jobId: context.jobId, attempt: context.attempts, reason: event.data.reason }) },
            ],
          },
          // already being stopped (its deadline passed): the stop under way ends it
          { actions: assign({ cancel: ({ event }) => event.data.reason }) },
        ],
        tick: {
          guard: ({ context, event }) => context.stopping === null && context.deadlineAt !== null && event.nowMs >= context.deadlineAt,
          actions: [
            assign({ stopping: 'timed_out' as const }),
            { type: 'stopExecution', params: ({ context }) => ({ jobId: context.jobId, attempt: context.attempts, reason: 'timed_out' as const }) },
          ],
        },
        recover: { actions: { type: 'commitPhase', params: ({ context }) => lostMove(context) } },
      },
    },
    reconciling: {
      entry: { type: 'reconcileJob', params: ({ context }) => ({ jobId: context.jobId, attempt: context.attempts, executor: context.executor }) },
      on: {
        'job/phase': moves('reconciling'),
        recover: { actions: { type: 'reconcileJob', params: ({ context }) => ({ jobId: context.jobId, attempt: context.attempts, executor: context.executor }) } },
      },
    },
    completed: ended('completed'),
    failed: ended('failed'),
    cancelled: ended('cancelled'),
    interrupted: ended('interrupted'),
  },
});
