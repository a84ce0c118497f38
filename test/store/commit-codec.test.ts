import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decodeCommit } from '../../src/store/jetstream-log.js';
import { decodeCommitValue, encodeCommit } from '../../src/store/commit-codec.js';
import { EVENT_VERSION, type ActorEvent } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';

const actor = newId('agent');
const turn = newId('turn');
const [s1, s2] = [newId('step'), newId('step')];
const attempt = newId('attempt');
const call = newId('call');
const T0 = '2026-11-30T07:00:00.000Z';
const T1 = '2026-11-30T07:00:00.004Z';

let seq = 40;
function ev(type: string, data: object, scope: Partial<Pick<ActorEvent, 'turn' | 'step' | 'attempt' | 'call'>>, at = T0): ActorEvent {
  return { v: EVENT_VERSION, seq: ++seq, id: newId('event'), at, epoch: 3, actor, type, ...scope, data } as unknown as ActorEvent;
}

/** A tool step's second commit, as the runtime writes it: the old step ends, a new one starts. */
function stepCommit(): ActorEvent[] {
  return [
    ev('tool/denied', { reason: 'policy' }, { turn, step: s1, call }),
    ev('user/message', { messageId: newId('message'), content: 'between turns' }, {}, T1),
    ev('request/prepared', { digest: 'sha256:ab', bytes: 708, messages: 3 }, { turn, step: s2 }),
    ev('attempt/start', { index: 1, requestDigest: 'sha256:ab' }, { turn, step: s2, attempt }, T1),
    ev('tool/cancelled', { reason: 'tool_budget' }, { turn, step: s2, call }),
  ];
}

describe('commit codec', () => {
  it('decodes what it encodes to the same events: shared fields, events without a turn, other times and steps', () => {
    const events = stepCommit();
    const text = encodeCommit(events);
    const decoded = decodeCommitValue(JSON.parse(text));
    expect(decoded).toEqual({ events });
    // the event with no turn or step keeps none
    expect('turn' in (decoded as { events: ActorEvent[] }).events[1]!).toBe(false);
  });

  it('writes the fields events share once: a third smaller than the first format', () => {
    const events = stepCommit();
    const compact = Buffer.byteLength(encodeCommit(events));
    const full = Buffer.byteLength(JSON.stringify({ events }));
    expect(compact).toBeLessThan(full * 0.75);
    const header = JSON.parse(encodeCommit(events));
    expect(header).toMatchObject({ c: 2, v: EVENT_VERSION, actor, epoch: 3, seq: events[0]!.seq, at: T0, turn, step: s2 });
    expect(header.events[0]).not.toHaveProperty('actor');
  });

  it('still reads commits of the first format', () => {
    const events = stepCommit();
    expect(decodeCommit(Buffer.from(JSON.stringify({ events })), 7, actor)).toEqual(events);
  });

  it('refuses a compact commit with a bad header or an invalid event, naming where', () => {
    const good = JSON.parse(encodeCommit(stepCommit()));
    expect(decodeCommitValue({ ...good, seq: 0 })).toEqual({ issue: { path: 'seq', message: expect.any(String) } });
    const badEvent = { ...good, events: [{ ...good.events[0], data: { reason: 5 } }, ...good.events.slice(1)] };
    expect(decodeCommitValue(badEvent)).toMatchObject({ issue: { path: expect.stringMatching(/^events\.0\.data/) } });
    expect(() => decodeCommit(Buffer.from(JSON.stringify({ ...good, c: 9 })), 12)).toThrow(/stream seq 12 is not a valid commit: c:/);
  });

  it('keeps the actor check: a commit naming another actor is refused', () => {
    const text = encodeCommit(stepCommit());
    expect(() => decodeCommit(Buffer.from(text), 5, newId('agent'))).toThrow(/holds events of another actor/);
  });

  it('reads the stored fixtures of both formats to the same events', () => {
    const fixture = (name: string) => readFileSync(new URL(`../fixtures/log/${name}`, import.meta.url));
    const events = JSON.parse(fixture('events.json').toString('utf8'));
    expect(decodeCommit(fixture('commit-format-1.json'), 1, events[0].actor)).toEqual(events);
    expect(decodeCommit(fixture('commit-format-2.json'), 2, events[0].actor)).toEqual(events);
    // what the writer stores today is the second format, byte for byte
    expect(encodeCommit(events) + '\n').toBe(fixture('commit-format-2.json').toString('utf8'));
  });
});
