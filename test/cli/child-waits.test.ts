import { describe, expect, it } from 'vitest';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { watchChildWaits } from '../../src/cli/child-waits.js';
import { approvalMessage } from '../../src/client/messages.js';
import type { WhereConfig } from '../../src/cli/hints.js';
import { pendingApprovals } from '../../src/store/projection.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, replay, startTurn, waitForLog } from '../actors/harness.js';

const world = actorTestWorld();
/** A command with the default data dir and server: its lines carry no flags. */
const WHERE = { sources: {}, dataDir: '/unused', natsUrl: null } as unknown as WhereConfig;


describe('the waits of subagents, said beside the root', () => {
  it('names the subagent, what it asks and the lines that answer it, once each, whether the watch began before the park or after', async () => {
    const scripts: Record<string, ScriptResponse[]> = {
      main: [call('spawn_agent', { task: 'write notes.txt', name: 'writer', mode: 'foreground' }), answer('done')],
      writer: [call('write_file', { path: 'notes.txt', content: 'hello\n' }), answer('wrote it')],
    };
    const rt = await world.rts.open({
      modelFor: treeModels(scripts),
    });
    const sup = rt.supervisor();
    const stop = new AbortController();
    const early: string[][] = [];
    const late: string[][] = [];
    const { actor, ended } = await startTurn(sup, 'have a writer write notes.txt', turnRequest(world.ws, { approvalMode: 'ask' }));
    const watch = (said: string[][]) => watchChildWaits({ reader: sup.reader, config: WHERE, rootId: actor.rootId, actorId: actor.actorId, signal: stop.signal, say: (l) => said.push(l) });
    const watching = [watch(early)];
    const root = await waitForLog(sup, actor, (l) => l.some((e) => e.type === 'subagent/spawned'));
    const childId = ofType(root, 'subagent/spawned')[0]!.data.childId;
    const child = await waitForLog(sup, { rootId: actor.rootId, actorId: childId }, (l) => l.some((e) => e.type === 'actor/parked'));
    const [pending] = pendingApprovals(replay(childId, child));
    const approvalId = pending!.approvalId;
    watching.push(watch(late));
    const expected = [
      `subagent writer (${childId}) needs approval ${approvalId}`,
      `  write_file (version 1) asks for approval ${approvalId}`,
    ];
    const until = Date.now() + 10_000;
    while ((early.length === 0 || late.length === 0) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    for (const said of [early, late]) {
      expect(said).toHaveLength(1);
      expect(said[0]!.slice(0, 2)).toEqual(expected);
      expect(said[0]).toContain(`approve: actorloop approve ${childId} ${approvalId}`);
      expect(said[0]).toContain(`deny:    actorloop deny ${childId} ${approvalId} [--reason "<why>"]`);
    }
    // answered by the subagent's own ID, the tree goes on and ends; nothing more is said
    await sup.send(approvalMessage(childId, approvalId, pending!.planDigest, { decision: 'approve', always: false }));
    expect((await ended).outcome).toBe('completed');
    stop.abort();
    await Promise.all(watching);
    expect([early.length, late.length]).toEqual([1, 1]);
    expect(ofType(await readLog(sup, actor.rootId, childId), 'approval/granted')).toHaveLength(1);
  });
});
