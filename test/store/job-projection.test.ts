import { describe, expect, it } from 'vitest';
import { JobNoticeSchema } from '../../src/protocol/job-events.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { createJobState, foldJobEvent, foldJobLog, jobNotice, noticeOwed, type JobState } from '../../src/store/job-projection.js';
import { completedJob, created, JOB_CALL, JOB_ID, JOB_T0_MS, jobEnd, JobLogBuilder, OWNER_ID } from '../helpers/job-log.js';
import { LogBuilder } from '../actors/log-builder.js';

describe('a job folded from its own log', () => {
  it('holds what a resume needs, the execution, the end and the notice', () => {
    const s = foldJobLog(completedJob())!;
    expect(s).toMatchObject({
      ...created(), version: 1, seq: 5, phase: 'completed', reason: 'exited', attempts: 1, host: 'host-a',
      startedAt: JOB_T0_MS + 1000, end: jobEnd(0), notified: { messageId: 'msg_01NOTICE' }, cancel: null,
    });
    expect(noticeOwed(s)).toBe(false);
  });

  it('owes the notice from its end until job/notified, and makes it from the log alone', () => {
    const s = foldJobLog(completedJob().slice(0, 4))!;
    expect(noticeOwed(s)).toBe(true);
    const notice = jobNotice(s)!;
    expect(JobNoticeSchema.parse(notice)).toEqual(notice);
    expect(notice).toEqual({
      jobId: JOB_ID, name: 'regress', phase: 'completed', reason: 'exited', message: null, attempts: 1, exitCode: 0, durationMs: 1500,
      usage: null, output: jobEnd(0).output, tail: 'ok 12 tests\n',
    });
    // a job still running owes nothing and has no notice
    const running = foldJobLog(completedJob().slice(0, 3))!;
    expect(noticeOwed(running)).toBe(false);
    expect(jobNotice(running)).toBeNull();
  });

  it('counts executions across a restart, and forgets the lost one\'s deadline', () => {
    const b = new JobLogBuilder().created({ idempotent: true, retries: 1 }).started(1, JOB_T0_MS + 60_000);
    b.phase('running', 'pending', 'runtime_restarted');
    const mid = foldJobLog(b.events)!;
    expect(mid).toMatchObject({ phase: 'pending', reason: 'runtime_restarted', attempts: 1, deadlineAt: null });
    b.started(2).phase('running', 'failed', 'executor_error', 2, jobEnd(1));
    expect(foldJobLog(b.events)).toMatchObject({ phase: 'failed', attempts: 2, end: { exitCode: 1 } });
  });

  it('keeps the first cancel asked for', () => {
    const b = new JobLogBuilder().created().started();
    b.push('job/cancel_requested', { reason: 'owner_ended', by: OWNER_ID, messageId: null });
    b.push('job/cancel_requested', { reason: 'user_cancelled', by: 'client:cli', messageId: 'msg_2' });
    expect(foldJobLog(b.events)!.cancel).toEqual({ reason: 'owner_ended', by: OWNER_ID });
  });

  it('is null for a log that does not start a job (an agent\'s)', () => {
    expect(foldJobLog(new LogBuilder().receive('msg_1').startTurn('msg_1').events)).toBeNull();
  });

  it('is plain JSON: a state restored from its snapshot folds the rest of the log to the same state', () => {
    const log = completedJob();
    const head = foldJobLog(log.slice(0, 3))!;
    const restored = JSON.parse(JSON.stringify(head)) as JobState;
    for (const e of log.slice(3)) foldJobEvent(restored, e);
    expect(restored).toEqual(foldJobLog(log));
    // and the created event's data is copied, not shared
    const first = log[0]!;
    if (first.type !== 'job/created') throw new Error('fixture');
    expect(createJobState(first).executor).not.toBe(first.data.executor);
  });
});

describe("the owner's projection of its jobs", () => {
  /** An owner whose step calls start_job (seq 9), runs it and gets its result; then the job's notice arrives. */
  function ownerLog(ok = true) {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('start_job');
    const scope = { turn: b.turn, step: b.step, call: JOB_CALL };
    b.push('tool/call', {
      index: 0, providerId: 'prov_1', name: 'start_job', arguments: '{"name":"regress","command":"npm test"}', status: 'valid',
      error: null, effects: 'possible', recovery: 'idempotent', withinBudget: true,
    }, scope);
    b.push('policy/decided', { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null }, scope);
    b.push('tool/start', { name: 'start_job', input: {}, effects: 'possible', idempotencyKey: JOB_CALL, rerun: false }, scope);
    b.push('tool/result', { ok, output: ok ? `started ${JOB_ID}` : 'denied', error: null, durationMs: 3 }, scope);
    return b;
  }

  it('records a job its start_job call started as pending, then what its notice says', () => {
    const b = ownerLog();
    const p = emptyProjection(OWNER_ID);
    for (const e of b.events) foldEvent(p, e);
    const started = { name: 'regress', callId: JOB_CALL, onOwnerEnd: 'cancel', turn: b.events.find((e) => e.type === 'tool/result')!.turn };
    expect(p.jobs).toEqual({ [JOB_ID]: { ...started, phase: 'pending', notified: false } });
    const notice = jobNotice(foldJobLog(completedJob().slice(0, 4))!)!;
    foldEvent(p, b.push('inbox/received', { messageId: 'msg_01NOTICE', kind: 'job_notice', from: JOB_ID, content: JSON.stringify(notice), request: null }));
    expect(p.jobs![JOB_ID]).toEqual({ ...started, phase: 'completed', notified: true, noticeId: 'msg_01NOTICE' });
    // its output is an artifact the owner reads with artifact_read
    expect(p.artifacts?.[notice.output!.id]).toBe(notice.output!.digest);
    // plain JSON, like the rest of the projection
    expect(JSON.parse(JSON.stringify(p.jobs))).toEqual(p.jobs);
  });

  it('records no job for a start_job call that failed, and ignores a notice that does not parse', () => {
    const b = ownerLog(false);
    const p = emptyProjection(OWNER_ID);
    for (const e of b.events) foldEvent(p, e);
    foldEvent(p, b.push('inbox/received', { messageId: 'msg_9', kind: 'job_notice', from: JOB_ID, content: '{not json', request: null }));
    expect(p.jobs).toBeUndefined();
  });
});
