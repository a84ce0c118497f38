// When a follower (a `run` or `resume` following a host's agent) decides, from the log alone, that
// the turn waits for a person: only approvals are open, nothing else still runs, and no answer
// of its own is on the way.
import { describe, expect, test } from 'vitest';
import { awaitingPerson } from '../../src/cli/commands/follow-turn.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { ACTOR, LogBuilder } from '../actors/log-builder.js';

function projectionOf(b: LogBuilder) {
  const p = emptyProjection(ACTOR);
  for (const e of b.events) foldEvent(p, e);
  return p;
}

/** A step with two calls: `call_1` asks for approval `apr_1`, `call_2` (a read) has started. */
function twoCalls(): LogBuilder {
  const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('write_file');
  b.call({ name: 'write_file', effects: 'possible' });
  b.push('approval/requested', { approvalId: 'apr_1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:x', expiresAt: Date.parse('2027-01-01') },
    { turn: b.turn, step: b.step, call: 'call_1' });
  b.call().startTool('call_2');
  return b;
}

describe('awaitingPerson', () => {
  test('not while another call of the step still runs; once it ended, the pending approval', () => {
    const b = twoCalls();
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
    b.result('call_2');
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual(['apr_1']);
  });

  test('not while an answer this command sent is on its way, nor once the approval is answered', () => {
    const b = twoCalls().result('call_2');
    expect(awaitingPerson(projectionOf(b), new Map([['apr_1', 'msg_2']]))).toEqual([]);
    b.push('approval/granted', { approvalId: 'apr_1', by: 'client:cli', messageId: 'msg_2' }, { turn: b.turn, step: b.step, call: 'call_1' });
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
  });

  test('not without an open turn', () => {
    expect(awaitingPerson(projectionOf(new LogBuilder().receive('msg_1')), new Map())).toEqual([]);
  });
});
