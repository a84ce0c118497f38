import { describe, expect, it } from 'vitest';
import { initialTransition, transition, type AnyMachineSnapshot, type SnapshotFrom } from 'xstate';
import { CompiledMachine, type Effect as CompiledEffect } from '../../src/machines/compiled-machine.js';
import { jobMachine, type JobContext, type JobInput } from '../../src/machines/job.machine.js';
import type { EventData } from '../../src/protocol/events.js';
import { JOB_EDGES, JobPhaseSchema, type JobPhase, type JobReason } from '../../src/protocol/job-events.js';
import { mulberry32 as prng } from '../../src/cli/chaos/plan.js';
import { created, JOB_ID, jobEnd, OWNER_ID } from '../helpers/job-log.js';
import { at, effects, ev, send, T0_MS } from './events.js';

type Snap = SnapshotFrom<typeof jobMachine>;

const END_PHASES = new Set<JobPhase>(['completed', 'failed', 'cancelled', 'interrupted']);
const startedEv = (attempt = 1, deadlineAt: number | null = null) => ev('job/started', { attempt, host: 'host-a', deadlineAt });
function phaseEv(from: JobPhase, phase: JobPhase, reason: JobReason, attempt = 1) {
  return ev('job/phase', { from, phase, reason, message: null, attempt, end: END_PHASES.has(phase) ? jobEnd(phase === 'completed' ? 0 : 1) : null });
}
const cancelEv = (reason: EventData<'job/cancel_requested'>['reason'] = 'user_cancelled') => ev('job/cancel_requested', { reason, by: 'client:cli', messageId: 'msg_01CANCEL' });
const notifiedEv = (phase: EventData<'job/notified'>['phase']) => ev('job/notified', { ownerId: OWNER_ID, messageId: 'msg_01NOTICE', phase });

function start(over: Partial<JobInput> = {}): Snap {
  return initialTransition(jobMachine, created(over))[0];
}

/** Sends events one by one; returns the last snapshot and every effect asked for on the way. */
function run(s: Snap, events: Parameters<typeof send<typeof jobMachine>>[2][]): [Snap, ReturnType<typeof effects>] {
  const all: ReturnType<typeof effects> = [];
  let snap = s;
  for (const e of events) {
    const [next, fx] = send(jobMachine, snap, e);
    snap = next;
    all.push(...fx);
  }
  return [snap, all];
}

/** A job running its execution `attempt` (a second before T0 + 60 s deadline). */
function running(over: Partial<JobInput> = {}, attempt = 1, deadlineAt: number | null = T0_MS + 60_000): Snap {
  return run(start(over), [startedEv(attempt, deadlineAt), phaseEv('pending', 'running', 'started', attempt)])[0];
}

const commit = (from: JobPhase, phase: JobPhase, reason: JobReason, attempt: number, message: unknown = expect.any(String)) => ({
  type: 'commitPhase', params: { jobId: JOB_ID, from, phase, reason, message, attempt },
});

describe('job machine', () => {
  it('starts pending and asks for its first execution', () => {
    const [s, actions] = initialTransition(jobMachine, created());
    expect(s.value).toBe('pending');
    expect(s.context).toMatchObject({ jobId: JOB_ID, attempts: 0, deadlineAt: null, stopping: null, cancel: null, end: null });
    expect(effects(actions)).toEqual([{ type: 'startExecution', params: { jobId: JOB_ID, attempt: 1, executor: created().executor } }]);
  });

  it('runs once job/started and its pending → running are committed, keeping the attempt and deadline', () => {
    const [s, fx] = run(start(), [startedEv(1, 5_000), phaseEv('pending', 'running', 'started')]);
    expect(s.value).toBe('running');
    expect(s.context).toMatchObject({ attempts: 1, deadlineAt: 5_000 });
    expect(fx).toEqual([]);
  });

  it.each([
    ['completed', 'exited'],
    ['failed', 'executor_error'],
  ] as const)('ends %s on the executor\'s phase, then owes the owner its notice until job/notified', (phase, reason) => {
    const [ended, fx] = send(jobMachine, running(), phaseEv('running', phase, reason));
    expect(ended.value).toEqual({ [phase]: 'notifying' });
    expect(ended.context.end).toEqual({ phase, reason });
    expect(fx).toEqual([{ type: 'notifyOwner', params: { jobId: JOB_ID, ownerId: OWNER_ID, phase } }]);
    // a recover before the notice is recorded sends it again (its ID is derived: the inbox dedupes it)
    expect(send(jobMachine, ended, { type: 'recover' })[1]).toEqual(fx);
    const [done, after] = send(jobMachine, ended, notifiedEv(phase));
    expect(done.value).toEqual({ [phase]: 'notified' });
    expect(after).toEqual([]);
    expect(send(jobMachine, done, { type: 'recover' })[1]).toEqual([]);
  });

  it('asks again for the execution on recover while pending (a host died before job/started)', () => {
    expect(send(jobMachine, start(), { type: 'recover' })[1]).toEqual([{ type: 'startExecution', params: { jobId: JOB_ID, attempt: 1, executor: created().executor } }]);
  });

  it('ends a pending job cancelled at once: nothing runs, so nothing is stopped', () => {
    const [s, fx] = send(jobMachine, start(), cancelEv());
    expect(s.value).toBe('pending');
    expect(fx).toEqual([commit('pending', 'cancelled', 'user_cancelled', 0, null)]);
    expect(send(jobMachine, s, { type: 'recover' })[1]).toEqual(fx);
    const [ended] = send(jobMachine, s, phaseEv('pending', 'cancelled', 'user_cancelled', 0));
    expect(ended.value).toEqual({ cancelled: 'notifying' });
  });

  it('stops a running execution on a cancel, once, and ends with the phase its host commits', () => {
    const [s, fx] = send(jobMachine, running(), cancelEv('owner_ended'));
    expect(fx).toEqual([{ type: 'stopExecution', params: { jobId: JOB_ID, attempt: 1, reason: 'owner_ended' } }]);
    expect(s.context).toMatchObject({ cancel: 'owner_ended', stopping: 'owner_ended' });
    expect(send(jobMachine, s, cancelEv())[1]).toEqual([]);
    const [ended] = send(jobMachine, s, phaseEv('running', 'cancelled', 'owner_ended'));
    expect(ended.value).toEqual({ cancelled: 'notifying' });
    expect(ended.context.stopping).toBeNull();
  });

  it('stops an execution that runs past its absolute deadline, once; a tick before it does nothing', () => {
    const r = running({}, 1, 10_000);
    expect(send(jobMachine, r, { type: 'tick', nowMs: 9_999 })[1]).toEqual([]);
    const [s, fx] = send(jobMachine, r, { type: 'tick', nowMs: 10_000 });
    expect(fx).toEqual([{ type: 'stopExecution', params: { jobId: JOB_ID, attempt: 1, reason: 'timed_out' } }]);
    expect(send(jobMachine, s, { type: 'tick', nowMs: 20_000 })[1]).toEqual([]);
    // a cancel while it is stopped for its timeout is recorded; the stop under way ends it
    const [c, cfx] = send(jobMachine, s, cancelEv());
    expect(cfx).toEqual([]);
    expect(c.context.cancel).toBe('user_cancelled');
  });

  it('has no deadline to pass when the execution has none', () => {
    expect(send(jobMachine, running({}, 1, null), { type: 'tick', nowMs: 9e15 })[1]).toEqual([]);
  });

  describe('recover while running: the execution went with its host', () => {
    it('restarts an idempotent job with retries left, and its next execution is numbered one more', () => {
      const r = running({ idempotent: true, retries: 1 });
      const [, fx] = send(jobMachine, r, { type: 'recover' });
      expect(fx).toEqual([commit('running', 'pending', 'runtime_restarted', 1)]);
      const [again, startFx] = send(jobMachine, r, phaseEv('running', 'pending', 'runtime_restarted'));
      expect(again.value).toBe('pending');
      expect(again.context).toMatchObject({ deadlineAt: null, stopping: null, attempts: 1 });
      expect(startFx).toEqual([{ type: 'startExecution', params: { jobId: JOB_ID, attempt: 2, executor: created().executor } }]);
      // its retries spent, the second lost execution ends it
      const second = run(again, [startedEv(2), phaseEv('pending', 'running', 'started', 2)])[0];
      expect(send(jobMachine, second, { type: 'recover' })[1]).toEqual([commit('running', 'interrupted', 'runtime_restarted', 2)]);
    });

    it('ends a job without effects interrupted (runtime_restarted)', () => {
      expect(send(jobMachine, running(), { type: 'recover' })[1]).toEqual([commit('running', 'interrupted', 'runtime_restarted', 1)]);
    });

    it('checks a job that may have had effects (reconciling, outcome_unknown), then ends it as the check says', () => {
      const r = running({ effects: 'possible' });
      expect(send(jobMachine, r, { type: 'recover' })[1]).toEqual([commit('running', 'reconciling', 'outcome_unknown', 1)]);
      const [rec, fx] = send(jobMachine, r, phaseEv('running', 'reconciling', 'outcome_unknown'));
      expect(rec.value).toBe('reconciling');
      const reconcile = { type: 'reconcileJob', params: { jobId: JOB_ID, attempt: 1, executor: created().executor } };
      expect(fx).toEqual([reconcile]);
      expect(send(jobMachine, rec, { type: 'recover' })[1]).toEqual([reconcile]);
      const [ended] = send(jobMachine, rec, phaseEv('reconciling', 'interrupted', 'outcome_unknown'));
      expect(ended.value).toEqual({ interrupted: 'notifying' });
      expect(ended.context.end).toEqual({ phase: 'interrupted', reason: 'outcome_unknown' });
    });

    it('ends a job that was being cancelled cancelled, and one stopped for its timeout failed (timed_out)', () => {
      const cancelling = send(jobMachine, running({ idempotent: true, retries: 3 }), cancelEv())[0];
      expect(send(jobMachine, cancelling, { type: 'recover' })[1]).toEqual([commit('running', 'cancelled', 'user_cancelled', 1)]);
      const timedOut = send(jobMachine, running({}, 1, 10), { type: 'tick', nowMs: 10 })[0];
      expect(send(jobMachine, timedOut, { type: 'recover' })[1]).toEqual([commit('running', 'failed', 'timed_out', 1)]);
    });
  });

  it('moves along exactly the edges of JOB_EDGES: a job/phase along any other is ignored', () => {
    const base = start().context as JobContext;
    for (const from of JobPhaseSchema.options) {
      const snap = jobMachine.resolveState({ value: from, context: { ...base, end: END_PHASES.has(from) ? { phase: from as 'failed', reason: 'exited' } : null } });
      const topOf = (s: AnyMachineSnapshot) => (typeof s.value === 'string' ? s.value : Object.keys(s.value)[0]);
      const reached = JobPhaseSchema.options.filter((to) => {
        const [next] = transition(jobMachine, snap, phaseEv(from, to, 'exited'));
        // no edge leads a phase to itself, so a move is a change of the top-level state
        return topOf(next) !== from;
      });
      expect(reached, `from ${from}`).toEqual(JobPhaseSchema.options.filter((p) => JOB_EDGES[from].includes(p)));
    }
  });

  it('keeps its state in plain JSON: a persisted snapshot restores to the same state', () => {
    const s = send(jobMachine, running({ effects: 'possible' }), cancelEv())[0];
    const restored = jobMachine.resolveState(JSON.parse(JSON.stringify(jobMachine.getPersistedSnapshot(s))) as never);
    expect(restored.value).toEqual(s.value);
    expect(restored.context).toEqual(s.context);
  });
});

/** Every event the job machine names, with the variants its guards tell apart. */
function randomEvent(r: () => number): object {
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const phases = JobPhaseSchema.options;
  const makers: Array<() => object> = [
    () => ({ type: 'job/started', at: at(0), data: { attempt: pick([1, 2, 3]), host: 'h', deadlineAt: pick([null, 1_000, 3e12]) } }),
    () => {
      const phase = pick(phases);
      return { type: 'job/phase', data: { from: pick(phases), phase, reason: pick(['exited', 'executor_error', 'runtime_restarted', 'outcome_unknown']), message: null, attempt: 1, end: null } };
    },
    () => ({ type: 'job/cancel_requested', data: { reason: pick(['user_cancelled', 'owner_ended']), by: 'u', messageId: null } }),
    () => ({ type: 'job/notified', data: { ownerId: OWNER_ID, messageId: 'm', phase: 'completed' } }),
    () => ({ type: 'recover' }),
    () => ({ type: 'tick', nowMs: pick([0, 5_000, 2e12, 4e12]) }),
    () => ({ type: 'abort', reason: 'shutdown' }),
    () => ({ type: 'tool/call', data: {} }),
  ];
  return pick(makers)();
}

describe('the job machine on the compiled engine', () => {
  it('compiles: it uses only what CompiledMachine runs', () => {
    expect(() => new CompiledMachine(jobMachine)).not.toThrow();
  });

  it('gives the same states, contexts and effects as XState for 600 random event sequences', () => {
    const compiled = new CompiledMachine(jobMachine);
    const seen = new Set<string>();
    for (let seed = 1; seed <= 600; seed++) {
      const r = prng(seed * 104_729);
      const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
      const input = created({ idempotent: r() < 0.5, retries: pick([0, 1, 2]), effects: pick(['none', 'possible'] as const) });
      const fx: CompiledEffect[] = [];
      let c = compiled.initial(input, (e) => fx.push(e));
      let [x, xa] = initialTransition(jobMachine, input);
      const same = (where: string, xActions: readonly { type: string; params?: unknown }[]) => {
        expect({ value: c.value, context: c.context, effects: fx.map((e) => ({ type: e.name, params: e.params })) }, where)
          .toEqual({ value: x.value, context: x.context, effects: effects(xActions) });
      };
      same(`seed ${seed} initial`, xa);
      for (let i = 0; i < 5 + Math.floor(r() * 30); i++) {
        const e = randomEvent(r);
        fx.length = 0;
        c = compiled.transition(c, e as { type: string }, (ef) => fx.push(ef));
        [x, xa] = transition(jobMachine, x, e as never);
        seen.add(JSON.stringify(c.value));
        same(`seed ${seed} event ${i} ${JSON.stringify(e)}`, xa);
        if (r() < 0.15) {
          // persist with one engine, carry on from what the other restores
          expect(compiled.persist(c)).toEqual(jobMachine.getPersistedSnapshot(x));
          c = compiled.restore(JSON.parse(JSON.stringify(jobMachine.getPersistedSnapshot(x))));
        }
      }
    }
    // the sequences reach every phase, and the notice's both halves
    expect(seen.size).toBeGreaterThanOrEqual(9);
  });
});
