import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { INLINE_OUTPUT_BYTES } from '../../src/actors/agent/output-blobs.js';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';

// the next request carries the 3 MB argument whole: a window it fits (the scripted model's is 128,000 tokens)
const BIG_WINDOW = { context: { window: 100_000_000 } };
import { actorTestWorld, captureModels, ofType, only, replay, startTurn } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

/** 3 MB of text with lines, so a cut in the wrong place would show. */
const BIG = Array.from({ length: 3 * 1024 * 16 }, (_, i) => `line ${String(i).padStart(8, '0')} ${'x'.repeat(48)}\n`).join('');

function expectClean(log: ActorEvent[]): void {
  const violations = verifyLog(log, { complete: true });
  expect(violations, formatViolations(violations)).toEqual([]);
}

/** No event of the log holds more than the inline budget and a little envelope. */
function expectSmallEvents(log: ActorEvent[]): void {
  const largest = Math.max(...log.map((e) => Buffer.byteLength(JSON.stringify(e))));
  expect(largest).toBeLessThan(INLINE_OUTPUT_BYTES + 8 * 1024);
}

const writeBig: ScriptResponse[] = [
  { tool_calls: [{ id: 'w1', name: 'write_file', arguments: { path: 'big.txt', content: BIG } }] },
  { content: 'wrote big.txt' },
];

describe('model output too big for a commit', () => {
  it('ends a turn with a 3 MB answer: the log holds a reference, the caller gets the whole answer', async () => {
    const rt = await rts.open({ script: [{ content: BIG }] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'say a lot', turnRequest(world.ws));
    expect(ended.outcome).toBe('completed');
    expect(ended.answer).toBe(BIG);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const accepted = only(log, 'assistant/accepted');
    expect(accepted.data.contentRef).toMatchObject({ bytes: Buffer.byteLength(BIG) });
    expect(accepted.data.content!.startsWith('line 00000000 x')).toBe(true);
    expect(accepted.data.content).toMatch(new RegExp(`… \\[${Buffer.byteLength(BIG)} bytes in all, stored as blob sha256:[0-9a-f]{64}\\]$`));
    expect(only(log, 'turn/end').data.answerRef).toEqual(accepted.data.contentRef);
    expect(await rt.blobs.getText(accepted.data.contentRef!.digest)).toBe(BIG);
    expectSmallEvents(log);
    expectClean(log);
    expect(actor.projection).toEqual(replay(actor.actorId, log));
  });

  it('writes a 3 MB write_file argument whole, and sends it whole in the next request', async () => {
    const models = captureModels(writeBig);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'write big.txt', turnRequest(world.ws, BIG_WINDOW));
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'wrote big.txt' });
    expect(await readFile(join(world.ws, 'big.txt'), 'utf8')).toBe(BIG);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const call = only(log, 'tool/call');
    expect(call.data).toMatchObject({ status: 'valid', argumentsRef: { bytes: Buffer.byteLength(writeArgs()) } });
    expect(ofType(log, 'assistant/accepted')[0]!.data.toolCalls[0]!.argumentsRef).toEqual(call.data.argumentsRef);
    const start = only(log, 'tool/start');
    expect(start.data.argumentsRef).toEqual(call.data.argumentsRef);
    expect((start.data.input as { content: string }).content).toMatch(new RegExp(`… \\[${Buffer.byteLength(BIG)} bytes; the call's arguments are blob sha256:`));
    expect(only(log, 'tool/result').data.ok).toBe(true);
    // the model is sent its own call as it made it
    const second = JSON.parse(models.requests()[1]!.body) as { messages: Array<{ role: string; toolCalls?: Array<{ arguments: string }> }> };
    expect(second.messages.find((m) => m.role === 'assistant')!.toolCalls![0]!.arguments).toBe(writeArgs());
    expectSmallEvents(log);
    expectClean(log);
    expect(actor.projection).toEqual(replay(actor.actorId, log));
    await rm(join(world.ws, 'big.txt'));
  });

  it('rebuilds the whole arguments after a rehydrate: the tool gets them, and so does the next request', async () => {
    const models = captureModels(writeBig);
    const rt = await rts.open({ models });
    const faulty = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:assistant/accepted=drop'), undefined, rt.faultRecords) });
    const { actor: dropped, ended: lost } = await startTurn(faulty, 'write big.txt', turnRequest(world.ws, BIG_WINDOW));
    await expect(lost).rejects.toMatchObject({ code: 'actor.dropped' });
    const sup = rt.supervisor();
    let ended: Promise<TurnEnded> | null = null;
    const { actor } = await sup.hydrate(dropped.actorId, (a: AgentActor) => {
      ended = a.whenTurnEnds();
    });
    expect(await ended!).toMatchObject({ outcome: 'completed', answer: 'wrote big.txt' });
    expect((await stat(join(world.ws, 'big.txt'))).size).toBe(Buffer.byteLength(BIG));
    const last = JSON.parse(models.requests().at(-1)!.body) as { messages: Array<{ role: string; toolCalls?: Array<{ arguments: string }> }> };
    expect(last.messages.find((m) => m.role === 'assistant')!.toolCalls![0]!.arguments).toBe(writeArgs());
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expectSmallEvents(log);
    expectClean(log);
    await rm(join(world.ws, 'big.txt'));
  });

  it('stops an answer over max_model_output_bytes mid-stream and fails the turn, without a retry', async () => {
    const models = captureModels([{ content: BIG }, { content: 'never asked for' }]);
    const rt = await rts.open({ models });
    const sup = rt.supervisor();
    const started = Date.now();
    const { actor, ended } = await runTurn(sup, 'say a lot', turnRequest(world.ws, { config: { maxModelOutputBytes: 64 * 1024 } }));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(ended.outcome).toBe('failed');
    expect(ended.reason).toMatch(/^model output_too_large error: the model's output passed max_model_output_bytes \(65536 bytes\)/);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const end = only(log, 'attempt/end');
    expect(end.data).toMatchObject({ outcome: 'failed', error: { class: 'output_too_large', retryable: false }, backoffMs: null });
    expect(ofType(log, 'assistant/accepted')).toHaveLength(0);
    // one attempt, and the failed one counts as a response consumed
    expect(models.requests()).toHaveLength(1);
    expect(actor.projection.modelResponses).toBe(1);
    expectClean(log);
  });
});

function writeArgs(): string {
  return JSON.stringify({ path: 'big.txt', content: BIG });
}
