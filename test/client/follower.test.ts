// The one client follower on the in-memory log: the log after a seq, then live commits, each event
// folded once with the status that follows from it; a wait for a person is the agent's own
// `actor/parked`, never a pause. The tree follower does the same over every actor under one root,
// in stream order from a stream-seq cursor, each actor folded on its own.
import { describe, expect, test } from 'vitest';
import { followAgent, followTree, type ClientEvent, type TreeClientEvent } from '../../src/client/follower.js';
import { statusOf } from '../../src/client/status.js';
import type { EventDraft } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
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

async function collect<E extends ClientEvent>(it: AsyncIterable<E>, until: (e: E) => boolean = () => false): Promise<E[]> {
  const seen: E[] = [];
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

const CHILD = 'agt_01TESTCHILD00000000000000000';
const STRANGER = 'agt_01TESTSTRANGER0000000000000';

/** A tree (the root parked for an approval, a child that answered) and an actor of another root, committed in turn. */
async function treeLog() {
  const logs = createMemoryLogs();
  const writer = (rootId: string, actorId: string) => {
    const w = logs.writer({ rootId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
    return (events: LogBuilder['events']) =>
      w.commit(events.map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft));
  };
  const [root, child, stranger] = [writer(ROOT, ACTOR), writer(ROOT, CHILD), writer(STRANGER, STRANGER)];
  const parked = parkedTurn();
  const answered = new LogBuilder().receive('msg_c', 'Read notes.txt').startTurn('msg_c').startStep(1).answer('Notes read.').endStep('final');
  const split = (b: LogBuilder, n: number) => [b.events.slice(0, n), b.events.slice(n)] as const;
  const [root1, root2] = split(parked, 3);
  const [child1, child2] = split(answered, 2);
  await root(root1);
  await stranger(new LogBuilder().receive('msg_s').events);
  await child(child1);
  await root(root2);
  await child(child2);
  return { logs, root, child, stranger, events: { root: parked.events.length, child: answered.events.length } };
}

/** The state an actor's whole log folds to, read on its own. */
async function foldedAlone(logs: ReturnType<typeof createMemoryLogs>, actorId: string): Promise<Projection> {
  const p = emptyProjection(actorId);
  for await (const _ of followAgent({ reader: logs.reader, rootId: ROOT, actorId, from: p })) void _;
  return p;
}

describe('followTree', () => {
  test('without a signal it reads every actor of the tree in stream order, each event folded into its own actor\'s state', async () => {
    const { logs, events } = await treeLog();
    const seen = await collect(followTree({ reader: logs.reader, rootId: ROOT }));
    expect(seen.map((e) => e.actorId)).toEqual([...Array(3).fill(ACTOR), ...Array(2).fill(CHILD), ...Array(events.root - 3).fill(ACTOR), ...Array(events.child - 2).fill(CHILD)]);
    expect(seen.map((e) => e.streamSeq)).toEqual([...seen.map((e) => e.streamSeq)].sort((a, b) => a - b));
    expect(seen.every((e) => e.projection.actorId === e.actorId && e.projection.seq === e.event.seq)).toBe(true);
    expect(seen.filter((e) => e.actorId === ACTOR).at(-1)).toMatchObject({ status: 'waiting', event: { type: 'actor/parked' } });
    expect(seen.filter((e) => e.actorId === CHILD).at(-1)!.status).toBe('running'); // a step ended, the turn is open
    expect(seen.at(-1)!.projection).toEqual(await foldedAlone(logs, CHILD));
  });

  test('from a cursor it reads only later commits, and an actor met mid-log has its earlier events folded from its own log', async () => {
    const { logs } = await treeLog();
    const all = await collect(followTree({ reader: logs.reader, rootId: ROOT }));
    // after the child's first commit: the root's and the child's rest
    const cursor = all.find((e) => e.actorId === CHILD)!.streamSeq;
    const projections = new Map<string, Projection>();
    const seen = await collect(followTree({ reader: logs.reader, rootId: ROOT, afterStreamSeq: cursor, projections }));
    expect(seen.map((e) => [e.actorId, e.event.seq])).toEqual(all.filter((e) => e.streamSeq > cursor).map((e) => [e.actorId, e.event.seq]));
    expect(projections.get(ACTOR)).toEqual(await foldedAlone(logs, ACTOR));
    expect(projections.get(CHILD)).toEqual(await foldedAlone(logs, CHILD));
    expect(seen.filter((e) => e.actorId === ACTOR).at(-1)!.status).toBe('waiting');
    expect(await collect(followTree({ reader: logs.reader, rootId: ROOT, afterStreamSeq: all.at(-1)!.streamSeq }))).toEqual([]);
  });

  test('with a signal it follows live commits of any actor of the tree, none of another root\'s, until aborted', async () => {
    const { logs, root, child, stranger } = await treeLog();
    const end = (await collect(followTree({ reader: logs.reader, rootId: ROOT }))).at(-1)!.streamSeq;
    const stop = new AbortController();
    const live = collect(followTree({ reader: logs.reader, rootId: ROOT, afterStreamSeq: end, signal: stop.signal }),
      (e: TreeClientEvent) => e.event.type === 'turn/end');
    await stranger(new LogBuilder().receive('msg_s2').events);
    const childEnd = new LogBuilder();
    childEnd.turn = 'turn_1';
    await child(childEnd.endTurn('completed', 'Notes read.').events);
    const seen = await live;
    expect(seen.map((e) => [e.actorId, e.event.type, e.status])).toEqual([[CHILD, 'turn/end', 'completed']]);
    // met first at its turn/end: the rest of its state came from its own log
    expect(seen[0]!.projection).toEqual(await foldedAlone(logs, CHILD));
    stop.abort();
    await root(new LogBuilder().receive('msg_late').events);
    expect(await collect(followTree({ reader: logs.reader, rootId: ROOT, signal: stop.signal }))).toEqual([]); // aborted: it ends at once
  });

  test('an abort ends a live tree follow that has nothing to read', async () => {
    const { logs, events } = await treeLog();
    const stop = new AbortController();
    const seen = collect(followTree({ reader: logs.reader, rootId: ROOT, signal: stop.signal }));
    setTimeout(() => stop.abort(), 50);
    expect((await seen).length).toBe(events.root + events.child);
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
