import { describe, expect, it } from 'vitest';
import { admit, PERSON_ONLY_KINDS } from '../../src/actors/actor/inbox-door.js';
import { InboxKindSchema, type InboxMessage } from '../../src/protocol/inbox.js';
import { newId } from '../../src/protocol/ids.js';
import { turnRequest } from '../helpers/runtime.js';

const msg = (over: Partial<InboxMessage>): InboxMessage => ({
  id: newId('message'), from: 'client:cli', to: 'agt_x', kind: 'steer', target: 'next_step', wakeup: true, content: 'x',
  request: null, sentAt: new Date(0).toISOString(), ...over,
});

describe('the inbox door', () => {
  it('takes anything on the person channel, naming the sender a client whatever it claims', () => {
    expect(admit(msg({ kind: 'approval_response' }), 'person')).toEqual({ admit: true, from: 'client:cli' });
    expect(admit(msg({ kind: 'user_message', from: 'agt_01J0000000000000000000000' }), 'person')).toEqual({ admit: true, from: 'client:unknown' });
    expect(admit(msg({ from: 'client:CLI; rm -rf' }), 'person')).toEqual({ admit: true, from: 'client:unknown' });
  });

  it('refuses on the actors\' channel every kind only a person sends, a task\'s settings, and a claimed client', () => {
    for (const kind of InboxKindSchema.options) {
      const v = admit(msg({ kind, from: 'agt_01J0000000000000000000000' }), 'actor');
      expect(v.admit, kind).toBe(!PERSON_ONLY_KINDS.has(kind));
    }
    // a change of the goal (pause, resume, cancel) is a person's: an agent cannot unblock its own
    expect(admit(msg({ kind: 'goal_control', from: 'agt_a' }), 'actor')).toMatchObject({ admit: false, reason: expect.stringMatching(/a goal_control is a person's to send/) });
    expect(admit(msg({ kind: 'follow_up', from: 'agt_a', request: turnRequest('/tmp/ws') }), 'actor'))
      .toMatchObject({ admit: false, reason: expect.stringMatching(/task's settings/) });
    expect(admit(msg({ kind: 'steer', from: 'client:cli' }), 'actor')).toMatchObject({ admit: false, reason: expect.stringMatching(/claims to be from client:cli/) });
    expect(admit(msg({ kind: 'subagent_report', from: 'agt_a' }), 'actor')).toEqual({ admit: true, from: 'agt_a' });
  });
});
