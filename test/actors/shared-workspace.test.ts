import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { createKvResourceLeases, ensureResourceLeaseBucket, type ResourceLeaseStore } from '../../src/bus/resource-leases.js';
import { treeModels } from '../helpers/scripted-tree.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { interruptMessage } from '../../src/client/messages.js';
import { pathResource } from '../../src/tools/builtins/text-file.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import type { NatsTestRuntime } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn, waitForLog } from './harness.js';

const world = actorTestWorld({ nats: true });

/**
 * A write that takes a while, and counts how many run at once. Each waits (up to a second) for
 * another to come in beside it: without cross-agent leases two children's writes meet here, so the
 * count says whether anything kept them apart.
 */
function slowWrite() {
  let active = 0;
  let most = 0;
  let arrived: (() => void) | null = null;
  const tool: ToolDefinition<{ path: string; text: string }> = {
    name: 'slow_write',
    version: '1',
    description: 'Write a file, slowly',
    input: z.strictObject({ path: z.string(), text: z.string() }),
    level: 'write',
    executionSemantics: () => ({ effects: 'possible', recovery: { kind: 'manual', on: 'ask' } }),
    resources: (input, { workspace }) => [pathResource(workspace, input.path, 'write')],
    async execute(input, ctx) {
      active += 1;
      most = Math.max(most, active);
      const other = arrived;
      if (other) other();
      else await new Promise<void>((resolve) => {
        const timer = setTimeout(done, 1_000);
        function done(): void {
          clearTimeout(timer);
          arrived = null;
          resolve();
        }
        arrived = done;
      });
      await writeFile(join(ctx.workspace, input.path), input.text);
      active -= 1;
      return { ok: true, output: `wrote ${input.path}` };
    },
  };
  return { tool, most: () => most };
}

const usage = { input_tokens: 60, output_tokens: 6 };
const scripts: Record<string, ScriptResponse[]> = {
  main: [
    { tool_calls: [
      { name: 'spawn_agent', arguments: { task: 'write x', name: 'one', mode: 'foreground' } },
      { name: 'spawn_agent', arguments: { task: 'write x', name: 'two', mode: 'foreground' } },
    ], usage },
    { content: 'both wrote', usage },
  ],
  one: [{ tool_calls: [{ name: 'slow_write', arguments: { path: 'x.txt', text: 'one\n' } }], usage }, { content: 'done', usage }],
  two: [{ tool_calls: [{ name: 'slow_write', arguments: { path: 'x.txt', text: 'two\n' } }], usage }, { content: 'done', usage }],
};
const modelFor = treeModels(scripts);

/** Runs the tree; the tool/start and tool/result of each child's write, in its own log. */
async function runTree(rt: NatsTestRuntime, leases: ResourceLeaseStore | null): Promise<{ start: number; end: number }[]> {
  const sup = rt.supervisor({ extra: leases ? { resourceLeases: leases } : {} });
  const { actor, ended } = await startTurn(sup, 'both write x', turnRequest(world.ws));
  await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
  const log = await readLog(sup, actor.rootId, actor.actorId);
  const intervals = [];
  for (const r of ofType(log, 'subagent/spawn_requested')) {
    const child: ActorEvent[] = await waitForLog(sup, { rootId: actor.rootId, actorId: r.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified'));
    const v = verifyLog(child);
    expect(v, formatViolations(v)).toEqual([]);
    const start = ofType(child, 'tool/start').find((e) => e.data.name === 'slow_write')!;
    const result = ofType(child, 'tool/result').find((e) => e.call === start.call)!;
    expect(result.data.ok).toBe(true);
    intervals.push({ start: Date.parse(start.at), end: Date.parse(result.at) });
  }
  expect(intervals).toHaveLength(2);
  return intervals;
}

describe('shared-workspace subagents', () => {
  it('writing the same file run one at a time, across agents, through resource leases on JetStream KV', async () => {
    const slow = slowWrite();
    const rt = await world.rts.open({ modelFor, tools: [slow.tool] });
    const leases = createKvResourceLeases({ kv: () => ensureResourceLeaseBucket(new Kvm(rt.bus.js)) });
    const [a, b] = (await runTree(rt, leases)).sort((x, y) => x.start - y.start);
    // one write's start→result lies wholly before the other's
    expect(a!.end).toBeLessThanOrEqual(b!.start);
    expect(slow.most()).toBe(1);
    // and each let go once its result was committed
    expect(await leases.holdersOf(`path:${join(world.ws, 'x.txt')}`, Date.now())).toEqual([]);
    expect(await leases.holdersOf(`process:${world.ws}`, Date.now())).toEqual([]);
  });

  it('without the leases, meet in the tool (the check above can fail)', async () => {
    const slow = slowWrite();
    const rt = await world.rts.open({ modelFor, tools: [slow.tool] });
    await runTree(rt, null);
    expect(slow.most()).toBe(2);
  });

  it('stop a call waiting for another agent\'s lease when its turn is interrupted: it never starts, and the holder runs on', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let entered = 0;
    const gated: ToolDefinition<{ path: string; text: string }> = {
      ...slowWrite().tool,
      async execute(input, ctx) {
        entered += 1;
        await gate;
        await writeFile(join(ctx.workspace, input.path), input.text);
        return { ok: true, output: `wrote ${input.path}` };
      },
    };
    const rt = await world.rts.open({ modelFor, tools: [gated] });
    const leases = createKvResourceLeases({ kv: () => ensureResourceLeaseBucket(new Kvm(rt.bus.js)) });
    const sup = rt.supervisor({ extra: { resourceLeases: leases } });
    const { actor, ended } = await startTurn(sup, 'both write x', turnRequest(world.ws));
    const parent = await waitForLog(sup, actor, (l) => ofType(l, 'subagent/spawned').length === 2);
    const ids = ofType(parent, 'subagent/spawned').map((e) => e.data.childId);
    const started = (l: ActorEvent[]) => ofType(l, 'tool/start').some((e) => e.data.name === 'slow_write');
    const decided = (l: ActorEvent[]) => ofType(l, 'policy/decided').length > 0;
    // one child holds the lease (its write is in the tool), the other has its call allowed and waits
    let holder = '';
    let waiter = '';
    for (let i = 0; !waiter; i++) {
      const [a, b] = await Promise.all(ids.map((id) => readLog(sup, actor.rootId, id)));
      if (started(a!) && decided(b!) && !started(b!) && entered === 1) [holder, waiter] = [ids[0]!, ids[1]!];
      else if (started(b!) && decided(a!) && !started(a!) && entered === 1) [holder, waiter] = [ids[1]!, ids[0]!];
      else if (i > 300) throw new Error('the children never reached one holding, one waiting');
      else await new Promise((r) => setTimeout(r, 50));
    }
    await sup.send(interruptMessage(waiter));
    const w = await waitForLog(sup, { rootId: actor.rootId, actorId: waiter }, (l) => l.some((e) => e.type === 'turn/end'));
    expect(ofType(w, 'turn/end')[0]!.data.outcome).toBe('cancelled');
    expect(started(w)).toBe(false);
    expect(ofType(w, 'tool/cancelled')[0]!.data).toMatchObject({ started: false });
    open();
    await expect(ended).resolves.toMatchObject({ outcome: 'completed' });
    const h = await waitForLog(sup, { rootId: actor.rootId, actorId: holder }, (l) => l.some((e) => e.type === 'subagent/notified'));
    expect(ofType(h, 'tool/result').find((e) => e.data.source === 'tool:slow_write')!.data.ok).toBe(true);
    expect(entered).toBe(1);
    for (const l of [w, h]) {
      const v = verifyLog(l);
      expect(v, formatViolations(v)).toEqual([]);
    }
    expect(await leases.holdersOf(`path:${join(world.ws, 'x.txt')}`, Date.now())).toEqual([]);
    expect(await leases.holdersOf(`process:${world.ws}`, Date.now())).toEqual([]);
  });
});
