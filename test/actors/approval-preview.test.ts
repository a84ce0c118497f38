// The preview a person is shown of an approval is made where the approval is asked, by the
// tool, and recorded in approval/requested: redacted, never failing the call, and never asking
// about a call that an interrupt moved on while its preview was being made.
import { appendFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { verifyLog } from '../../src/verify/verify.js';
import { interruptMessage } from '../../src/client/messages.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { createRedactor } from '../../src/tools/redact.js';
import type { PreviewContext, ToolDefinition, ToolPreview } from '../../src/tools/tool.js';
import { tempDir } from '../helpers/nats.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, only, startTurn } from './harness.js';

let ws: string;
const world = actorTestWorld();
beforeEach(async () => {
  ws = await tempDir('ws');
});
afterEach(async () => {
  await world.rts.closeAll();
  await rm(ws, { recursive: true, force: true });
});

const SECRET = 'tok-9f8e7d6c5b4a3210';

/** What the probe tool's preview does; each test sets it. */
let previewImpl: (input: { line: string }, ctx: PreviewContext) => ToolPreview | Promise<ToolPreview>;

/** An effectful tool that asks in mode `ask` and has a preview of its own. */
const probeTool: ToolDefinition<{ line: string }> = {
  name: 'append',
  version: '1',
  description: 'Append a line to effects.log',
  input: z.strictObject({ line: z.string() }),
  level: 'write',
  executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
  resources: (_input, { workspace }) => [{ key: `path:${workspace}/effects.log`, mode: 'write' }],
  preview: (input, ctx) => previewImpl(input, ctx),
  async execute(input, ctx) {
    await appendFile(join(ctx.workspace, 'effects.log'), `${input.line}\n`);
    return { ok: true, output: `appended ${input.line}` };
  },
};

const append = (line: string): ScriptResponse => ({ tool_calls: [{ name: 'append', arguments: { line } }] });

async function open(script: ScriptResponse[]) {
  const rt = await world.rts.open({ script, tools: [probeTool] });
  return rt.supervisor({ extra: { tooling: defaultTooling({ redactor: createRedactor([SECRET]) }) } });
}

describe('the preview of an approval', () => {
  it('is the tool’s own, made with the plan, redacted, and in the log and the projection', async () => {
    let seen: PreviewContext | null = null;
    previewImpl = (input, ctx) => {
      seen = ctx;
      return { kind: 'diff', summary: `append ${input.line}`, text: `+${input.line}\n+key ${SECRET}` };
    };
    const sup = await open([append('one'), { content: 'done' }]);
    const { actor } = await startTurn(sup, 'append one', turnRequest(ws, { approvalMode: 'ask' }));
    const [approvalId] = await actor.whenAwaitingApproval();
    const expected = { kind: 'diff', summary: 'append one', text: '+one\n+key [REDACTED:configured]', truncated: false };
    expect(actor.projection.approvals![approvalId!]!.preview).toEqual(expected);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(only(log, 'approval/requested').data.preview).toEqual(expected);
    expect(JSON.stringify(log)).not.toContain(SECRET);
    expect(seen!.plan).toMatchObject({ tool: 'append', paths: [{ path: 'effects.log', mode: 'write' }] });
    expect(seen!.sandboxed).toBe(false);
  });

  it('that throws still asks, with the plan shown and why', async () => {
    previewImpl = () => {
      throw new Error('no idea');
    };
    const sup = await open([append('one'), { content: 'done' }]);
    const { actor } = await startTurn(sup, 'append one', turnRequest(ws, { approvalMode: 'ask' }));
    const [approvalId] = await actor.whenAwaitingApproval();
    const preview = actor.projection.approvals![approvalId!]!.preview!;
    expect(preview).toMatchObject({ kind: 'input', fallback: 'append could not show this call (no idea); this is its plan' });
    expect(preview.text).toContain('"line": "one"');
  });

  it('an interrupt while it is made stops it, and nothing is asked: the call and the turn end cancelled', async () => {
    let started!: () => void;
    const making = new Promise<void>((r) => (started = r));
    let aborted = false;
    previewImpl = (_input, ctx) =>
      new Promise<never>(() => {
        ctx.signal.addEventListener('abort', () => (aborted = true));
        started();
      });
    const sup = await open([append('one'), { content: 'never' }]);
    const { actor, ended } = await startTurn(sup, 'append one', turnRequest(ws, { approvalMode: 'ask' }));
    await making;
    await sup.send(interruptMessage(actor.actorId));
    expect(await ended).toMatchObject({ outcome: 'cancelled', reason: 'interrupted' });
    expect(aborted).toBe(true);
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'approval/requested')).toHaveLength(0);
    expect(only(log, 'tool/cancelled').data).toMatchObject({ started: false });
    expect(verifyLog(log, { complete: true })).toEqual([]);
  });
});
