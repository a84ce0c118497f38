// The one turn follower over the bus transport on a real nats-server, its logs committed through
// the real JetStream writer: it ends at the turn's end and folds nothing after it, follows a goal
// into its continuation and a task past the turn that was running when it came, says a park that
// waits on a person (not one whose answer is on its way, unless the agent refused that answer),
// and skips what the projection it starts from holds already.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createBusTransport } from '../../src/client/bus-transport.js';
import { followTurnSteps, type TurnStep } from '../../src/client/turn-follower.js';
import { INBOX_MAX_MSG_BYTES } from '../../src/bus/streams.js';
import type { EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { LogBuilder } from '../actors/log-builder.js';
import { openGatewayFixture, type GatewayFixture } from '../server/gateway-fixture.js';

let fx: GatewayFixture;

beforeAll(async () => {
  fx = await openGatewayFixture();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
}, 60_000);

/** Commits a builder's events to a new agent's log, in commits of the given sizes (the rest in one). */
async function agentWith(b: LogBuilder, sizes: number[] = []): Promise<string> {
  const id = newId('agent');
  const at = new Date().toISOString();
  await fx.rt.bus.directory.put({ actorId: id, kind: 'agent', parentId: null, rootId: id, status: 'running', title: id, workspace: '/tmp/ws', createdAt: at, updatedAt: at, labels: {} });
  const logs = createJetStreamLogs({ publisher: fx.rt.bus.logJs, js: fx.rt.bus.js, jsm: fx.rt.bus.jsm });
  const writer = logs.writer({ rootId: id, actorId: id, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  const drafts = b.events.map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft);
  let at0 = 0;
  for (const n of [...sizes, drafts.length]) {
    const part = drafts.slice(at0, at0 + n);
    at0 += part.length;
    if (part.length > 0) await writer.commit(part);
  }
  return id;
}

/** Follows with the given options until the follower ends or `until` says enough; the steps, and the projection. */
async function follow(agentId: string, o: { from?: Projection; answered?: Map<string, string>; taskMessageId?: string; quietUntilSeq?: number; until?: (s: TurnStep) => boolean } = {}): Promise<{ steps: TurnStep[]; p: Projection }> {
  const transport = createBusTransport({ reader: fx.rt.reader, directory: fx.rt.bus.directory, person: () => fx.rt.bus.person(), limitBytes: INBOX_MAX_MSG_BYTES });
  const p = o.from ?? emptyProjection(agentId);
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), 15_000);
  const steps: TurnStep[] = [];
  try {
    for await (const s of followTurnSteps({
      transport, agentId, from: p, answered: o.answered ?? new Map(), signal: stop.signal,
      ...(o.taskMessageId !== undefined ? { taskMessageId: o.taskMessageId } : {}), ...(o.quietUntilSeq !== undefined ? { quietUntilSeq: o.quietUntilSeq } : {}),
    })) {
      steps.push(s);
      if (o.until?.(s)) break;
    }
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  return { steps, p };
}

const kinds = (steps: TurnStep[]): string[] => steps.map((s) => (s.kind === 'event' ? s.event.type : s.kind));

/** A step whose call waits for approval `apr_1`, and the agent's own fact that it waits. */
function parkedOn(b: LogBuilder): LogBuilder {
  b.startStep(1).startAttempt().endAttempt().acceptCall('write_file');
  b.call({ name: 'write_file', effects: 'possible' });
  b.push('approval/requested', { approvalId: 'apr_1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:x', expiresAt: Date.parse('2099-01-01') }, { turn: b.turn, step: b.step, call: 'call_1' });
  b.push('actor/parked', { waitingFor: 'approval', ids: ['apr_1'], commands: [] });
  return b;
}

describe('followTurnSteps', () => {
  test('ends at the turn end and folds nothing after it, though the next turn is in the same commit', async () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').endTurn('completed').receive('msg_2').startTurn('msg_2');
    const id = await agentWith(b);
    const { steps, p } = await follow(id);
    expect(kinds(steps)).toEqual(['inbox/received', 'turn/start', 'user/message', 'turn/end', 'ended']);
    expect(p.seq).toBe(4);
    // what the projection holds is skipped: the next follow from it starts at the next turn
    const next = await follow(id, { from: p, until: (s) => s.kind === 'event' && s.event.type === 'user/message' });
    expect(next.steps.map((s) => (s.kind === 'event' ? s.event.seq : s.kind))).toEqual([5, 6, 7]);
  });

  test('a turn whose goal goes on is followed into its continuation', async () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1');
    b.push('turn/end', { outcome: 'completed', reason: null, answer: 'part one', steps: 1, toolCalls: 0, usage: { inputTokens: 1, outputTokens: 1, estimated: false }, goalContinues: true }, { turn: b.turn });
    b.turn = undefined;
    b.startTurn().endTurn('completed', 'all done');
    const { steps } = await follow(await agentWith(b));
    const ended = steps.at(-1)!;
    expect(ended.kind === 'ended' && ended.event.data.answer).toBe('all done');
    expect(steps.filter((s) => s.kind === 'ended')).toHaveLength(1);
    expect(kinds(steps).filter((k) => k === 'turn/end')).toHaveLength(2);
  });

  test('with a task message: quiet until its receipt, and past the turn that was running when it came', async () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').receive('msg_task', 'the next task').endTurn('completed', 'first').startTurn('msg_task').endTurn('completed', 'second');
    const { steps } = await follow(await agentWith(b), { taskMessageId: 'msg_task' });
    expect(steps[0]!.kind === 'event' && steps[0]!.event.type).toBe('inbox/received');
    const ended = steps.at(-1)!;
    expect(ended.kind === 'ended' && ended.event.data.answer).toBe('second');
    expect(steps.filter((s) => s.kind === 'ended')).toHaveLength(1);
  });

  test('says a park that waits on a person; not one whose answer is on its way, until the agent refuses that answer', async () => {
    const b = parkedOn(new LogBuilder().receive('msg_1').startTurn('msg_1'));
    const id = await agentWith(b);
    const first = await follow(id, { until: (s) => s.kind === 'parked' });
    expect(first.steps.at(-1)).toMatchObject({ kind: 'parked', waiting: ['apr_1'] });

    // our answer is on its way: the park is not the person's to answer again
    const answered = new Map([['apr_1', 'msg_answer']]);
    const b2 = parkedOn(new LogBuilder().receive('msg_1').startTurn('msg_1'));
    b2.push('inbox/cancelled', { messageId: 'msg_answer', reason: 'stale plan' });
    b2.push('actor/parked', { waitingFor: 'approval', ids: ['apr_1'], commands: [] });
    const id2 = await agentWith(b2, [b2.events.length - 2]);
    const second = await follow(id2, { answered, until: (s) => s.kind === 'parked' });
    const parks = second.steps.filter((s) => s.kind === 'parked');
    // the first park passed unasked; the one after the refusal asks
    expect(parks).toHaveLength(1);
    expect(kinds(second.steps).slice(-3)).toEqual(['inbox/cancelled', 'actor/parked', 'parked']);
    expect(answered.has('apr_1')).toBe(false);
  });

  test('quietUntilSeq folds the events up to it without handing them, and a turn end among them is not the one followed', async () => {
    const b = new LogBuilder().receive('msg_1').startTurn('msg_1').endTurn('completed', 'old').receive('msg_2').startTurn('msg_2').endTurn('completed', 'new');
    const { steps, p } = await follow(await agentWith(b), { quietUntilSeq: 4 });
    expect(steps[0]!.kind === 'event' && steps[0]!.event.seq).toBe(5);
    const ended = steps.at(-1)!;
    expect(ended.kind === 'ended' && ended.event.data.answer).toBe('new');
    const whole = emptyProjection(p.actorId);
    for (const e of b.events) foldEvent(whole, e);
    expect(p.turns).toBe(whole.turns);
  });
});
