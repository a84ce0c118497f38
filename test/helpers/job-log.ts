import { parseEvent, type ActorEvent, type EventData, type EventOf, type EventType } from '../../src/protocol/events.js';
import { jobIdOf, type JobEnd, type JobPhase, type JobReason } from '../../src/protocol/job-events.js';

/** The start_job call the fixture job was started by, and the job ID derived from it. */
export const JOB_CALL = 'call_01JOBCALL0000000000000000';
export const JOB_ID = jobIdOf(JOB_CALL);
export const OWNER_ID = 'agt_01OWNER00000000000000000';
/** Commit time of the fixture's first event; each later one is a second after the last. */
export const JOB_T0_MS = Date.parse('2026-01-01T00:00:00.000Z');

/** The data of the fixture job's `job/created`, with changes. */
export function created(over: Partial<EventData<'job/created'>> = {}): EventData<'job/created'> {
  return {
    jobId: JOB_ID, ownerId: OWNER_ID, rootId: OWNER_ID, name: 'regress',
    executor: { kind: 'shell', command: 'npm test', cwd: '/ws', timeoutSeconds: 60 },
    idempotent: false, retries: 0, effects: 'none', onOwnerEnd: 'detach', resources: [], callId: JOB_CALL,
    ...over,
  };
}

/** The end a terminal phase records: exit code, 1.5 s, an output artifact. */
export function jobEnd(exitCode: number | null = 0): JobEnd {
  return {
    exitCode, signal: null, durationMs: 1500, usage: null, costUsd: null,
    output: { id: 'art_01OUT', digest: 'sha256:out', bytes: 12, binary: false }, tail: 'ok 12 tests\n',
  };
}

/**
 * A job's log as its host writes it, parsed by the real schema: `created`, then `started(n)`
 * (with its `pending → running` in the same commit), `phase(from, to, reason)`, `notified()`.
 */
export class JobLogBuilder {
  readonly events: ActorEvent[] = [];

  push<T extends EventType>(type: T, data: EventData<T>): EventOf<T> {
    const seq = this.events.length + 1;
    const at = new Date(JOB_T0_MS + (seq - 1) * 1000).toISOString();
    const e = parseEvent({ v: 1, seq, id: `evt_${seq}`, at, epoch: 1, actor: JOB_ID, type, data });
    this.events.push(e);
    return e as EventOf<T>;
  }

  created(over: Partial<EventData<'job/created'>> = {}): this {
    this.push('job/created', created(over));
    return this;
  }

  /** Execution `attempt` begins: `job/started` and `job/phase pending → running`. */
  started(attempt = 1, deadlineAt: number | null = null): this {
    this.push('job/started', { attempt, host: 'host-a', deadlineAt });
    return this.phase('pending', 'running', 'started', attempt);
  }

  phase(from: JobPhase, phase: JobPhase, reason: JobReason, attempt = 1, end: JobEnd | null = null): this {
    const terminal = phase === 'completed' || phase === 'failed' || phase === 'cancelled' || phase === 'interrupted';
    this.push('job/phase', { from, phase, reason, message: null, attempt, end: end ?? (terminal ? jobEnd(phase === 'completed' ? 0 : null) : null) });
    return this;
  }

  notified(phase: EventData<'job/notified'>['phase'] = 'completed'): this {
    this.push('job/notified', { ownerId: OWNER_ID, messageId: 'msg_01NOTICE', phase });
    return this;
  }
}

/** A job that ran once and completed, and whose owner had the notice. Seqs: 1 created, 2 started, 3 → running, 4 → completed, 5 notified. */
export function completedJob(): ActorEvent[] {
  return new JobLogBuilder().created().started().phase('running', 'completed', 'exited').notified().events;
}
