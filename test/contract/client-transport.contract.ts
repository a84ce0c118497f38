import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DirectoryEntry } from '../../src/bus/directory.js';
import type { ClientTransport, TransportEvent } from '../../src/client/transport.js';
import { NotFoundError } from '../../src/protocol/errors.js';
import type { EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import type { ActorLogWriter } from '../../src/store/log-port.js';
import { LogBuilder } from '../actors/log-builder.js';

/** A transport for one describe, and what its tests write and read beside it. */
export interface TransportSubject {
  transport: ClientTransport;
  /** Puts an agent in the runtime's directory (and, where the transport needs one, a holder so its mail is delivered). */
  agent(entry: DirectoryEntry): Promise<void>;
  /** A fenced writer of an agent's log, from its start. */
  writer(rootId: string, actorId: string): ActorLogWriter;
  /** The messages in an agent's inbox, in the order it took them. */
  inbox(actorId: string): Promise<InboxMessage[]>;
  close(): Promise<void>;
}

function entry(actorId: string, rootId = actorId, parentId: string | null = null): DirectoryEntry {
  const at = new Date().toISOString();
  return { actorId, kind: 'agent', parentId, rootId, status: 'running', title: actorId, workspace: '/tmp/ws', createdAt: at, updatedAt: at, labels: {} };
}

/** An agent's log: commit what its builder has gained since the last commit. */
async function agentLog(s: TransportSubject, actorId: string, rootId = actorId, parentId: string | null = null): Promise<{ b: LogBuilder; commit(): Promise<void> }> {
  await s.agent(entry(actorId, rootId, parentId));
  const writer = s.writer(rootId, actorId);
  const b = new LogBuilder();
  let sent = 0;
  return {
    b,
    async commit() {
      const drafts = b.events.slice(sent).map(({ type, data, turn, step, attempt, call }) => ({ type, data, turn, step, attempt, call }) as EventDraft);
      sent = b.events.length;
      await writer.commit(drafts);
    },
  };
}

/** Takes `n` events of a follow, then stops it. */
async function take(transport: ClientTransport, spec: Omit<Parameters<ClientTransport['follow']>[0], 'signal'>, n: number, during?: () => Promise<void>): Promise<TransportEvent[]> {
  const stop = new AbortController();
  const got: TransportEvent[] = [];
  const timer = setTimeout(() => stop.abort(), 20_000);
  try {
    const reading = (async () => {
      for await (const e of transport.follow({ ...spec, signal: stop.signal })) {
        got.push(e);
        if (got.length >= n) break;
      }
    })();
    await during?.();
    await reading;
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  return got;
}

/**
 * What every `ClientTransport` must do: follow one agent's log or its tree's from a cursor, each
 * committed event once, parsed, with its commit's stream sequence, live as it is committed; send
 * each of a person's commands as one inbox message whose ID it returns; an agent it does not know
 * is NotFoundError whichever way it is reached.
 */
export function clientTransportContract(name: string, open: () => Promise<TransportSubject>): void {
  describe(`ClientTransport contract: ${name}`, () => {
    let s: TransportSubject;
    beforeAll(async () => {
      s = await open();
    }, 60_000);
    afterAll(async () => {
      await s?.close();
    }, 60_000);

    it('follows an agent from its first event, then live: each event once, parsed, in order, with its stream sequence', async () => {
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1').startTurn('msg_1');
      await log.commit();
      const got = await take(s.transport, { agentId: id }, 6, async () => {
        log.b.startStep(1).startAttempt();
        await log.commit();
      });
      expect(got.map((e) => e.event.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(got.map((e) => e.event.type)).toEqual(['inbox/received', 'turn/start', 'user/message', 'step/start', 'request/prepared', 'attempt/start']);
      expect(got.every((e) => e.actorId === id)).toBe(true);
      // a commit's events share its stream sequence; a later commit has a later one
      expect(got[1]!.streamSeq).toBe(got[2]!.streamSeq);
      expect(got[3]!.streamSeq).toBeGreaterThan(got[2]!.streamSeq);
      // parsed: the turn's settings are the schema's, not a record of unknowns
      const start = got[1]!.event;
      expect(start.type === 'turn/start' && typeof start.data.settings.model).toBe('string');
    });

    it('follows on from a stream-sequence cursor: only the commits after it', async () => {
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1');
      await log.commit();
      log.b.startTurn('msg_1');
      await log.commit();
      const all = await take(s.transport, { agentId: id }, 3);
      const cursor = all[0]!.streamSeq;
      const after = await take(s.transport, { agentId: id, afterStreamSeq: cursor }, 2);
      expect(after.map((e) => e.event.seq)).toEqual([2, 3]);
      expect(after.every((e) => e.streamSeq > cursor)).toBe(true);
    });

    it('follows one agent after a log seq: the events after it', async () => {
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1').startTurn('msg_1').startStep(1);
      await log.commit();
      const got = await take(s.transport, { agentId: id, afterSeq: 3 }, 2);
      expect(got.map((e) => [e.event.seq, e.event.type])).toEqual([[4, 'step/start'], [5, 'request/prepared']]);
    });

    it('follows a tree: every log under the root in commit order, each event with its actor; one agent alone without the tree', async () => {
      const root = newId('agent');
      const child = newId('agent');
      const r = await agentLog(s, root);
      const c = await agentLog(s, child, root, root);
      r.b.receive('msg_1');
      await r.commit();
      c.b.receive('msg_2');
      await c.commit();
      r.b.startTurn('msg_1');
      await r.commit();
      const tree = await take(s.transport, { agentId: root, tree: true }, 4);
      expect(tree.map((e) => [e.actorId, e.event.seq])).toEqual([[root, 1], [child, 1], [root, 2], [root, 3]]);
      const streamSeqs = tree.map((e) => e.streamSeq);
      expect([...streamSeqs].sort((a, b) => a - b)).toEqual(streamSeqs);
      const alone = await take(s.transport, { agentId: root }, 3);
      expect(alone.every((e) => e.actorId === root)).toBe(true);
      // a tree from a cursor: the commits after it, of every log
      const after = await take(s.transport, { agentId: root, tree: true, afterStreamSeq: tree[0]!.streamSeq }, 3);
      expect(after.map((e) => [e.actorId, e.event.seq])).toEqual([[child, 1], [root, 2], [root, 3]]);
    });

    it('sends each command as one inbox message and returns its ID', async () => {
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1').startTurn('msg_1');
      await log.commit();
      const steer = await s.transport.send({ type: 'steer', agentId: id, text: 'prefer dark colours' });
      const inject = await s.transport.send({ type: 'inject', agentId: id, text: 'the walls are white' });
      const followUp = await s.transport.send({ type: 'follow_up', agentId: id, text: 'and the door?' });
      const submit = await s.transport.send({ type: 'submit', agentId: id, task: 'paint the door' });
      const interrupt = await s.transport.send({ type: 'interrupt', agentId: id });
      const ids = [steer, inject, followUp, submit, interrupt];
      for (const m of ids) expect(m).toMatch(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
      const got = await s.inbox(id);
      expect(got.map((m) => m.id)).toEqual(ids);
      expect(got.map((m) => [m.kind, m.target, m.wakeup])).toEqual([
        ['steer', 'next_step', true], ['inject', 'next_step', false], ['follow_up', 'next_turn', true], ['follow_up', 'next_turn', true],
        ['interrupt', 'now', true],
      ]);
      expect(got.map((m) => m.content)).toEqual(['prefer dark colours', 'the walls are white', 'and the door?', 'paint the door', 'interrupted']);
      expect(got.every((m) => m.to === id && m.from.startsWith('client:'))).toBe(true);
    });

    it('sends a change of the goal as a goal_control message against the revision it names; an agent with no goal is NotFoundError', async () => {
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1').startTurn('msg_1');
      await log.commit();
      await expect(s.transport.send({ type: 'goal', agentId: id, change: { action: 'pause', expectedRevision: 1 } })).rejects.toBeInstanceOf(NotFoundError);
      expect(await s.inbox(id)).toEqual([]);
      log.b.push('goal/created', { goalId: newId('goal'), objective: 'paint the house', budget: {}, maxIdleTurns: 2 }, { turn: log.b.turn });
      await log.commit();
      const pause = await s.transport.send({ type: 'goal', agentId: id, change: { action: 'pause', expectedRevision: 1 } });
      const got = await s.inbox(id);
      expect(got.map((m) => [m.id, m.kind, m.target, m.wakeup])).toEqual([[pause, 'goal_control', 'now', true]]);
      expect(JSON.parse(got[0]!.content)).toEqual({ action: 'pause', expectedRevision: 1 });
    });

    it('an agent it does not know is NotFoundError, to follow or to send to; so is an approval or a question the agent does not have', async () => {
      const unknown = newId('agent');
      await expect(take(s.transport, { agentId: unknown }, 1)).rejects.toBeInstanceOf(NotFoundError);
      await expect(s.transport.send({ type: 'steer', agentId: unknown, text: 'hello?' })).rejects.toBeInstanceOf(NotFoundError);
      const id = newId('agent');
      const log = await agentLog(s, id);
      log.b.receive('msg_1').startTurn('msg_1');
      await log.commit();
      await expect(s.transport.send({ type: 'approve', agentId: id, approvalId: newId('approval') })).rejects.toBeInstanceOf(NotFoundError);
      await expect(s.transport.send({ type: 'deny', agentId: id, approvalId: newId('approval'), reason: 'no' })).rejects.toBeInstanceOf(NotFoundError);
      await expect(s.transport.send({ type: 'answer', agentId: id, questionId: newId('question'), answer: { text: 'blue' } })).rejects.toBeInstanceOf(NotFoundError);
      expect(await s.inbox(id)).toEqual([]);
    });
  });
}
