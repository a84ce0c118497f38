import { beforeAll, describe, expect, it } from 'vitest';
import { treeOk, verifyTree, TREE_VIOLATION_CODES, type TreeVerdict } from '../../src/verify/tree.js';
import { formatViolations } from '../../src/verify/verify.js';
import type { ActorEvent, EventOf, EventType } from '../../src/protocol/events.js';
import { turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, ofType, startTurn } from '../actors/harness.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';

const world = actorTestWorld();


/** Every log of the tree, read once it is settled: the root's turn ended and every child's notice arrived. */
async function readTree(reader: { readTree(rootId: string): AsyncIterable<{ actorId: string; event: ActorEvent }> }, rootId: string): Promise<Map<string, ActorEvent[]>> {
  const logs = new Map<string, ActorEvent[]>();
  for await (const t of reader.readTree(rootId)) {
    const l = logs.get(t.actorId) ?? [];
    l.push(t.event);
    logs.set(t.actorId, l);
  }
  return logs;
}

const treeCodes = (v: TreeVerdict): string[] => v.tree.map((x) => x.code);
const describeVerdict = (v: TreeVerdict): string =>
  [...v.actors.map((a) => `${a.actorId}:\n${formatViolations(a.violations)}`), ...v.tree.map((t) => `${t.actorId} seq ${t.seq}: ${t.code}: ${t.message}`), ...v.running].join('\n');

/** A copy of the logs to alter. */
const copy = (logs: Map<string, ActorEvent[]>): Map<string, ActorEvent[]> => new Map([...logs].map(([id, l]) => [id, structuredClone(l)]));
const first = <T extends EventType>(log: ActorEvent[], type: T): EventOf<T> => ofType(log, type)[0]!;
/** Appends an event at the log's next seq, so the log's own checks see no gap. */
const append = (log: ActorEvent[], e: ActorEvent): void => {
  log.push({ ...structuredClone(e), seq: log[log.length - 1]!.seq + 1 } as ActorEvent);
};

describe('verifyTree', () => {
  let logs: Map<string, ActorEvent[]>;
  let rootId: string;
  let reader: string;
  let counter: string;

  beforeAll(async () => {
    // a real run: the parent spawns a read-only reader with two tools and a counter that reports
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          { tool_calls: [
            { name: 'spawn_agent', arguments: { task: 'read src/a.txt and say its first line', name: 'reader', tools: ['read_file', 'list_dir'], workspace: 'readonly', budget: { tokens: 50_000 } } },
            { name: 'spawn_agent', arguments: { task: 'count the lines of src/a.txt', name: 'counter', budget: { tokens: 50_000 } } },
          ], usage: { input_tokens: 60, output_tokens: 6 } },
          call('wait_agents', {}),
          call('wait_agents', {}),
          call('wait_agents', {}),
          answer('merged: alpha, 2 lines'),
        ],
        // each notice comes while the parent waits (one per wait_agents), not before its next
        // request: children hosted in-process start at once and would otherwise be done first
        reader: [{ ...call('read_file', { path: 'src/a.txt' }), delay_ms: 200 }, answer('the first line is alpha')],
        counter: [{ ...call('report', { content: 'halfway there' }), delay_ms: 500 }, { ...answer('2 lines'), delay_ms: 500 }],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws, { maxTokens: 500_000 }));
    const end = await ended;
    expect(end.outcome, end.reason ?? '').toBe('completed');
    rootId = actor.rootId;
    // the children's notices are sent after their turns end: wait until the tree is settled
    for (let i = 0; i < 200; i++) {
      logs = await readTree(sup.reader, rootId);
      if (logs.size === 3 && verifyTree(logs, rootId).running.length === 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const requests = ofType(logs.get(rootId)!, 'subagent/spawn_requested');
    reader = requests.find((r) => r.data.name === 'reader')!.data.childId;
    counter = requests.find((r) => r.data.name === 'counter')!.data.childId;
  });

  it('holds for a real run: three logs, every link, notice and limit as it should be', () => {
    const v = verifyTree(logs, rootId);
    expect(v.running).toEqual([]);
    expect(v.actors.map((a) => a.actorId).sort()).toEqual([rootId, reader, counter].sort());
    expect(treeOk(v), describeVerdict(v)).toBe(true);
  });

  it('reports a tree still running as running, not as violations', () => {
    const l = copy(logs);
    // the reader's log as of before its turn ended: its notice is not sent yet
    const child = l.get(reader)!;
    l.set(reader, child.slice(0, child.findIndex((e) => e.type === 'turn/end')));
    const parent = l.get(rootId)!;
    const notice = ofType(parent, 'inbox/received').find((e) => e.data.from === reader && e.data.kind === 'subagent_completed')!;
    l.set(rootId, parent.slice(0, parent.indexOf(notice)));
    const v = verifyTree(l, rootId);
    expect(v.running.join('\n')).toContain(`${reader} has turn`);
    expect(v.running.join('\n')).toContain(`${rootId} has turn`);
    expect(v.tree, describeVerdict(v)).toEqual([]);
  });

  it('fails a child whose first task is not the request that asked for it', () => {
    const l = copy(logs);
    const task = l.get(reader)![0] as EventOf<'inbox/received'>;
    task.data.messageId = 'msg_other';
    expect(treeCodes(verifyTree(l, rootId))).toContain('tree.task_mismatch');
  });

  it('fails a child that received a second task', () => {
    const l = copy(logs);
    const child = l.get(counter)!;
    const again = structuredClone(child[0]) as EventOf<'inbox/received'>;
    again.data.messageId = 'msg_second_task';
    append(child, again);
    expect(treeCodes(verifyTree(l, rootId, { complete: true }))).toContain('tree.task_twice');
  });

  it('fails two requests that name one child', () => {
    const l = copy(logs);
    const parent = l.get(rootId)!;
    const again = structuredClone(ofType(parent, 'subagent/spawn_requested').find((r) => r.data.childId === reader)!);
    again.data.requestId = 'msg_another_request';
    append(parent, again);
    expect(treeCodes(verifyTree(l, rootId, { complete: true }))).toContain('tree.child_requested_twice');
  });

  it('fails a spawned child with no log, and a log no request names', () => {
    const l = copy(logs);
    const stray = structuredClone(l.get(counter)!).map((e) => ({ ...e, actor: 'agt_stray' }) as ActorEvent);
    l.delete(counter);
    l.set('agt_stray', stray);
    const codes = treeCodes(verifyTree(l, rootId, { complete: true }));
    expect(codes).toContain('tree.child_missing');
    expect(codes).toContain('tree.child_unrequested');
  });

  it("fails a spawn whose child's last turn sent no notice, and accepts one cancelled by an interrupt or detached", () => {
    const l = copy(logs);
    const parent = l.get(rootId)!;
    const notice = ofType(parent, 'inbox/received').find((e) => e.data.from === reader && e.data.kind === 'subagent_completed')!;
    // the parent heard of another turn of the reader, not of the last one
    notice.data.content = notice.data.content.replace(/"turn":"[^"]+"/, '"turn":"turn_not_the_last"');
    expect(treeCodes(verifyTree(l, rootId))).toEqual(['tree.spawn_unended']);

    const cancelled = copy(l);
    const end = ofType(cancelled.get(reader)!, 'turn/end')[0]!;
    end.data.outcome = 'cancelled';
    const p = cancelled.get(rootId)!;
    append(p, { ...first(p, 'subagent/spawned'), type: 'subagent/message_sent', data: { childId: reader, messageId: 'msg_interrupt', kind: 'interrupt' } } as ActorEvent);
    expect(treeCodes(verifyTree(cancelled, rootId))).not.toContain('tree.spawn_unended');

    const detached = copy(l);
    const d = detached.get(rootId)!;
    append(d, { ...first(d, 'subagent/spawned'), type: 'subagent/detached', data: { childId: reader, reason: 'parent ended' } } as ActorEvent);
    expect(treeCodes(verifyTree(detached, rootId))).not.toContain('tree.spawn_unended');
  });

  it('fails a report the parent never received, in a complete tree', () => {
    const l = copy(logs);
    const parent = l.get(rootId)!;
    const received = ofType(parent, 'inbox/received').find((e) => e.data.kind === 'subagent_report')!;
    // the parent's log as if the report never came: the wait took the counter's notice instead
    received.data.messageId = 'msg_something_else';
    const v = verifyTree(l, rootId);
    expect(v.running.join('\n')).toContain(`has not received`);
    expect(verifyTree(l, rootId, { complete: true }).tree.filter((x) => x.code === 'tree.notice_unreceived').map((x) => x.actorId)).toEqual([counter]);
  });

  it('fails a notice never included (in a complete tree) and one included twice', () => {
    const never = copy(logs);
    const parent = never.get(rootId)!;
    const taken = ofType(parent, 'subagent/completed').find((e) => e.data.kind === 'subagent_report')!;
    expect(taken, 'a wait_agents took the report').toBeDefined();
    // the wait took nothing: the call's result stays, the inclusion is gone
    parent.splice(parent.indexOf(taken), 1, { ...taken, type: 'subagent/waiting', data: { childIds: [counter], deadlineAt: null, any: true } } as ActorEvent);
    // an idle parent holding a report would take it into a turn next: from the logs alone, running
    expect(verifyTree(never, rootId).running.join('\n')).toContain(`to take into a turn`);
    expect(treeCodes(verifyTree(never, rootId, { complete: true }))).toContain('tree.notice_unincluded');

    const twice = copy(logs);
    const p = twice.get(rootId)!;
    const report = ofType(p, 'subagent/completed').find((e) => e.data.kind === 'subagent_report')!;
    const later = ofType(p, 'request/prepared').find((e) => e.seq > report.seq)!;
    later.data.messageIds = [report.data.messageId];
    expect(treeCodes(verifyTree(twice, rootId))).toContain('tree.notice_included_twice');
  });

  it("fails a child given tools its parent's turn lacks, or running with tools its request did not give", () => {
    const parentLacks = copy(logs);
    const start = first(parentLacks.get(rootId)!, 'turn/start');
    start.data.settings.tools = start.data.settings.tools.filter((t) => t !== 'read_file');
    expect(verifyTree(parentLacks, rootId).tree.filter((x) => x.code === 'tree.tools_wider').map((x) => x.actorId)).toEqual([rootId, rootId]);

    const childWider = copy(logs);
    const childStart = first(childWider.get(reader)!, 'turn/start');
    childStart.data.settings.tools.push('shell');
    expect(verifyTree(childWider, rootId).tree.map((x) => [x.code, x.actorId])).toEqual([['tree.tools_wider', reader]]);
  });

  it('fails a looser run mode and a read-only flag dropped, at either link', () => {
    const looser = copy(logs);
    first(looser.get(counter)!, 'turn/start').data.settings.approvalMode = 'full-auto';
    expect(treeCodes(verifyTree(looser, rootId))).toEqual(['tree.mode_looser']);

    const requestLooser = copy(logs);
    ofType(requestLooser.get(rootId)!, 'subagent/spawn_requested')[1]!.data.permissions.approvalMode = 'full-auto';
    const codes = treeCodes(verifyTree(requestLooser, rootId));
    expect(codes[0]).toBe('tree.mode_looser');

    const dropped = copy(logs);
    delete first(dropped.get(reader)!, 'turn/start').data.settings.readOnly;
    expect(treeCodes(verifyTree(dropped, rootId))).toEqual(['tree.readonly_dropped']);

    const planParent = copy(logs);
    first(planParent.get(rootId)!, 'turn/start').data.settings.planMode = true;
    expect(verifyTree(planParent, rootId).tree.filter((x) => x.code === 'tree.readonly_dropped').map((x) => x.actorId)).toEqual([rootId]);
  });

  it("fails a tree that spent past its root turn's budget, counting every child's attempts", () => {
    const l = copy(logs);
    const sum = (log: ActorEvent[]) => ofType(log, 'attempt/end').reduce((n, e) => n + e.data.usage.inputTokens + e.data.usage.outputTokens, 0);
    const total = [...l.values()].reduce((n, log) => n + sum(log), 0);
    const rootOnly = sum(l.get(rootId)!);
    expect(rootOnly).toBeLessThan(total - 1);
    // within the limit for the root alone; the children's spend takes the tree past it
    first(l.get(rootId)!, 'turn/start').data.settings.budgets.maxTokens = total - 1;
    // (the children's carves are then wider than the root's limit too: that is checked on its own below)
    const spent = (v: TreeVerdict) => treeCodes(v).filter((c) => c === 'tree.over_budget');
    expect(spent(verifyTree(l, rootId))).toEqual(['tree.over_budget']);
    first(l.get(rootId)!, 'turn/start').data.settings.budgets.maxTokens = total;
    expect(spent(verifyTree(l, rootId))).toEqual([]);
  });

  it('fails a tree that started more tool calls or steps than its root turn allowed, counting each child\'s carved turn', () => {
    const l = copy(logs);
    const calls = [...l.values()].reduce((n, log) => n + ofType(log, 'tool/start').length, 0);
    const steps = [...l.values()].reduce((n, log) => n + ofType(log, 'step/start').length, 0);
    const budgets = first(l.get(rootId)!, 'turn/start').data.settings.budgets;
    budgets.maxToolCalls = calls - 1;
    budgets.maxSteps = steps - 1;
    const over = verifyTree(l, rootId).tree.filter((t) => t.code === 'tree.over_budget').map((t) => t.message);
    expect(over).toEqual([expect.stringMatching(new RegExp(`took ${steps} steps .* past its limit of ${steps - 1}`)), expect.stringMatching(new RegExp(`started ${calls} tool calls .* past its limit of ${calls - 1}`))]);
  });

  it('fails a carve wider than its parent\'s turn, one its parent did not reserve, and a child turn that runs past its carve', () => {
    const wider = copy(logs);
    const request = ofType(wider.get(rootId)!, 'subagent/spawn_requested').find((r) => r.data.childId === reader)!;
    request.data.budget.maxSteps = 1_000;
    expect(treeCodes(verifyTree(wider, rootId))).toContain('tree.carve_wider');

    const unreserved = copy(logs);
    const root = unreserved.get(rootId)!;
    const carve = ofType(root, 'budget/reserved').find((e) => e.data.kind === 'subagent')!;
    delete carve.data.steps;
    expect(treeCodes(verifyTree(unreserved, rootId))).toContain('tree.carve_unreserved');

    const exceeded = copy(logs);
    first(exceeded.get(reader)!, 'turn/start').data.settings.budgets.maxSteps = 10_000;
    expect(treeCodes(verifyTree(exceeded, rootId))).toEqual(['tree.carve_exceeded']);
    // given one step, the reader ran with more and took two (a read, then its answer)
    const spent = copy(logs);
    ofType(spent.get(rootId)!, 'subagent/spawn_requested').find((r) => r.data.childId === reader)!.data.budget.maxSteps = 1;
    const v = verifyTree(spent, rootId);
    expect(treeCodes(v)).toEqual(['tree.carve_exceeded', 'tree.carve_exceeded']);
    expect(v.tree[1]!.message).toMatch(/took 2 steps, past the 1 it was given/);
  });

  it('fails a tree whose children ran more at once than max_children_per_tree, by their lifetimes in the tree\'s order', () => {
    // the run's two children overlap: under a limit of one that is a violation, under two it is not
    const one = copy(logs);
    first(one.get(rootId)!, 'turn/start').data.settings.treeLimits = { maxDepth: 3, maxChildrenPerParent: 8, maxChildrenPerTree: 1 };
    const v = verifyTree(one, rootId);
    expect(treeCodes(v)).toEqual(['tree.too_wide']);
    expect(v.tree[0]!.message).toMatch(/2 subagents of the tree run at once/);
    expect(treeCodes(verifyTree(logs, rootId, { limits: { maxChildrenPerTree: 2 } }))).toEqual([]);
    expect(treeCodes(verifyTree(logs, rootId, { limits: { maxChildrenPerTree: 1 } }))).toEqual(['tree.too_wide']);
    // in an order where the reader's turn ended before the counter was asked for, one at a time holds
    const order = new Map<string, Map<number, number>>();
    let n = 0;
    const place = (id: string, pred: (e: ActorEvent) => boolean) => {
      const m = order.get(id) ?? new Map<number, number>();
      for (const e of logs.get(id)!) if (pred(e) && !m.has(e.seq)) m.set(e.seq, n++);
      order.set(id, m);
    };
    const counterAsked = ofType(logs.get(rootId)!, 'subagent/spawn_requested').find((r) => r.data.childId === counter)!.seq;
    place(rootId, (e) => e.seq < counterAsked);
    place(reader, () => true);
    place(rootId, () => true);
    place(counter, () => true);
    expect(treeCodes(verifyTree(logs, rootId, { limits: { maxChildrenPerTree: 1 }, order }))).toEqual([]);
  });

  it('names each code it reports in TREE_VIOLATION_CODES', () => {
    expect(new Set(TREE_VIOLATION_CODES).size).toBe(TREE_VIOLATION_CODES.length);
  });
});
