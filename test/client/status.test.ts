// The one status every client shows, read from a log as it grows: a turn that runs, its death and
// the recovery, a wait for a person (kept through a release), and work let go with nobody to run
// it, which must not read as running.
import { describe, expect, test } from 'vitest';
import { agentStatus } from '../../src/client/status.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { LogBuilder } from '../actors/log-builder.js';

/** The status after each of `b`'s events. */
function statuses(b: LogBuilder): string[] {
  const p = emptyProjection(b.events[0]!.actor);
  return b.events.map((e) => {
    foldEvent(p, e);
    return agentStatus(p, e.type);
  });
}

describe('agentStatus', () => {
  test('a turn let go with nothing to run it is released, not running; a host taking it over runs it again', () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).released('the command that hosted it ended after the turn it followed');
    expect(statuses(b).slice(-3)).toEqual(['running', 'running', 'released']);
    b.crash();
    expect(statuses(b).at(-2)).toBe('recovering');
    expect(statuses(b).at(-1)).toBe('running');
  });

  test('a follow-up in the inbox of an agent let go is released too; a finished turn stays its outcome', () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').endTurn('completed');
    expect(statuses(b).at(-1)).toBe('completed');
    b.receive('msg_2').released();
    expect(statuses(b).slice(-2)).toEqual(['running', 'released']);
  });

  test('a death reads killed, then recovering, then running', () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).crash({ killed: null });
    expect(statuses(b).slice(-4)).toEqual(['running', 'killed', 'recovering', 'running']);
  });

  test('a wait for a person is kept through a release', () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1);
    b.push('actor/parked', { waitingFor: 'question', ids: ['q_1'], commands: [] });
    b.released('run left for a person');
    expect(statuses(b).slice(-2)).toEqual(['waiting', 'waiting']);
  });
});
