import { describe, expect, it } from 'vitest';
import { formatViolations, verifyLog } from '../../src/verify/verify.js';
import { verifyTree } from '../../src/verify/tree.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn, waitForLog } from './harness.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';

// The same tree as in subagents.test.ts, on a real nats-server and LMDB: children's logs on
// log.<root>.<child>, their inboxes on the actors' channel, their consumers made by the supervisor.
const world = actorTestWorld({ nats: true });


describe('subagents on JetStream', () => {
  it('three background children and a foreground one: every log under the root, every notice taken once', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          { tool_calls: ['a', 'b', 'c'].map((n) => ({ name: 'spawn_agent', arguments: { task: `look at ${n}`, name: n } })), usage: { input_tokens: 1, output_tokens: 1 } },
          call('wait_agents', {}), call('wait_agents', {}), call('wait_agents', {}),
          call('spawn_agent', { task: 'sum up', name: 'fg', mode: 'foreground' }),
          answer('all done'),
        ],
        a: [call('read_file', { path: 'src/a.txt' }), answer('a: alpha')],
        b: [answer('b: nothing')],
        c: [call('report', { content: 'c is halfway' }), answer('c: done')],
        fg: [answer('summed up')],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws));
    expect((await ended).outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const out = ofType(log, 'tool/result').map((e) => e.data.output);
    expect(out.at(-1)).toContain('summed up');
    const children = ofType(log, 'subagent/spawned').map((e) => e.data.childId);
    expect(children).toHaveLength(4);
    for (const id of children) {
      const child = await waitForLog(sup, { rootId: actor.rootId, actorId: id }, (l) => l.some((e) => e.type === 'subagent/notified'));
      expect(child.every((e) => e.actor === id)).toBe(true);
      const v = verifyLog(child);
      expect(v, formatViolations(v)).toEqual([]);
    }
    // the tree reads back in stream order over log.<root>.>
    const actors = new Set<string>();
    for await (const { actorId } of sup.reader.readTree(actor.rootId)) actors.add(actorId);
    expect(actors).toEqual(new Set([actor.actorId, ...children]));
    // every notice and the report is taken in once: by a waiting call, or by a step's request
    const sent: string[] = [];
    for (const id of children) {
      const child = await readLog(sup, actor.rootId, id);
      sent.push(...ofType(child, 'subagent/notified').map((e) => e.data.messageId), ...ofType(child, 'subagent/reported').map((e) => e.data.messageId));
    }
    expect(sent).toHaveLength(5);
    const taken = [
      ...ofType(log, 'subagent/completed').map((e) => e.data.messageId),
      ...ofType(log, 'request/prepared').flatMap((e) => e.data.messageIds ?? []).filter((id) => sent.includes(id)),
    ];
    expect(taken.sort()).toEqual([...sent].sort());
    // the foreground spawn's result is its child's answer
    expect(ofType(log, 'subagent/completed').some((e) => e.data.childId === children[3])).toBe(true);
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });
});

describe('the tree\'s width on JetStream', () => {
  it('two parents each spawning two children at the same moment under max_children_per_tree = 4: four run, the other two are refused', async () => {
    const leaf = { content: 'leaf done', delay_ms: 1_500, usage: { input_tokens: 1, output_tokens: 1 } };
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          { tool_calls: ['p1', 'p2'].map((n) => ({ name: 'spawn_agent', arguments: { task: `split ${n}`, name: 'parent' } })), usage: { input_tokens: 1, output_tokens: 1 } },
          call('wait_agents', {}), call('wait_agents', {}),
          answer('both halves done'),
        ],
        parent: [
          { tool_calls: [1, 2].map((i) => ({ name: 'spawn_agent', arguments: { task: `leaf ${i}`, name: 'leaf' } })), usage: { input_tokens: 1, output_tokens: 1 } },
          call('wait_agents', {}), call('wait_agents', {}),
          answer('half done'),
        ],
        leaf: [leaf],
      }),
    });
    const sup = rt.supervisor({ extra: { subagentLimits: { maxDepth: 3, maxChildrenPerParent: 8, maxChildrenPerTree: 4, onParentEnd: 'cancel' } } });
    const { actor, ended } = await startTurn(sup, 'split the work', turnRequest(world.ws));
    expect((await ended).outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const parents = ofType(log, 'subagent/spawned').map((e) => e.data.childId);
    expect(parents).toHaveLength(2);
    const logs = new Map([[actor.actorId, log]]);
    for (const p of parents) {
      const plog = await waitForLog(sup, { rootId: actor.rootId, actorId: p }, (l) => l.some((e) => e.type === 'subagent/notified'));
      logs.set(p, plog);
      for (const s of ofType(plog, 'subagent/spawned')) {
        logs.set(s.data.childId, await waitForLog(sup, { rootId: actor.rootId, actorId: s.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified')));
      }
    }
    const leaves = parents.flatMap((p) => ofType(logs.get(p)!, 'subagent/spawn_requested'));
    const refusals = parents.flatMap((p) => ofType(logs.get(p)!, 'tool/result').map((e) => e.data.output)).filter((o) => /the tree already runs 4 of its 4 subagents/.test(o));
    expect(leaves.length).toBe(2);
    expect(refusals).toHaveLength(2);
    // the tree's logs, in its stream order: never more than four children ran at once
    const order = new Map<string, Map<number, number>>();
    const read = new Map<string, ActorEvent[]>();
    for await (const { actorId, event, streamSeq } of sup.reader.readTree(actor.rootId)) {
      (read.get(actorId) ?? read.set(actorId, []).get(actorId)!).push(event);
      (order.get(actorId) ?? order.set(actorId, new Map()).get(actorId)!).set(event.seq, streamSeq);
    }
    const v = verifyTree(read, actor.rootId, { order, limits: { maxChildrenPerTree: 4 } });
    expect(v.tree.map((t) => `${t.code}: ${t.message}`)).toEqual([]);
    // every child's turn ended and gave its place back: the tree holds none
    expect(await rt.ports.treeSlots!.take(actor.rootId, 'agt_PROBE', 'msg_probe', 1, Date.now())).toEqual({ taken: true });
  });
});
