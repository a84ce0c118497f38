import { describe, expect, it } from 'vitest';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { ClosedConnectionError, NoRespondersError, TimeoutError } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { createLivePublisher, createLogPublisher } from '../../src/bus/log-publisher.js';
import { logSubject, STREAMS } from '../../src/bus/subjects.js';
import { newId } from '../../src/protocol/ids.js';
import { useTestBus } from '../helpers/test-bus.js';

describe('log publisher (acked JetStream publish on one reply subscription)', () => {
  const t = useTestBus();

  const subjectOf = () => {
    const actor = newId('agent');
    return logSubject(actor, actor);
  };

  it('stores a message with its headers and answers with the PubAck; a repeated ID is a duplicate of the same seq', async () => {
    const subject = subjectOf();
    const ack = await t.bus.logJs.publish(subject, '{"n":1}', { msgID: 'm-1', expect: { lastSubjectSequence: 0 } });
    expect(ack).toMatchObject({ stream: STREAMS.logs, duplicate: false });
    const stored = await t.bus.jsm.streams.getMessage(STREAMS.logs, { seq: ack.seq });
    expect(stored?.subject).toBe(subject);
    expect(stored?.string()).toBe('{"n":1}');
    expect(stored?.header.get('Nats-Msg-Id')).toBe('m-1');
    const again = await t.bus.logJs.publish(subject, '{"n":1}', { msgID: 'm-1', expect: { lastSubjectSequence: 0 } });
    expect(again).toMatchObject({ seq: ack.seq, duplicate: true });
  });

  it('answers many publishes at once, each with its own ack', async () => {
    const subjects = Array.from({ length: 50 }, subjectOf);
    const acks = await Promise.all(subjects.map((s, i) => t.bus.logJs.publish(s, String(i), { msgID: `many-${i}`, expect: { lastSubjectSequence: 0 } })));
    for (const [i, ack] of acks.entries()) {
      expect((await t.bus.jsm.streams.getMessage(STREAMS.logs, { seq: ack.seq }))?.string()).toBe(String(i));
    }
    expect(new Set(acks.map((a) => a.seq)).size).toBe(50);
  });

  it('refuses a stale fence with the JetStream API error 10071, naming the last sequence', async () => {
    const subject = subjectOf();
    const first = await t.bus.logJs.publish(subject, 'a', { msgID: 'f-1', expect: { lastSubjectSequence: 0 } });
    const err = await t.bus.logJs.publish(subject, 'b', { msgID: 'f-2', expect: { lastSubjectSequence: 0 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect((err as JetStreamApiError).code).toBe(JetStreamApiCodes.StreamWrongLastSequence);
    expect((err as Error).message).toContain(`wrong last sequence: ${first.seq}`);
  });

  it('says no stream listens (no responders), and times out when nothing answers', async () => {
    await expect(t.bus.logJs.publish('nostream.here', 'x', { msgID: 'n-1' })).rejects.toBeInstanceOf(NoRespondersError);
    // a core subscriber that never answers: a responder exists, so only the timeout ends the wait
    const silent = t.bus.nc.subscribe('silent.subject', { callback: () => {} });
    try {
      const t0 = Date.now();
      await expect(t.bus.logJs.publish('silent.subject', 'x', { msgID: 's-1', timeout: 300 })).rejects.toBeInstanceOf(TimeoutError);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    } finally {
      silent.unsubscribe();
    }
  });

  it('times each publish out at its own deadline, a short one sent after a long one and a later one after a sweep', async () => {
    const silent = t.bus.nc.subscribe('silent.deadlines', { callback: () => {} });
    try {
      const t0 = Date.now();
      const long = t.bus.logJs.publish('silent.deadlines', 'a', { msgID: 'd-1', timeout: 1_500 }).catch((e: unknown) => e);
      // due before the long one: the timer armed for the long one must not make it wait that long
      await expect(t.bus.logJs.publish('silent.deadlines', 'b', { msgID: 'd-2', timeout: 200 })).rejects.toBeInstanceOf(TimeoutError);
      const short = Date.now() - t0;
      expect(short).toBeGreaterThanOrEqual(200);
      expect(short).toBeLessThan(1_400);
      // the sweep that ended the short one still has the long one waiting: it is due at its own time
      expect(await long).toBeInstanceOf(TimeoutError);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1_500);
      // and a publish after the waiting map went empty is timed again
      const t1 = Date.now();
      await expect(t.bus.logJs.publish('silent.deadlines', 'c', { msgID: 'd-3', timeout: 200 })).rejects.toBeInstanceOf(TimeoutError);
      expect(Date.now() - t1).toBeGreaterThanOrEqual(200);
    } finally {
      silent.unsubscribe();
    }
  });

  it('fails what waits, and what comes after, once its connection closes', async () => {
    const nc = await connect({ servers: t.nats.url, noAsyncTraces: true });
    const publisher = createLogPublisher(nc, t.bus.js);
    const silent = t.bus.nc.subscribe('silent.close', { callback: () => {} });
    await t.bus.nc.flush();
    try {
      const waiting = publisher.publish('silent.close', 'x', { msgID: 'c-1', timeout: 10_000 }).catch((e: unknown) => e);
      await nc.flush();
      await nc.close();
      expect(await waiting).toBeInstanceOf(ClosedConnectionError);
      await expect(publisher.publish(subjectOf(), 'y', { msgID: 'c-2' })).rejects.toBeInstanceOf(ClosedConnectionError);
    } finally {
      silent.unsubscribe();
    }
  });

  describe('live messages', () => {
    const received = async (subject: string, n: number) => {
      const nc = await connect({ servers: t.nats.url, noAsyncTraces: true });
      const got: string[] = [];
      const sub = nc.subscribe(subject, { callback: (_e, m) => { got.push(m.string()); } });
      await nc.flush();
      return {
        got,
        done: async () => {
          for (let i = 0; i < 100 && got.length < n; i++) await new Promise((r) => setTimeout(r, 10));
          sub.unsubscribe();
          await nc.close();
          return got;
        },
      };
    };

    it('leave with the next commit, in order, without a write of their own', async () => {
      const live = createLivePublisher(t.bus.nc);
      const publisher = createLogPublisher(t.bus.nc, t.bus.js, live);
      const watch = await received('live.test.a', 2);
      const before = t.bus.nc.stats().outMsgs;
      live.publish('live.test.a', 'd1');
      live.publish('live.test.a', 'd2');
      // held: nothing handed to the connection yet
      expect(t.bus.nc.stats().outMsgs).toBe(before);
      const acked = publisher.publish(subjectOf(), 'commit', { msgID: newId('event'), expect: { lastSubjectSequence: 0 } });
      // both deltas and the commit were handed over in the same tick
      expect(t.bus.nc.stats().outMsgs).toBe(before + 3);
      await acked;
      expect(await watch.done()).toEqual(['d1', 'd2']);
    });

    it('leave on their own at the end of the event loop turn when no commit comes', async () => {
      const live = createLivePublisher(t.bus.nc);
      const watch = await received('live.test.b', 1);
      const before = t.bus.nc.stats().outMsgs;
      live.publish('live.test.b', 'alone');
      expect(t.bus.nc.stats().outMsgs).toBe(before);
      await new Promise((r) => setImmediate(r));
      expect(t.bus.nc.stats().outMsgs).toBe(before + 1);
      expect(await watch.done()).toEqual(['alone']);
    });

    it('are dropped, never thrown, once the connection is closed', async () => {
      const nc = await connect({ servers: t.nats.url, noAsyncTraces: true });
      const live = createLivePublisher(nc);
      await nc.close();
      live.publish('live.test.c', 'late');
      expect(() => live.flush()).not.toThrow();
      await new Promise((r) => setImmediate(r));
      expect(nc.stats().outMsgs).toBe(0);
    });
  });
});
