// When a follower (`run`, `resume`, `approve`) takes the turn to wait for a person: the agent
// committed `actor/parked` naming approvals still pending, and no answer of its own is on the way.
// Silence proves nothing: without the parked fact nobody is asked.
import { describe, expect, test } from 'vitest';
import { awaitingPerson } from '../../src/cli/turn/follow-turn.js';
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

/** The agent's own fact that it can do nothing but wait for `ids`. */
function park(b: LogBuilder, ...ids: string[]): LogBuilder {
  b.push('actor/parked', { waitingFor: 'approval', ids, commands: ids.map((id) => `actorloop approve ${ACTOR} ${id}`) });
  return b;
}

describe('awaitingPerson', () => {
  test('not while the agent has not parked, even with every other call ended; once it parked, the pending approval', () => {
    const b = twoCalls();
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
    b.result('call_2');
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
    park(b, 'apr_1');
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual(['apr_1']);
  });

  test('not while an answer this command sent is on its way, nor once the approval is answered', () => {
    const b = park(twoCalls().result('call_2'), 'apr_1');
    expect(awaitingPerson(projectionOf(b), new Map([['apr_1', 'msg_2']]))).toEqual([]);
    b.push('approval/granted', { approvalId: 'apr_1', by: 'client:cli', messageId: 'msg_2' }, { turn: b.turn, step: b.step, call: 'call_1' });
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
  });

  test('a release after the parked fact leaves it parked; any other event ends the wait', () => {
    const b = park(twoCalls().result('call_2'), 'apr_1').released('run left for a person');
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual(['apr_1']);
    b.push('recovery/started', { fromSeq: b.events.length, reason: 'resume' });
    expect(awaitingPerson(projectionOf(b), new Map())).toEqual([]);
  });

  test('not without an open turn', () => {
    expect(awaitingPerson(projectionOf(new LogBuilder().receive('msg_1')), new Map())).toEqual([]);
  });
});
