import { beforeAll, describe, expect, it } from 'vitest';
import type { JetStreamClient } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import type { Bus } from '../../src/bus/connection.js';
import { ensureStreams } from '../../src/bus/streams.js';
import { commitMsgId, logSubject, STREAMS } from '../../src/bus/subjects.js';
import { hasCode } from '../../src/protocol/errors.js';
import { draft, EVENT_VERSION, type ActorEvent, type EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createJetStreamLog, createLogReader } from '../../src/store/jetstream-log.js';
import type { LogReader, StoredEvent } from '../../src/store/log-port.js';
import { useTestBus } from '../helpers/test-bus.js';

const say = (content: string): EventDraft => draft('user/message', { messageId: newId('message'), content });

async function collect(it: AsyncIterable<StoredEvent>): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

/** A JetStream client whose publish misbehaves as `fake` says; everything else is the real one. */
function withPublish(js: JetStreamClient, fake: (real: JetStreamClient['publish'], ...a: Parameters<JetStreamClient['publish']>) => ReturnType<JetStreamClient['publish']>): JetStreamClient {
  const real = js.publish.bind(js);
  return new Proxy(js, {
    get(target, prop) {
      if (prop === 'publish') return (...a: Parameters<JetStreamClient['publish']>) => fake(real, ...a);
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('JetStream log', () => {
  const nats = useTestBus();
  let bus: Bus;
  let reader: LogReader;
  const root = newId('agent');
  const fresh = () => ({ seq: 0, streamSeq: 0 });
  beforeAll(async () => {
    bus = nats.bus;
    reader = createLogReader({ js: bus.js, jsm: bus.jsm });
  });

  it('stamps, validates and commits several events as ONE message', async () => {
    const actor = newId('agent');
    const at = new Date('2025-01-02T03:04:05.000Z');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 3, now: () => at });
    const events = await log.commit([say('a'), say('b'), { ...say('c'), at: '2020-01-01T00:00:00.000Z' }]);
    expect(events.map((e) => [e.seq, e.v, e.epoch, e.actor, e.at])).toEqual([
      [1, EVENT_VERSION, 3, actor, at.toISOString()],
      [2, EVENT_VERSION, 3, actor, at.toISOString()],
      [3, EVENT_VERSION, 3, actor, '2020-01-01T00:00:00.000Z'],
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(3);
    const info = await bus.jsm.streams.info(STREAMS.logs, { subjects_filter: logSubject(root, actor) });
    expect(info.state.subjects?.[logSubject(root, actor)]).toBe(1);
    const end = await reader.end(root, actor);
    expect(log.position()).toEqual(end);
    expect(end.seq).toBe(3);
    const stored = await bus.jsm.streams.getMessage(STREAMS.logs, { seq: end.streamSeq });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(commitMsgId(actor, 1));
  });

  it('fills in the ID of a draft already stamped for its place, and copies any other draft untouched', async () => {
    const actor = newId('agent');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 2 });
    const at = '2025-01-02T03:04:05.000Z';
    const staged = { ...say('staged'), v: EVENT_VERSION, seq: 1, id: '', at, epoch: 2, actor };
    // stamped for another place (seq 5), another epoch, another actor: each is copied
    const wrongSeq = { ...say('wrong seq'), v: EVENT_VERSION, seq: 5, id: '', at, epoch: 2, actor };
    const wrongEpoch = { ...say('wrong epoch'), v: EVENT_VERSION, seq: 3, id: '', at, epoch: 1, actor };
    const events = await log.commit([staged, wrongSeq, wrongEpoch] as never[]);
    expect(events[0]).toBe(staged);
    expect(staged.id).toMatch(/^evt_/);
    expect(events[1]).not.toBe(wrongSeq);
    expect(wrongSeq).toMatchObject({ seq: 5, id: '' });
    expect(events[2]).not.toBe(wrongEpoch);
    expect(wrongEpoch).toMatchObject({ epoch: 1, id: '' });
    expect(events.map((e) => [e.seq, e.epoch, e.actor])).toEqual([[1, 2, actor], [2, 2, actor], [3, 2, actor]]);
    // what was stored is what came back
    const stored = [];
    for await (const s of reader.read(root, actor)) stored.push(s.event);
    expect(stored).toEqual(events);
  });

  it('runs concurrent commits of one writer one after another', async () => {
    const actor = newId('agent');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
    const results = await Promise.all([log.commit([say('1')]), log.commit([say('2'), say('3')]), log.commit([say('4')])]);
    expect(results.map((r) => r.map((e) => e.seq))).toEqual([[1], [2, 3], [4]]);
    expect((await collect(reader.read(root, actor))).map((s) => s.event.seq)).toEqual([1, 2, 3, 4]);
  });

  it('reads a log of many commits interleaved with another actor, past the direct reads, from any point', async () => {
    const a = newId('agent');
    const b = newId('agent');
    const logA = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: a, position: fresh(), epoch: 1 });
    const logB = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: b, position: fresh(), epoch: 1 });
    const streamSeqs: number[] = [];
    for (let i = 0; i < 20; i++) {
      await logA.commit([say(`a${i}`), say(`a${i}'`)]);
      streamSeqs.push(logA.position().streamSeq);
      await logB.commit([say(`b${i}`)]);
    }
    const seqs = (it: AsyncIterable<StoredEvent>) => collect(it).then((s) => s.map((e) => e.event.seq));
    const all = Array.from({ length: 40 }, (_, i) => i + 1);
    expect(await seqs(reader.read(root, a))).toEqual(all);
    expect(await seqs(reader.read(root, b))).toEqual(all.slice(0, 20));
    // a tail of a few commits (direct gets only), and one longer than them (then a consumer)
    expect(await seqs(reader.read(root, a, { afterSeq: 35, fromStreamSeq: streamSeqs[17] }))).toEqual([36, 37, 38, 39, 40]);
    expect(await seqs(reader.read(root, a, { afterSeq: 5, fromStreamSeq: streamSeqs[2] }))).toEqual(all.slice(5));
    // the end as the caller read it: later commits are not part of this read
    const end = await reader.end(root, a);
    await logA.commit([say('after')]);
    expect(await seqs(reader.read(root, a, { afterSeq: 38, end }))).toEqual([39, 40]);
    expect(await seqs(reader.read(root, a, { afterSeq: 38 }))).toEqual([39, 40, 41]);
  });

  it('refuses an invalid event, naming its type and field, and stores nothing', async () => {
    const actor = newId('agent');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
    const bad = { type: 'user/message', data: { messageId: 'm', content: 42 } } as unknown as EventDraft;
    const err = await log.commit([say('ok'), bad]).catch((e: unknown) => e);
    expect(hasCode(err, 'store.invalid_event')).toBe(true);
    expect((err as Error).message).toMatch(/user\/message.*data\.content/);
    expect(await reader.end(root, actor)).toEqual({ seq: 0, streamSeq: 0 });
    await log.commit([say('still usable')]);
    expect(log.position().seq).toBe(1);
  });

  it('fences a stale writer: 10071 (or a foreign duplicate) makes it refuse every later commit', async () => {
    const actor = newId('agent');
    const a = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 1 });
    const first = await a.commit([say('a1')]);
    const start = a.position();
    // two writers from the same position: A (the lease holder) and B (a zombie)
    const w1 = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: start, epoch: 2 });
    const zombie = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: start, epoch: 1 });
    const won = await w1.commit([say('w1-a'), say('w1-b')]);
    const err = await zombie.commit([say('zombie-1'), say('zombie-2'), say('zombie-3')]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'store.fenced', retryable: false });
    await expect(zombie.commit([say('again')])).rejects.toMatchObject({ code: 'store.fenced' });
    await expect(zombie.commit([say('and again')])).rejects.toMatchObject({ code: 'store.fenced' });
    // the log holds only the winners' events: none of the fenced multi-event commit
    const all = (await collect(reader.read(root, actor))).map((s) => s.event);
    expect(all.map((e) => e.id)).toEqual([...first, ...won].map((e) => e.id));
    expect(all.every((e) => e.type !== 'user/message' || !e.data.content.startsWith('zombie'))).toBe(true);
    // the winner goes on
    await w1.commit([say('w1-c')]);
    expect(w1.position().seq).toBe(4);
  });

  it('fences with JetStream error 10071 once the dedupe window no longer covers the seq', async () => {
    const actor = newId('agent');
    const info = await bus.jsm.streams.info(STREAMS.logs);
    await bus.jsm.streams.update(STREAMS.logs, { ...info.config, duplicate_window: nanos(200) });
    try {
      const a = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 1 });
      const zombie = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
      const won = await a.commit([say('a')]);
      await new Promise((r) => setTimeout(r, 1_000));
      const err = await zombie.commit([say('z1'), say('z2')]).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'store.fenced' });
      expect(((err as Error).cause as { code?: number }).code).toBe(10071);
      await expect(zombie.commit([say('z3')])).rejects.toMatchObject({ code: 'store.fenced' });
      expect((await collect(reader.read(root, actor))).map((s) => s.event.id)).toEqual(won.map((e) => e.id));
    } finally {
      await ensureStreams(bus.jsm);
    }
  });

  it('stores a commit published twice with the same msgID once', async () => {
    const actor = newId('agent');
    const subject = logSubject(root, actor);
    const event = {
      v: EVENT_VERSION, seq: 1, id: newId('event'), at: new Date().toISOString(), epoch: 0, actor,
      type: 'actor/stopped', data: { reason: 'test' },
    };
    const payload = JSON.stringify({ events: [event] });
    const opts = { msgID: commitMsgId(actor, 1), expect: { lastSubjectSequence: 0 } };
    const one = await bus.js.publish(subject, payload, opts);
    // the retry carries the same (now stale) expected sequence: dedupe must win
    const two = await bus.js.publish(subject, payload, opts);
    expect(one.duplicate).toBe(false);
    expect(two).toMatchObject({ seq: one.seq, duplicate: true });
    const events = await collect(reader.read(root, actor));
    expect(events.map((e) => e.event.id)).toEqual([event.id]);
  });

  it('retries an unknown publish with the same msgID; a landed first try is not stored twice', async () => {
    const actor = newId('agent');
    let calls = 0;
    const ids: string[] = [];
    // the first publish reaches the server but its ack is lost
    const flaky = withPublish(bus.js, async (real, subj, data, o) => {
      calls++;
      ids.push(o?.msgID ?? '');
      const ack = await real(subj, data, o);
      if (calls === 1) throw new Error('TIMEOUT');
      return ack;
    });
    const log = createJetStreamLog({ js: flaky, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
    const events = await log.commit([say('x'), say('y')]);
    expect(calls).toBe(2);
    expect(ids).toEqual([commitMsgId(actor, 1), commitMsgId(actor, 1)]);
    const stored = await collect(reader.read(root, actor));
    expect(stored.map((s) => s.event.id)).toEqual(events.map((e) => e.id));
    expect(new Set(stored.map((s) => s.streamSeq)).size).toBe(1);
    expect(log.position()).toEqual(await reader.end(root, actor));
  });

  it('after exhausting retries reports publish_unknown; the same drafts settle it once', async () => {
    const actor = newId('agent');
    let down = true;
    const flaky = withPublish(bus.js, async (real, subj, data, o) => {
      if (down) {
        await real(subj, data, o); // it lands, but nobody hears back
        throw new Error('TIMEOUT');
      }
      return real(subj, data, o);
    });
    const log = createJetStreamLog({ js: flaky, rootId: root, actorId: actor, position: fresh(), epoch: 0, maxAttempts: 2 });
    const drafts = [say('p')];
    const err = await log.commit(drafts).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'store.publish_unknown', retryable: true });
    await expect(log.commit([say('other')])).rejects.toMatchObject({ code: 'store.publish_unknown' });
    down = false;
    const events = await log.commit(drafts);
    expect(events).toHaveLength(1);
    const stored = await collect(reader.read(root, actor));
    expect(stored.map((s) => s.event.id)).toEqual(events.map((e) => e.id));
    await log.commit([say('next')]);
    expect(log.position().seq).toBe(2);
  });

  it('recognises its own landed commit when a late retry meets the sequence check', async () => {
    const actor = newId('agent');
    const info = await bus.jsm.streams.info(STREAMS.logs);
    await bus.jsm.streams.update(STREAMS.logs, { ...info.config, duplicate_window: nanos(200) });
    try {
      let calls = 0;
      let retryError: unknown;
      const slow = withPublish(bus.js, async (real, subj, data, o) => {
        calls++;
        if (calls === 1) {
          await real(subj, data, o);
          await new Promise((r) => setTimeout(r, 1_000)); // the dedupe entry expires meanwhile
          throw new Error('TIMEOUT');
        }
        return real(subj, data, o).catch((e: unknown) => { retryError = e; throw e; });
      });
      const log = createJetStreamLog({ js: slow, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
      const events = await log.commit([say('late')]);
      expect(calls).toBe(2);
      expect((retryError as { code?: number }).code).toBe(10071); // not a duplicate ack
      expect((await collect(reader.read(root, actor))).map((s) => s.event.id)).toEqual(events.map((e) => e.id));
    } finally {
      await ensureStreams(bus.jsm);
    }
  });

  it('reads after a seq (from a stream seq hint too), follows live commits, and stops on abort', async () => {
    const actor = newId('agent');
    const other = newId('agent');
    expect(await reader.end(root, actor)).toEqual({ seq: 0, streamSeq: 0 });
    expect(await collect(reader.read(root, actor))).toEqual([]);
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
    const noise = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: other, position: fresh(), epoch: 0 });
    const c1 = await log.commit([say('1'), say('2')]);
    await noise.commit([say('other actor')]);
    const c2 = await log.commit([say('3')]);
    const mid = log.position();
    const c3 = await log.commit([say('4'), say('5')]);

    const all = await collect(reader.read(root, actor));
    expect(all.map((s) => s.event.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(all.map((s) => s.event.id)).toEqual([...c1, ...c2, ...c3].map((e) => e.id));
    expect((await collect(reader.read(root, actor, { afterSeq: 1 }))).map((s) => s.event.seq)).toEqual([2, 3, 4, 5]);
    expect((await collect(reader.read(root, actor, { afterSeq: 3, fromStreamSeq: mid.streamSeq })))
      .map((s) => s.event.seq)).toEqual([4, 5]);
    expect(await collect(reader.read(root, actor, { afterSeq: 5 }))).toEqual([]);
    expect(await reader.end(root, actor)).toEqual(log.position());

    const ac = new AbortController();
    const seen: ActorEvent[] = [];
    let wake: () => void = () => {};
    const following = (async () => {
      for await (const s of reader.follow(root, actor, { afterSeq: 4, signal: ac.signal })) {
        seen.push(s.event);
        wake();
      }
    })();
    const until = async (n: number) => {
      while (seen.length < n) await new Promise<void>((r) => { wake = r; setTimeout(r, 50); });
    };
    await until(1);
    await log.commit([say('6')]);
    await log.commit([say('7'), say('8')]);
    await until(4);
    ac.abort();
    await following;
    expect(seen.map((e) => e.seq)).toEqual([5, 6, 7, 8]);
  });

  it('refuses a commit over max_payload for good: store.commit_too_large at once, never a retry loop', async () => {
    const actor = newId('agent');
    // unbounded retries, as an actor's writer has: a too-large commit must not wait in them
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 1 });
    const started = Date.now();
    const err = await log.commit([say('x'.repeat(2 * 1024 * 1024))]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'store.commit_too_large', retryable: false });
    expect((err as Error).message).toMatch(/larger than the NATS server takes in one message/);
    expect(Date.now() - started).toBeLessThan(2_000);
    // nothing was stored, the position stands, and the writer goes on
    expect(log.position()).toEqual(fresh());
    expect((await log.commit([say('small')])).map((e) => e.seq)).toEqual([1]);
  });

  it('throws store.invalid_event with the stream seq for an undecodable message', async () => {
    const actor = newId('agent');
    const ack = await bus.js.publish(logSubject(root, actor), '{"events": [{"type": "nope"}]}');
    const err = await collect(reader.read(root, actor)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'store.invalid_event' });
    expect((err as Error).message).toContain(`stream seq ${ack.seq}`);
  });
});
