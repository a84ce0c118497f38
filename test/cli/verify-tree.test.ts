import { PassThrough } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyTreeCommand } from '../../src/cli/tree/verify-tree.js';
import { EXIT } from '../../src/cli/exit-codes.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, TurnSettings } from '../../src/protocol/events.js';
import type { TreeEvent } from '../../src/store/log-port.js';
import { turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn } from '../actors/harness.js';

const world = actorTestWorld();

const call = (name: string, args: Record<string, unknown>): ScriptResponse => ({ tool_calls: [{ name, arguments: args }], usage: { input_tokens: 60, output_tokens: 6 } });

/** A reader whose tree is `events`, in the order given (a tree read is in commit order). */
const readerOf = (events: TreeEvent[]) => ({
  async *readTree() {
    yield* events;
  },
});

/** Runs the command; what it printed and its exit code. */
async function verify(events: TreeEvent[], json = false): Promise<{ code: number; stdout: string }> {
  const stdout = new PassThrough();
  let text = '';
  stdout.on('data', (d: Buffer) => (text += d.toString()));
  const code = await verifyTreeCommand(readerOf(events), events[0]!.actorId, { json }, { stdout, stderr: new PassThrough() });
  return { code, stdout: text };
}

describe('actorloop verify --tree', () => {
  let tree: TreeEvent[];
  let childId: string;

  beforeAll(async () => {
    const rt = await world.rts.open({
      modelFor: async (s: TurnSettings, cursor: number) => createScriptedModel({
        cursor,
        responses: s.agentName === 'helper'
          ? [call('report', { content: 'found it' }), { content: 'done' }]
          : [call('spawn_agent', { task: 'look', name: 'helper' }), call('wait_agents', {}), call('wait_agents', {}), { content: 'merged' }],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'go', turnRequest(world.ws));
    expect((await ended).outcome).toBe('completed');
    for (let i = 0; i < 200; i++) {
      tree = [];
      for await (const e of sup.reader.readTree(actor.rootId)) tree.push(e);
      if (tree.some((e) => e.event.type === 'subagent/notified')) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    childId = ofType(tree.filter((e) => e.actorId === actor.rootId).map((e) => e.event), 'subagent/spawn_requested')[0]!.data.childId;
  });

  it('prints each agent by name and the tree checks, exit 0 when all hold', async () => {
    const r = await verify(tree);
    expect(r.code).toBe(EXIT.completed);
    expect(r.stdout).toMatch(/^tree agt_\w+: 2 agent\(s\), \d+ events\n/);
    expect(r.stdout).toContain(`${childId} (helper): `);
    expect(r.stdout).toContain('(main): ');
    expect(r.stdout).toContain('tree: every spawn, notice, permission and budget holds');
    const json = JSON.parse((await verify(tree, true)).stdout) as { ok: boolean; actors: Array<{ name: string }> };
    expect(json.ok).toBe(true);
    expect(json.actors.map((a) => a.name).sort()).toEqual(['helper', 'main']);
  });

  it('exits 1 with the violation when a child runs with more than it was given', async () => {
    const altered = structuredClone(tree);
    const start = altered.find((e) => e.actorId === childId && e.event.type === 'turn/start')!.event as Extract<ActorEvent, { type: 'turn/start' }>;
    start.data.settings.approvalMode = 'full-auto';
    const r = await verify(altered);
    expect(r.code).toBe(EXIT.failed);
    expect(r.stdout).toMatch(new RegExp(`tree: 1 violation\\(s\\)\\n    ${childId} seq ${start.seq}: tree.mode_looser: `));
  });

  it('passes a tree still running, and says what runs', async () => {
    // the tree as of the child's last turn start: the child works on, the parent waits
    const cut = tree.findIndex((e) => e.actorId === childId && e.event.type === 'turn/start');
    const r = await verify(tree.slice(0, cut + 1));
    expect(r.code).toBe(EXIT.completed);
    expect(r.stdout).toContain(`still running (the checks that need an end wait for it): `);
    expect(r.stdout).toContain(`${childId} has turn`);
  });
});
