import { describe, expect, it } from 'vitest';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { answerContent, questionIdOf, type QuestionAnswer } from '../../src/actors/effects/questions.js';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { interruptMessage } from '../../src/client/messages.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { readLog, turnRequest, type TestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, message, ofType, only, startTurn, waitForLog } from './harness.js';

const world = actorTestWorld();
const { rts } = world;

const askColour: ScriptResponse = {
  tool_calls: [{ id: 'c1', name: 'ask_user', arguments: { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] } }],
};
const askSecret: ScriptResponse = { tool_calls: [{ id: 'c1', name: 'ask_user', arguments: { question: 'The deploy token?', sensitive: true } }] };

function answer(to: string, a: QuestionAnswer) {
  return message(to, answerContent(a), { kind: 'ask_answer', target: 'now', from: 'client:cli' });
}

function expectClean(log: ActorEvent[]): void {
  const v = verifyLog(log, { complete: true });
  expect(v, formatViolations(v)).toEqual([]);
}

/** A clock that starts now and moves only when told. */
function fakeClock() {
  let now = Date.now();
  return {
    advance: (ms: number) => (now += ms),
    clock: { nowMs: () => now, sleep: async (ms: number) => void (now += Math.max(0, ms)) },
  };
}

async function open(script: ScriptResponse[]) {
  const models = captureModels(script);
  const rt = await rts.open({ script, models });
  return { rt, models };
}

async function hydrate(rt: TestRuntime, actorId: string, extra: Parameters<TestRuntime['supervisor']>[0] = {}) {
  const sup = rt.supervisor(extra);
  let ended!: Promise<TurnEnded>;
  const { actor } = await sup.hydrate(actorId, (a) => {
    ended = a.whenTurnEnds();
    ended.catch(() => {});
  });
  return { sup, actor, ended };
}

describe('ask_user', () => {
  it('asks, parks the agent on the question, and the chosen option ends the call in one commit with ask/answered', async () => {
    const { rt, models } = await open([askColour, { content: 'blue it is' }]);
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'pick a colour', turnRequest(world.ws));
    const [qid] = await actor.whenAwaitingQuestion();
    expect(qid).toBe(questionIdOf(only(await readLog(sup, actor.rootId, actor.actorId), 'tool/start').call!));
    expect(actor.projection.parked).toEqual({
      waitingFor: 'question',
      ids: [qid],
      commands: [`actorloop answer ${actor.actorId} ${qid} --option <red|blue>`],
    });
    const asked = only(await readLog(sup, actor.rootId, actor.actorId), 'ask/asked');
    expect(asked.data).toMatchObject({ question: 'Which colour?', allowFreeText: false, sensitive: false });
    expect(asked.data.expiresAt).toBeGreaterThan(Date.now() + 23 * 3600 * 1000);

    await sup.send(answer(actor.actorId, { questionId: qid!, optionId: 'blue' }));
    expect(await ended).toMatchObject({ outcome: 'completed', answer: 'blue it is' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const answered = only(log, 'ask/answered');
    expect(answered.data).toMatchObject({ questionId: qid, outcome: 'answered', optionId: 'blue', by: 'client:cli' });
    const result = only(log, 'tool/result');
    expect(result.seq).toBe(answered.seq + 1);
    expect(result.data.output).toBe('The person chose option "blue": Blue');
    // one commit: the answer and the result land together
    const commit = rt.commits.get(actor.actorId)!.find((c) => c.some((e) => e.type === 'ask/answered'))!;
    expect(commit.map((e) => e.type)).toContain('tool/result');
    // the model's next request holds the answer
    const next = JSON.parse(String(models.requests()[1]!.body)) as { messages: Array<{ content: string }> };
    expect(next.messages.at(-1)!.content).toBe('The person chose option "blue": Blue');
    expect(actor.projection.questions![qid!]!.state).toBe('answered');
    expectClean(log);
  });

  it('refuses unknown, malformed, mismatched and repeated answers with a reason, and nothing else changes', async () => {
    const { rt } = await open([askColour, { content: 'done' }]);
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'pick a colour', turnRequest(world.ws));
    const [qid] = await actor.whenAwaitingQuestion();
    const to = actor.actorId;
    const bad = [
      answer(to, { questionId: 'q_NOPE', optionId: 'red' }),
      message(to, 'not json', { kind: 'ask_answer', target: 'now', from: 'client:cli' }),
      answer(to, { questionId: qid!, optionId: 'green' }),
      answer(to, { questionId: qid!, text: 'purple please' }),
    ];
    for (const m of bad) await sup.send(m);
    let log = await waitForLog(sup, actor, (l) => ofType(l, 'inbox/cancelled').length === bad.length);
    const reasons = ofType(log, 'inbox/cancelled').map((e) => e.data.reason);
    expect(reasons).toEqual([
      'no question q_NOPE was asked',
      'the message is not an answer ({questionId, optionId?, text?})',
      `the question has no option "green" (its options: red, blue) (question ${qid})`,
      `the question takes no free text: pick one of its options (red, blue) (question ${qid})`,
    ]);
    expect(ofType(log, 'ask/answered')).toHaveLength(0);
    expect(actor.projection.questions![qid!]!.state).toBe('pending');

    await sup.send(answer(to, { questionId: qid!, optionId: 'red' }));
    await ended;
    await sup.send(answer(to, { questionId: qid!, optionId: 'blue' }));
    log = await waitForLog(sup, actor, (l) => ofType(l, 'inbox/cancelled').length === bad.length + 1);
    expect(ofType(log, 'inbox/cancelled').at(-1)!.data.reason).toBe(`question ${qid} is already answered; a question is answered once`);
    expect(ofType(log, 'ask/answered')).toHaveLength(1);
    expectClean(log);
  });

  it('keeps a sensitive answer out of the log, yet the model reads it, also in a request rebuilt after a restart', async () => {
    const secret = 'tok-7f3a-HUNTER2';
    const script: ScriptResponse[] = [askSecret, { tool_calls: [{ id: 'c2', name: 'read_file', arguments: { path: 'src/a.txt' } }] }, { content: 'deployed' }];
    const { rt, models } = await open(script);
    // dropped right after the answer's commit: the next request is rebuilt by a new incarnation
    const sup = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:ask/answered=drop'), undefined, rt.faultRecords) });
    const { actor, ended } = await startTurn(sup, 'deploy', turnRequest(world.ws));
    const [qid] = await actor.whenAwaitingQuestion();
    await sup.send(answer(actor.actorId, { questionId: qid!, text: secret }));
    await expect(ended).rejects.toMatchObject({ code: 'actor.dropped' });

    const again = await hydrate(rt, actor.actorId);
    expect(await again.ended).toMatchObject({ outcome: 'completed', answer: 'deployed' });
    const log = await readLog(again.sup, actor.rootId, actor.actorId);
    expect(JSON.stringify(log)).not.toContain(secret);
    expect(JSON.stringify([...rt.commits.values()])).not.toContain(secret);
    const received = ofType(log, 'inbox/received').find((e) => e.data.kind === 'ask_answer')!;
    expect(received.data).toMatchObject({ content: '[sensitive]', contentRef: { digest: expect.stringMatching(/^sha256:/) } });
    expect(only(log, 'ask/answered').data).toMatchObject({ answer: '[sensitive]', optionId: null, answerRef: expect.any(Object) });
    expect(ofType(log, 'tool/result')[0]!.data.output).toBe('[sensitive]');
    // every request after the answer holds it: the one before the drop and the one rebuilt after
    const after = models.requests().slice(1).map((r) => JSON.stringify(r.body));
    expect(after.length).toBeGreaterThanOrEqual(2);
    for (const body of after) expect(body).toContain(secret);
    expectClean(log);
  });

  it('waits across a restart with its original expiry, and expires at that absolute time', async () => {
    const { rt } = await open([{ tool_calls: [{ id: 'c1', name: 'ask_user', arguments: { question: 'Go ahead?' } }] }, { content: 'went on without it' }]);
    const { clock, advance } = fakeClock();
    const tooling = defaultTooling({ askTtlMs: 60 * 60 * 1000 });
    const sup = rt.supervisor({ extra: { clock, tooling } });
    const { actor } = await startTurn(sup, 'ask first', turnRequest(world.ws));
    const [qid] = await actor.whenAwaitingQuestion();
    const expiresAt = actor.projection.questions![qid!]!.expiresAt;
    actor.stop();

    // half-way: a new incarnation waits on, with the same expiry, and asks nothing again
    advance(30 * 60 * 1000);
    const mid = await hydrate(rt, actor.actorId, { extra: { clock, tooling } });
    await mid.actor.whenAwaitingQuestion();
    expect(mid.actor.projection.questions![qid!]).toMatchObject({ state: 'pending', expiresAt });
    mid.actor.stop();

    advance(31 * 60 * 1000);
    const late = await hydrate(rt, actor.actorId, { extra: { clock, tooling } });
    expect(await late.ended).toMatchObject({ outcome: 'completed', answer: 'went on without it' });
    const log = await readLog(late.sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'ask/asked')).toHaveLength(1);
    const answered = only(log, 'ask/answered');
    expect(answered.data).toMatchObject({ outcome: 'expired', by: 'expiry', messageId: null });
    expect(Date.parse(answered.at)).toBeGreaterThanOrEqual(expiresAt);
    expect(ofType(log, 'tool/result')[0]!.data).toMatchObject({ ok: false, error: { code: 'ask.expired' } });
    expect(ofType(log, 'tool/start').map((e) => e.data.rerun)).toEqual([false, true, true]);
    expectClean(log);
  });

  it('an interrupt while the question waits cancels it and ends the call tool/cancelled', async () => {
    const { rt } = await open([{ tool_calls: [{ id: 'c1', name: 'ask_user', arguments: { question: 'Go ahead?' } }] }, { content: 'never' }]);
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'ask first', turnRequest(world.ws));
    const [qid] = await actor.whenAwaitingQuestion();
    await sup.send(interruptMessage(actor.actorId));
    expect((await ended).outcome).toBe('cancelled');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'ask/answered').data).toMatchObject({ questionId: qid, outcome: 'cancelled', messageId: null });
    expect(ofType(log, 'tool/cancelled')).toHaveLength(1);
    expectClean(log);
  });
});
