import { describe, expect, it } from 'vitest';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { ClosedConnectionError, NoRespondersError, TimeoutError } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { createLogPublisher } from '../../src/bus/log-publisher.js';
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
});
