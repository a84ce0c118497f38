import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import { createFaultInjector, parseFaultSpecs } from '../../src/actors/faults/faults.js';
import { reportError } from '../../src/cli/main.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { StoreError } from '../../src/protocol/errors.js';
import { derivedId } from '../../src/protocol/ids.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { readLog, runTurn, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, captureModels, ofType, only, startTurn } from './harness.js';

const world = actorTestWorld();
const rts = world.rts;

/** Removes a blob from a runtime's LMDB blob store, as a lost blob store would have it. */
async function lose(rt: TestRuntime, digest: string): Promise<void> {
  await rt.blobs.flush();
  await rt.lmdb.blobs.remove(digest);
  expect(await rt.blobs.has(digest)).toBe(false);
}

const BIG = 'y'.repeat(200_000);
const FINAL = /\. this is final: the log alone cannot rebuild it; the blob store lost it: /;

describe('a blob the log names is missing', () => {
  it('stops the agent that needs it with a final store.blob_missing naming the event, its seq and the agent', async () => {
    const models = captureModels([
      { tool_calls: [{ id: 'w1', name: 'write_file', arguments: { path: 'lost.txt', content: BIG } }] },
      { content: 'never' },
    ]);
    const rt = await rts.open({ models });
    // the host dies right after the model's output is committed; its arguments are a blob
    const dropping = rt.supervisor({ faults: createFaultInjector(parseFaultSpecs('after:assistant/accepted=drop'), undefined, rt.faultRecords) });
    const { actor: dropped, ended: lost } = await startTurn(dropping, 'write lost.txt', turnRequest(world.ws));
    await expect(lost).rejects.toMatchObject({ code: 'actor.dropped' });
    const before = await readLog(dropping, dropped.rootId, dropped.actorId);
    const accepted = only(before, 'assistant/accepted');
    const ref = accepted.data.toolCalls[0]!.argumentsRef!;
    await lose(rt, ref.digest);

    // another incarnation takes the agent on and needs the arguments to carry out the call
    const sup = rt.supervisor();
    let ended: Promise<TurnEnded> | null = null;
    await sup.hydrate(dropped.actorId, (a: AgentActor) => {
      ended = a.whenTurnEnds();
    }).catch(() => {});
    const err = await ended!.then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    const e = err as StoreError;
    expect(e.code).toBe('store.blob_missing');
    expect(e.retryable).toBe(false);
    expect(e.message).toBe(
      `blob ${ref.digest} (195.3 KiB of model output) named by assistant/accepted seq ${accepted.seq} of ${dropped.actorId} is not in the blob store`,
    );
    expect(e.userMessage()).toMatch(FINAL);
    // the turn does not end: the agent stops before its recovery commits anything, and no model is asked again
    const after = await readLog(sup, dropped.rootId, dropped.actorId);
    expect(after.map((x) => x.id)).toEqual(before.map((x) => x.id));
    expect(ofType(after, 'turn/end')).toEqual([]);
    expect(models.requests()).toHaveLength(1);

    // what the person running the command sees: one line, exit 1, no stack
    const stderr = new PassThrough();
    let text = '';
    stderr.on('data', (d: Buffer) => (text += d.toString()));
    expect(reportError(e, { stdout: new PassThrough(), stderr }, false)).toBe(EXIT.failed);
    expect(text).toBe(`actorloop: ${e.userMessage()}\n`);
    expect(text.split('\n')).toHaveLength(2);
  });

  it('answers artifact_read of a lost artifact with a tool error naming the tool/result that stored it', async () => {
    const output = 'row\n'.repeat(40_000);
    const digest = sha256Digest(output);
    const id = derivedId('artifact', digest);
    let rt: TestRuntime | undefined;
    /** `dump {}`: prints more than the observation budget, so its output becomes an artifact. */
    const dump: ToolDefinition<Record<string, never>> = {
      name: 'dump', version: '1', description: 'Prints a lot.', input: z.strictObject({}), level: 'read',
      executionSemantics: () => ({ effects: 'none', retry: 'auto' }), resources: () => [],
      execute: async () => ({ ok: true, output }),
    };
    /** `forget {}`: the blob store loses the artifact (a gc run too early, a purge). */
    const forget: ToolDefinition<Record<string, never>> = {
      name: 'forget', version: '1', description: 'Loses the artifact.', input: z.strictObject({}), level: 'read',
      executionSemantics: () => ({ effects: 'none', retry: 'auto' }), resources: () => [],
      execute: async () => {
        await lose(rt!, digest);
        return { ok: true, output: 'forgotten' };
      },
    };
    const script: ScriptResponse[] = [
      { tool_calls: [{ id: 'd', name: 'dump', arguments: {} }] },
      { tool_calls: [{ id: 'f', name: 'forget', arguments: {} }] },
      { tool_calls: [{ id: 'r', name: 'artifact_read', arguments: { id } }] },
      { content: 'the artifact is gone' },
    ];
    rt = await rts.open({ script, tools: [dump, forget] });
    const sup = rt.supervisor();
    const { actor, ended } = await runTurn(sup, 'dump, forget, read', turnRequest(world.ws));
    expect(ended).toMatchObject({ outcome: 'completed', answer: 'the artifact is gone' });
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const results = ofType(log, 'tool/result');
    const stored = results.find((r) => r.data.artifact?.digest === digest)!;
    expect(stored.data.artifact!.id).toBe(id);
    const read = results.at(-1)!;
    expect(read.data.ok).toBe(false);
    expect(read.data.error).toMatchObject({ code: 'store.blob_missing' });
    expect(read.data.output).toMatch(new RegExp(
      `^blob ${digest} \\(artifact ${id}\\) named by tool/result seq ${stored.seq} of ${actor.actorId} is not in the blob store${FINAL.source}`,
    ));
  });
});
