// RunPrinter's lines for a person's messages to a turn and for an interrupt request: short notes on
// stderr as the log commits each delivery state (stdout keeps the run's own lines).
import { PassThrough } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { RunPrinter } from '../../src/cli/output.js';
import { LogBuilder } from '../actors/log-builder.js';

describe('RunPrinter: a person\'s messages', () => {

  test('pending on inbox/received, included in the step whose request names it, cancelled with its reason; other kinds say nothing', () => {
    const stdout = Object.assign(new PassThrough(), { isTTY: false });
    const stderr = new PassThrough();
    let err = '';
    stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    const p = new RunPrinter({ stdout, stderr }, false);
    const b = new LogBuilder();
    b.push('inbox/received', { messageId: 'msg_A', kind: 'steer', from: 'client:cli', content: 'go left', request: null });
    b.push('inbox/received', { messageId: 'msg_B', kind: 'follow_up', from: 'client:cli', content: 'then this', request: null });
    b.push('inbox/received', { messageId: 'msg_C', kind: 'approval_response', from: 'client:cli', content: '{}', request: null });
    b.push('step/start', { index: 3, maxAttempts: 1, toolBudgetLeft: null, model: 'm', maxOutputTokens: null, messageIds: ['msg_A'] }, { turn: 'turn_1', step: 'step_3' });
    b.push('request/prepared', { digest: 'sha256:x', bytes: 1, messages: 2, messageIds: ['msg_A'] }, { turn: 'turn_1', step: 'step_3' });
    b.push('inbox/cancelled', { messageId: 'msg_B', reason: 'interrupted: follow-ups cancelled' });
    b.push('interrupt/requested', { messageId: 'msg_D', by: 'client:cli', followUps: 'cancel' }, { turn: 'turn_1' });
    p.commit(b.events);
    expect(err.trimEnd().split('\n')).toEqual([
      '› steer msg_A pending',
      '› follow-up msg_B pending',
      '› steer msg_A included in step 3',
      '› follow-up msg_B cancelled (interrupted: follow-ups cancelled)',
      'interrupt requested by client:cli · follow-ups cancelled',
    ]);
  });
});
