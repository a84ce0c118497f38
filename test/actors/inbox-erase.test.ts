// A message whose content held a secret (a sensitive answer, a task the redactor changed) is
// erased from the INBOX stream once its receipt is committed, before it is acked: a crash between
// the receipt and the erase leaves it to the next incarnation, which erases it when the message
// comes again. A stream that refuses deletes costs a warning, never the turn.
import { Writable } from 'node:stream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { pino } from 'pino';
import { expect, it } from 'vitest';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { answerContent, type QuestionAnswer } from '../../src/actors/effects/questions.js';
import { STREAMS } from '../../src/bus/subjects.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { readLog, turnRequest, type NatsTestRuntime } from '../helpers/runtime.js';
import { startTestNats } from '../helpers/nats.js';
import { openTestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, message, ofType, startTurn } from './harness.js';

const world = actorTestWorld({ nats: true });
const { rts } = world;

const askSecret: ScriptResponse = { tool_calls: [{ id: 'c1', name: 'ask_user', arguments: { question: 'The deploy token?', sensitive: true } }] };

function answer(to: string, a: QuestionAnswer) {
  return message(to, answerContent(a), { kind: 'ask_answer', target: 'now', from: 'client:cli' });
}

/** The INBOX stream's messages (to `actorId`) whose bytes hold `text`. */
async function inboxHolding(jsm: JetStreamManager, actorId: string, text: string): Promise<number[]> {
  const { state } = await jsm.streams.info(STREAMS.inbox);
  const found: number[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(STREAMS.inbox, { seq }).catch(() => null);
    if (m && m.subject.includes(actorId) && new TextDecoder().decode(m.data).includes(text)) found.push(seq);
  }
  return found;
}

/** Retries `check` until it passes, for up to 15 s. */
async function eventually(check: () => Promise<void>): Promise<void> {
  const until = Date.now() + 15_000;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function hydrate(rt: NatsTestRuntime, actorId: string) {
  const sup = rt.supervisor();
  let ended!: Promise<TurnEnded>;
  const { actor } = await sup.hydrate(actorId, (a) => {
    ended = a.whenTurnEnds();
    ended.catch(() => {});
  });
  return { sup, actor, ended };
}

it('erases a sensitive answer once its receipt is committed; a crash between the two leaves the erase to the next incarnation', async () => {
  const secret = 'tok-ERASE-5150-hunter';
  const models = captureModels([askSecret, { content: 'deployed' }]);
  const rt = await rts.open({ script: [askSecret, { content: 'deployed' }], models });
  const jsm = rt.bus.jsm;
  // dropped after the answer's receipt is committed, before its erase
  const sup = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('before:inbox-erase=drop'), undefined, rt.faultRecords) });
  const { actor, ended } = await startTurn(sup, 'deploy it', turnRequest(world.ws));
  const [qid] = await actor.whenAwaitingQuestion();
  await sup.send(answer(actor.actorId, { questionId: qid!, text: secret }));
  await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });
  // the receipt is in the log and the message still in the stream: the crash fell between them
  const received = ofType(await readLog(sup, actor.rootId, actor.actorId), 'inbox/received').find((e) => e.data.kind === 'ask_answer');
  expect(received?.data).toMatchObject({ content: '[sensitive]', contentRef: expect.any(Object) });
  expect(await inboxHolding(jsm, actor.actorId, secret)).toHaveLength(1);

  const again = await hydrate(rt, actor.actorId);
  expect(await again.ended).toMatchObject({ outcome: 'completed', answer: 'deployed' });
  // the turn may end (the answer is in the log) before the redelivery is taken and erased
  await eventually(async () => expect(await inboxHolding(jsm, actor.actorId, secret)).toEqual([]));
  // a message that held no secret stays
  expect(await inboxHolding(jsm, actor.actorId, 'deploy it')).toHaveLength(1);
  // the model read the answer in the request after it
  expect(JSON.stringify(models.requests().at(-1)!.body)).toContain(secret);
});

it('a task holding a secret: redacted in the log and for the model, and erased from the stream', async () => {
  const secret = 'ghp_EraseT0kenAbCdEfGhIjKlMnOpQrStUvWx9876';
  const models = captureModels([{ content: 'done' }]);
  const rt = await rts.open({ script: [{ content: 'done' }], models });
  const sup = rt.supervisor();
  const { actor, ended } = await startTurn(sup, `use ${secret} to deploy`, turnRequest(world.ws));
  expect(await ended).toMatchObject({ outcome: 'completed' });
  const log = await readLog(sup, actor.rootId, actor.actorId);
  expect(JSON.stringify(log)).not.toContain(secret);
  expect(ofType(log, 'user/message').map((e) => e.data.content)).toEqual(['use [REDACTED:github_token] to deploy']);
  expect(JSON.stringify(models.requests()[0]!.body)).toContain('use [REDACTED:github_token] to deploy');
  expect(JSON.stringify(models.requests()[0]!.body)).not.toContain(secret);
  expect(await inboxHolding(rt.bus.jsm, actor.actorId, secret)).toEqual([]);
});

it('a stream that denies deletes: the message stays, a warning says so, and the turn goes on', async () => {
  const nats = await startTestNats();
  let rt: NatsTestRuntime | undefined;
  try {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    rt = await openTestRuntime({ natsUrl: nats.url, script: [{ content: 'done' }] });
    // an INBOX made by an operator with deny_delete: actorloop leaves that setting as it is
    await rt.bus.jsm.streams.update(STREAMS.inbox, { deny_delete: true });
    expect((await rt.bus.jsm.streams.info(STREAMS.inbox)).config.deny_delete).toBe(true);
    const secret = 'ghp_DenyT0kenAbCdEfGhIjKlMnOpQrStUvWxY5432';
    const sup = rt.supervisor({ extra: { logger: pino({ level: 'warn' }, sink) } });
    const { actor, ended } = await startTurn(sup, `use ${secret}`, turnRequest(world.ws));
    expect(await ended).toMatchObject({ outcome: 'completed' });
    expect(await inboxHolding(rt.bus.jsm, actor.actorId, secret)).toHaveLength(1);
    const warned = lines.map((l) => JSON.parse(l) as { msg: string; code?: string }).find((l) => l.code === 'bus.erase_failed');
    expect(warned?.msg).toMatch(/not erased from the INBOX stream/);
    expect(lines.join('')).not.toContain(secret);
  } finally {
    await rt?.close();
    await nats.stop();
  }
});
