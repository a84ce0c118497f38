import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TimeoutError, type NatsConnection } from '@nats-io/nats-core';
import { pino } from 'pino';
import { openBus, type Bus } from '../../src/bus/connection.js';
import { logSubject } from '../../src/bus/subjects.js';
import { draft, type EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import { createJetStreamLog, createLogReader } from '../../src/store/jetstream-log.js';
import type { LogPublisher } from '../../src/bus/log-publisher.js';
import type { LogReader, StoredEvent } from '../../src/store/log-port.js';
import { startRestartableNats, type RestartableNats } from '../helpers/nats.js';

// The log writer against a real nats-server that is SIGKILLed and restarted on the same port and
// store: what JetStream 2.9 keeps across a crash, and what the writer does while it is gone.

const say = (content: string): EventDraft => draft('user/message', { messageId: newId('message'), content });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function collect(it: AsyncIterable<StoredEvent>): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

/** Resolves on the connection's next `reconnect` (listen before the kill). */
function reconnected(nc: NatsConnection): Promise<void> {
  return (async () => {
    for await (const s of nc.status()) if (s.type === 'reconnect') return;
  })();
}

/** A JetStream client whose publish goes through `fake`; everything else is the real one. */
function withPublish(js: LogPublisher, fake: (real: LogPublisher['publish'], ...a: Parameters<LogPublisher['publish']>) => ReturnType<LogPublisher['publish']>): LogPublisher {
  const real = js.publish.bind(js);
  return new Proxy(js, {
    get(target, prop) {
      if (prop === 'publish') return (...a: Parameters<LogPublisher['publish']>) => fake(real, ...a);
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('JetStream log across a kill -9 of nats-server', () => {
  let nats: RestartableNats;
  let bus: Bus;
  let reader: LogReader;
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
  const root = newId('agent');
  const fresh = () => ({ seq: 0, streamSeq: 0 });

  beforeAll(async () => {
    nats = await startRestartableNats();
    bus = await openBus({ natsUrl: nats.url, dataDir: nats.storeDir, logger: pino({ level: 'silent' }) });
    reader = createLogReader({ js: bus.js, jsm: bus.jsm });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
  });

  it('keeps the dedupe window: a republished commit is the original PubAck (duplicate), not a 10071', async () => {
    const actor = newId('agent');
    const subject = logSubject(root, actor);
    const payload = JSON.stringify({ events: [] });
    const opts = { msgID: `${actor}:1`, expect: { lastSubjectSequence: 0 } };
    const one = await bus.js.publish(subject, payload, opts);
    const back = reconnected(bus.nc);
    await nats.kill();
    await nats.restart();
    await back;
    // the stale expectation would fail the sequence check: dedupe is checked first, and the
    // server rebuilt its dedupe window from the stored messages when it recovered the stream
    const two = await bus.js.publish(subject, payload, opts);
    expect(two).toMatchObject({ seq: one.seq, duplicate: true });
    // a different message with the same stale expectation is still fenced
    await expect(bus.js.publish(subject, payload, { msgID: `${actor}:other`, expect: { lastSubjectSequence: 0 } }))
      .rejects.toMatchObject({ code: 10071 });
  });

  it('holds a commit made while NATS is down, warns, and stores it once after the restart', async () => {
    const actor = newId('agent');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0, logger, publishTimeoutMs: 500 });
    const before = await log.commit([say('before')]);
    const back = reconnected(bus.nc);
    await nats.kill();
    warnings.length = 0;
    let settled = false;
    const during = log.commit([say('during 1'), say('during 2')]).finally(() => { settled = true; });
    await sleep(1_500);
    expect(settled).toBe(false);
    expect(warnings.some((w) => w.includes('retrying with the same ID'))).toBe(true);
    await nats.restart();
    const events = await during;
    await back;
    expect(events.map((e) => e.seq)).toEqual([2, 3]);
    const stored = await collect(reader.read(root, actor));
    expect(stored.map((s) => s.event.id)).toEqual([...before, ...events].map((e) => e.id));
    expect(new Set(stored.map((s) => s.streamSeq)).size).toBe(2);
    expect(log.position()).toEqual(await reader.end(root, actor));
  });

  it('recognises a commit that landed just before the kill (ack lost) by its duplicate ack', async () => {
    const actor = newId('agent');
    let calls = 0;
    const acks: Array<{ seq: number; duplicate: boolean }> = [];
    let onKilled!: () => void;
    const killed = new Promise<void>((r) => (onKilled = r));
    const lossy = withPublish(bus.logJs, async (real, subj, data, o) => {
      calls++;
      const ack = await real(subj, data, o);
      if (calls > 1) {
        acks.push({ seq: ack.seq, duplicate: ack.duplicate });
        return ack;
      }
      // stored and fsync'd as far as 2.9 goes, then the server dies before the writer hears back
      void nats.kill().then(onKilled);
      throw new Error('TIMEOUT');
    });
    const log = createJetStreamLog({ js: lossy, rootId: root, actorId: actor, position: fresh(), epoch: 0, logger, publishTimeoutMs: 500 });
    const committing = log.commit([say('landed')]);
    await killed;
    await sleep(1_000);
    await nats.restart();
    const events = await committing;
    expect(acks.at(-1)?.duplicate).toBe(true);
    const stored = await collect(reader.read(root, actor));
    expect(stored.map((s) => s.event.id)).toEqual(events.map((e) => e.id));
    await log.commit([say('next')]);
    expect((await collect(reader.read(root, actor))).map((s) => s.event.seq)).toEqual([1, 2]);
  });

  it('retries for as long as it takes, not a number of times', async () => {
    const actor = newId('agent');
    let calls = 0;
    // five attempts fail as a publish to an unreachable server does (five was the old bound)
    const unreachable = withPublish(bus.logJs, async (real, subj, data, o) => {
      if (++calls <= 5) throw new TimeoutError();
      return real(subj, data, o);
    });
    const log = createJetStreamLog({ js: unreachable, rootId: root, actorId: actor, position: fresh(), epoch: 0, logger });
    const events = await log.commit([say('eventually')]);
    expect(calls).toBe(6);
    expect((await collect(reader.read(root, actor))).map((s) => s.event.id)).toEqual(events.map((e) => e.id));
  });

  it('keeps a follower following: the consumer the restart lost is made again from where it was', async () => {
    const actor = newId('agent');
    const log = createJetStreamLog({ js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0 });
    await log.commit([say('1')]);
    const ac = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const s of reader.follow(root, actor, { signal: ac.signal })) seen.push(s.event.seq);
    })();
    while (seen.length < 1) await sleep(20);
    const back = reconnected(bus.nc);
    await nats.kill();
    await nats.restart();
    await back;
    // several commits: nats.js alone would deliver the first of them and then stall for 30 s
    for (const n of ['2', '3', '4']) await log.commit([say(n)]);
    const until = Date.now() + 5_000;
    while (seen.length < 4 && Date.now() < until) await sleep(20);
    ac.abort();
    await following;
    expect(seen).toEqual([1, 2, 3, 4]);
  });

  it('stops retrying once its writer is stopped: the commit is reported unknown', async () => {
    const actor = newId('agent');
    const life = new AbortController();
    const log = createJetStreamLog({
      js: bus.logJs, rootId: root, actorId: actor, position: fresh(), epoch: 0, logger, publishTimeoutMs: 500, signal: life.signal,
    });
    await nats.kill();
    try {
      const committing = log.commit([say('never heard back')]).catch((e: unknown) => e);
      await sleep(700);
      life.abort('actor stopped');
      expect(await committing).toMatchObject({ code: 'store.publish_unknown', retryable: true });
    } finally {
      await nats.restart();
    }
  });
});
