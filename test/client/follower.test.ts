// The one client follower on the in-memory log: the log after a seq, then live commits, each event
// folded once with the status that follows from it; a wait for a person is the agent's own
// `actor/parked`, never a pause.
import { describe, expect, test } from 'vitest';
import { followAgent, type ClientEvent } from '../../src/client/follower.js';
import { statusOf } from '../../src/client/status.js';
import type { EventDraft } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { createMemoryLogs } from '../../src/store/memory-log.js';
import { ACTOR, LogBuilder } from '../actors/log-builder.js';

const ROOT = ACTOR;

/** A log holding `b`'s events, and a writer to commit more. */
async function logOf(b: LogBuilder) {
  const logs = createMemoryLogs();
  const writer = logs.writer({ rootId: ROOT, actorId: ACTOR, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  const drafts = (events: LogBuilder['events']): EventDraft[] =>
    events.map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft);
  await writer.commit(drafts(b.events));
  return { logs, commit: (more: LogBuilder['events']) => writer.commit(drafts(more)) };
}

/** A turn that asks for an approval and parks for it. */
function parkedTurn(): LogBuilder {
  const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1).startAttempt().endAttempt().acceptCall('write_file');
  b.call({ name: 'write_file', effects: 'possible' });
  b.push('approval/requested', { approvalId: 'apr_1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:x', expiresAt: Date.parse('2027-01-01') },
    { turn: b.turn, step: b.step, call: 'call_1' });
  b.push('actor/parked', { waitingFor: 'approval', ids: ['apr_1'], commands: [`actorloop approve ${ACTOR} apr_1`] });
  return b;
}

async function collect(it: AsyncIterable<ClientEvent>, until: (e: ClientEvent) => boolean = () => false): Promise<ClientEvent[]> {
  const seen: ClientEvent[] = [];
  for await (const e of it) {
    // copy what changes: the follower folds into one projection
    seen.push({ ...e, projection: structuredClone(e.projection) });
    if (until(e)) break;
  }
  return seen;
}

describe('followAgent', () => {
  test('without a signal it reads the log to its end, each event with the status after it', async () => {
    const { logs } = await logOf(parkedTurn());
    const seen = await collect(followAgent({ reader: logs.reader, rootId: ROOT, actorId: ACTOR }));
    expect(seen.map((e) => e.event.seq)).toEqual(seen.map((_, i) => i + 1));
    expect(seen[0]!.status).toBe('running'); // a task received starts a turn
    expect(seen.at(-2)!.status).toBe('running'); // an approval asked for is not yet a wait
    expect(seen.at(-1)).toMatchObject({ status: 'waiting', event: { type: 'actor/parked' } });
    expect(seen.at(-1)!.projection.parked).toEqual({ waitingFor: 'approval', ids: ['apr_1'], commands: [`actorloop approve ${ACTOR} apr_1`] });
  });

  test('from a projection it reads only what comes after its seq, then follows live commits until aborted', async () => {
    const b = parkedTurn();
    const { logs, commit } = await logOf(b);
    const from = emptyProjection(ACTOR);
    for await (const _ of followAgent({ reader: logs.reader, rootId: ROOT, actorId: ACTOR, from })) void _;
    expect(from.seq).toBe(b.events.length);

    const stop = new AbortController();
    const live = collect(followAgent({ reader: logs.reader, rootId: ROOT, actorId: ACTOR, from, signal: stop.signal }), (e) => e.event.type === 'turn/end');
    const start = b.events.length;
    b.push('approval/granted', { approvalId: 'apr_1', by: 'client:cli' }, { turn: b.turn, step: b.step, call: 'call_1' });
    b.result('call_1').endStep('tool_calls').endTurn('cancelled', null);
    await commit(b.events.slice(start));
    const seen = await live;
    stop.abort();
    expect(seen[0]!.event.seq).toBe(start + 1);
    expect(seen[0]!.status).toBe('running'); // answered: the wait is over
    expect(seen.at(-1)).toMatchObject({ status: 'cancelled', event: { type: 'turn/end' } });
  });

  test('an abort ends a live follow that has nothing to read', async () => {
    const { logs } = await logOf(parkedTurn());
    const stop = new AbortController();
    const from = emptyProjection(ACTOR);
    const seen = collect(followAgent({ reader: logs.reader, rootId: ROOT, actorId: ACTOR, from, signal: stop.signal }));
    setTimeout(() => stop.abort(), 50);
    expect((await seen).length).toBe(parkedTurn().events.length);
  });
});

describe('statusOf', () => {
  test('idle before any turn, the last outcome after one, waiting only once parked, running again after a release and recovery', () => {
    const p = emptyProjection(ACTOR);
    expect(statusOf(p)).toBe('idle');
    const b = parkedTurn().released('run left for a person');
    const fold = (n: number) => {
      const q = emptyProjection(ACTOR);
      for (const e of b.events.slice(0, n)) foldEvent(q, e);
      return q;
    };
    expect(statusOf(fold(b.events.length))).toBe('waiting'); // a release keeps the wait
    b.push('recovery/started', { fromSeq: b.events.length, reason: 'resume' });
    expect(statusOf(fold(b.events.length))).toBe('running');
  });
});
