// A job's events in human form: what it runs, each execution, every move with how it ended, the notice.
import { describe, expect, test } from 'vitest';
import { describeEvent } from '../../src/client/event-text.js';
import { JOB_ID, JobLogBuilder, OWNER_ID } from '../helpers/job-log.js';

describe('job event lines', () => {
  test('name the command, the execution, each move and its end, the cancel and the notice', () => {
    const b = new JobLogBuilder().created({ idempotent: true, retries: 2, onOwnerEnd: 'cancel' }).started(1, Date.parse('2026-01-01T00:01:00.000Z'));
    b.push('job/cancel_requested', { reason: 'user_cancelled', by: 'client:cli', messageId: 'msg_01CANCEL' });
    b.phase('running', 'cancelled', 'user_cancelled').notified('cancelled');
    // the fields after the head (seq, time, type)
    expect(b.events.map((e) => describeEvent(e).replace(/^\s*\d+\s+\S+\s+\S+\s+/, ''))).toEqual([
      `${JOB_ID} "regress" · $ npm test · timeout 60s · idempotent, 2 retries · owner ${OWNER_ID} · on owner end cancel`,
      'attempt 1 on host-a · until 2026-01-01T00:01:00.000Z',
      'pending → running (started)',
      'user_cancelled · by client:cli · msg_01CANCEL',
      'running → cancelled (user_cancelled) · no exit code · 1500 ms · output 12 bytes sha256:out',
      `cancelled notice to ${OWNER_ID} · msg_01NOTICE`,
    ]);
  });
});
