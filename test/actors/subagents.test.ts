import { describe, expect, it } from 'vitest';
import { verifyLog, formatViolations } from '../../src/verify/verify.js';
import { verifyTree } from '../../src/verify/tree.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { readLog, turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, message, ofType, only, startTurn, waitForLog } from './harness.js';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import { spawnRequestId } from '../../src/protocol/subagents.js';

const world = actorTestWorld();


describe('subagents', () => {
  it('a parent spawns two background children, waits for each, and merges what they said', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [
          { tool_calls: [
            { name: 'spawn_agent', arguments: { task: 'read src/a.txt and say its first line', name: 'reader' } },
            { name: 'spawn_agent', arguments: { task: 'count the lines of src/a.txt', name: 'counter' } },
          ], usage: { input_tokens: 60, output_tokens: 6 } },
          call('wait_agents', {}),
          call('wait_agents', {}),
          call('wait_agents', {}),
          answer('merged: alpha, 2 lines'),
        ],
        reader: [call('read_file', { path: 'src/a.txt' }), answer('the first line is alpha')],
        counter: [call('report', { content: 'halfway there' }), answer('2 lines')],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws));
    const end = await ended;
    expect(end.outcome).toBe('completed');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const requested = ofType(log, 'subagent/spawn_requested');
    expect(requested.map((e) => e.data.name).sort()).toEqual(['counter', 'reader']);
    expect(ofType(log, 'subagent/spawned')).toHaveLength(2);
    // each child's log is its own, under the root's
    for (const r of requested) {
      const child = await waitForLog(sup, { rootId: actor.rootId, actorId: r.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified'));
      const start = ofType(child, 'turn/start')[0]!;
      expect(start.data.source).toBe('subagent_task');
      expect(start.data.settings.agentName).toBe(r.data.name);
      expect(start.data.settings.tools).toContain('report');
      expect(start.data.settings.tools).not.toContain('ask_user_missing');
      const v = verifyLog(child);
      expect(v, formatViolations(v)).toEqual([]);
    }
    if (process.env.DEBUG_TREE) console.log(log.map((e) => `${e.seq} ${e.type} ${JSON.stringify(e.data).slice(0, 160)}`).join('\n'));
    const waited = ofType(log, 'subagent/completed');
    // two notices and a report, each taken in once: by a wait, or (when a step read it first) by its request
    const byStep = ofType(log, 'request/prepared').flatMap((e) => e.data.messageIds ?? []).filter((id) => log.some((x) => x.type === 'inbox/received' && x.data.messageId === id && x.data.kind.startsWith('subagent_')));
    expect(waited.length + byStep.length).toBe(3);
    expect(new Set([...waited.map((e) => e.data.messageId), ...byStep]).size).toBe(3);
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });
});

/** Runs a tree on in-memory ports: the root's turn with `over`, returning the root's log and a reader of any log. */
async function runTree(scripts: Record<string, ScriptResponse[]>, over: Parameters<typeof turnRequest>[1] = {}, extra: Record<string, unknown> = {}) {
  const rt = await world.rts.open({ modelFor: treeModels(scripts) });
  const sup = rt.supervisor({ extra });
  const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws, over));
  const end = await ended;
  const log = await readLog(sup, actor.rootId, actor.actorId);
  const logOf = (id: string) => readLog(sup, actor.rootId, id);
  return { sup, actor, end, log, logOf };
}

const results = (log: Awaited<ReturnType<typeof readLog>>) => ofType(log, 'tool/result').map((e) => e.data.output);

describe('delegation modes', () => {
  it('foreground: the spawn call stays open and its result is the child\'s final answer', async () => {
    const { end, log, logOf } = await runTree({
      main: [call('spawn_agent', { task: 'say hi', name: 'helper', mode: 'foreground' }), answer('done')],
      helper: [answer('hi from the helper')],
    });
    expect(end.outcome).toBe('completed');
    expect(results(log)[0]).toContain('hi from the helper');
    const waited = only(log, 'subagent/completed');
    expect(waited.data.kind).toBe('subagent_completed');
    const child = await logOf(waited.data.childId);
    expect(ofType(child, 'subagent/notified')).toHaveLength(1);
  });

  it('continuable: returns once the child started; a follow-up gives it a second turn and a second notice', async () => {
    const { sup, actor, end, log } = await runTree({
      main: [
        call('spawn_agent', { task: 'first part', name: 'worker', mode: 'continuable' }),
        call('wait_agents', {}),
        call('send_message', { agent: 'worker', content: 'now the second part', follow_up: true }),
        call('wait_agents', { ids: ['worker'] }),
        answer('both parts done'),
      ],
      // its first answer takes a while: its notice comes while the parent waits, not before its next request
      worker: [{ ...answer('first part done'), delay_ms: 300 }, answer('second part done')],
    });
    expect(end.outcome).toBe('completed');
    const out = results(log);
    expect(out[0]).toContain('started its first turn');
    expect(out[1]).toContain('first part done');
    expect(out[2]).toMatch(/its inbox accepted it/);
    expect(out[3]).toContain('second part done');
    const childId = only(log, 'subagent/spawned').data.childId;
    const child = await waitForLog(sup, { rootId: actor.rootId, actorId: childId }, (l) => ofType(l, 'subagent/notified').length === 2);
    const starts = ofType(child, 'turn/start');
    expect(starts.map((e) => e.data.source)).toEqual(['subagent_task', 'follow_up']);
    // the follow-up turn runs with the settings the first recorded: the parent's narrowing holds
    expect(starts[1]!.data.settings.tools).toEqual(starts[0]!.data.settings.tools);
    expect(starts[1]!.data.settings.agentName).toBe('worker');
  });
});

describe('permissions only narrow', () => {
  it('a spawn asking for a tool the parent lacks is a tool error; a child calling a tool it was not given is refused', async () => {
    const { end, log, logOf } = await runTree({
      main: [
        call('spawn_agent', { task: 'write a file', name: 'writer', tools: ['write_file'] }),
        call('spawn_agent', { task: 'read a file', name: 'reader', tools: ['read_file'], mode: 'foreground' }),
        answer('done'),
      ],
      reader: [call('write_file', { path: 'x.txt', content: 'x' }), answer('could not write')],
    }, { tools: ['read_file', 'spawn_agent', 'wait_agents'], approvalMode: 'ask' });
    expect(end.outcome).toBe('completed');
    const out = results(log);
    expect(out[0]).toMatch(/you do not have write_file/);
    expect(out[1]).toContain('could not write');
    const spawned = only(log, 'subagent/spawn_requested');
    expect(spawned.data.permissions.tools.sort()).toEqual(['read_file', 'report']);
    expect(spawned.data.permissions.approvalMode).toBe('ask');
    const child = await logOf(spawned.data.childId);
    const start = ofType(child, 'turn/start')[0]!;
    expect(start.data.settings.tools.sort()).toEqual(['read_file', 'report']);
    expect(start.data.settings.approvalMode).toBe('ask');
    expect(ofType(child, 'tool/call')[0]!.data.status).toBe('unknown_tool');
  });

  it('a readonly child is denied every call with effects; a plan-mode parent\'s children are read-only too', async () => {
    const { log, logOf } = await runTree({
      main: [call('spawn_agent', { task: 'try to write', name: 'ro', workspace: 'readonly', mode: 'foreground' }), answer('done')],
      ro: [call('write_file', { path: 'ro.txt', content: 'x' }), answer('denied, as expected')],
    });
    const spawned = only(log, 'subagent/spawn_requested');
    expect(spawned.data.permissions.readOnly).toBe(true);
    const child = await logOf(spawned.data.childId);
    expect(only(child, 'policy/decided').data).toMatchObject({ decision: 'deny', rule: 'mode:readonly' });
    expect(ofType(child, 'tool/denied')).toHaveLength(1);
  });
});

describe('limits and mistakes the model makes (tool errors it sees)', () => {
  it('depth, width, unknown agents, report from a top agent, wait with nothing to wait for', async () => {
    const { end, log } = await runTree({
      main: [
        call('report', { content: 'hello' }),
        call('wait_agents', {}),
        call('send_message', { agent: 'nobody', content: 'hi' }),
        call('interrupt_agent', { id: 'agt_NOTACHILD' }),
        call('wait_agents', { ids: ['ghost'] }),
        { tool_calls: [
          { name: 'spawn_agent', arguments: { task: 'one', name: 'w1', mode: 'background' } },
          { name: 'spawn_agent', arguments: { task: 'two', name: 'w2', mode: 'background' } },
          { name: 'spawn_agent', arguments: { task: 'three', name: 'w3', mode: 'background' } },
        ], usage: { input_tokens: 1, output_tokens: 1 } },
        call('wait_agents', {}),
        call('wait_agents', {}),
        answer('done'),
      ],
      w1: [answer('w1 done')],
      w2: [answer('w2 done')],
    }, {}, { subagentLimits: { maxDepth: 1, maxChildrenPerParent: 2, maxChildrenPerTree: 64, onParentEnd: 'cancel' } });
    expect(end.outcome).toBe('completed');
    const out = results(log);
    // a top agent does not see report: the call is an unknown tool
    expect(out[0]).toMatch(/unknown tool "report"/);
    expect(out[1]).toMatch(/nothing to wait for/);
    expect(out[2]).toMatch(/"nobody" is not one of your subagents/);
    expect(out[3]).toMatch(/is not one of your subagents/);
    expect(out[4]).toMatch(/"ghost" is not one of your subagents/);
    // two of three: the third spawn ran into max_children_per_parent
    expect(out.slice(5, 8).filter((o) => o.includes('max_children_per_parent'))).toHaveLength(1);
    // children at the depth limit get no spawn tools
    for (const r of ofType(log, 'subagent/spawn_requested')) {
      expect(r.data.permissions.tools).not.toContain('spawn_agent');
      expect(r.data.depth).toBe(1);
    }
  });

  it('a child at max depth cannot spawn: the tool is not among its tools', async () => {
    const { log, logOf } = await runTree({
      main: [call('spawn_agent', { task: 'go deeper', name: 'deep', mode: 'foreground' }), answer('done')],
      deep: [call('spawn_agent', { task: 'deeper still', name: 'deeper' }), answer('I could not spawn')],
    }, {}, { subagentLimits: { maxDepth: 1, maxChildrenPerParent: 8, maxChildrenPerTree: 64, onParentEnd: 'cancel' } });
    const child = await logOf(only(log, 'subagent/spawn_requested').data.childId);
    expect(ofType(child, 'tool/call')[0]!.data.status).toBe('unknown_tool');
  });
});

describe('ownership', () => {
  it('interrupt_agent stops a child\'s turn; its notice says cancelled', async () => {
    const { log, logOf } = await runTree({
      main: [
        call('spawn_agent', { task: 'wait a long time', name: 'slow' }),
        call('interrupt_agent', { id: 'slow' }),
        call('wait_agents', { ids: ['slow'] }),
        answer('stopped it'),
      ],
      slow: [{ content: 'still thinking', delay_ms: 60_000, usage: { input_tokens: 1, output_tokens: 1 } }],
    });
    const out = results(log);
    expect(out[1]).toMatch(/Asked agt_\w+ to stop its turn/);
    expect(out[2]).toMatch(/ended its turn: cancelled/);
    const child = await logOf(only(log, 'subagent/spawned').data.childId);
    expect(only(child, 'interrupt/requested').data.by).toBe(only(log, 'subagent/spawned').actor);
    expect(only(child, 'turn/end').data.outcome).toBe('cancelled');
  });

  it('a parent\'s cancelled turn interrupts its running children (on_parent_end = cancel)', async () => {
    const rt = await world.rts.open({
      modelFor: treeModels({
        main: [call('spawn_agent', { task: 'work long', name: 'long' }), call('wait_agents', {})],
        long: [{ content: 'never', delay_ms: 60_000, usage: { input_tokens: 1, output_tokens: 1 } }],
      }),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws));
    await waitForLog(sup, actor, (l) => l.some((e) => e.type === 'subagent/waiting'));
    await sup.send(message(actor.actorId, '', { kind: 'interrupt', target: 'now' }));
    expect((await ended).outcome).toBe('cancelled');
    const log = await readLog(sup, actor.rootId, actor.actorId);
    const sent = only(log, 'subagent/message_sent');
    expect(sent.data).toMatchObject({ kind: 'interrupt', reason: "the parent's turn ended cancelled" });
    const child = await waitForLog(sup, { rootId: actor.rootId, actorId: sent.data.childId }, (l) => l.some((e) => e.type === 'turn/end'));
    expect(only(child, 'turn/end').data.outcome).toBe('cancelled');
  });

  it('a notice to an idle parent starts a turn whose source is the notice', async () => {
    const { sup, actor, log } = await runTree({
      main: [call('spawn_agent', { task: 'take your time', name: 'bg' }), answer('spawned; I will read its answer when it comes'), answer('read the notice')],
      bg: [{ content: 'background result', delay_ms: 200, usage: { input_tokens: 1, output_tokens: 1 } }],
    });
    expect(ofType(log, 'turn/end')).toHaveLength(1);
    const later = await waitForLog(sup, actor, (l) => ofType(l, 'turn/end').length === 2);
    const second = ofType(later, 'turn/start')[1]!;
    expect(second.data.source).toBe('subagent_notice');
    const v = verifyLog(later);
    expect(v, formatViolations(v)).toEqual([]);
  });
});

describe('budgets carved from the parent', () => {
  it('five children asking for more than the root has left get only what remains, reserved in its log and settled once', async () => {
    const five = Array.from({ length: 5 }, (_, i) => ({ name: 'spawn_agent', arguments: { task: `part ${i}`, name: `p${i}`, budget: { tokens: 100_000 } } }));
    const scripts: Record<string, ScriptResponse[]> = {
      main: [{ tool_calls: five, usage: { input_tokens: 10, output_tokens: 10 } }, call('wait_agents', {}), call('wait_agents', {}), call('wait_agents', {}), call('wait_agents', {}), call('wait_agents', {}), answer('done')],
    };
    for (let i = 0; i < 5; i++) scripts[`p${i}`] = [answer(`part ${i} done`)];
    const { end, log } = await runTree(scripts, { maxTokens: 200_000, maxOutputTokens: 1_000 });
    if (process.env.DEBUG_TREE) console.log(log.map((e) => `${e.seq} ${e.type} ${JSON.stringify(e.data).slice(0, 200)}`).join('\n'));
    expect(end.reason).toBeNull();
    expect(end.outcome).toBe('completed');
    const requested = ofType(log, 'subagent/spawn_requested');
    const reserved = ofType(log, 'budget/reserved').filter((e) => e.data.kind === 'subagent');
    expect(requested.length).toBe(reserved.length);
    // never more than the root had: the carves add up to at most its budget
    const carved = reserved.reduce((n, e) => n + e.data.tokens, 0);
    expect(carved).toBeLessThanOrEqual(200_000);
    for (const r of requested) expect(r.data.budget.maxTokens).toBeLessThanOrEqual(200_000);
    // the first gets what it asked, the next what was left, the rest nothing: they are refused
    expect(requested.map((r) => r.data.clamped?.[0] ?? null)).toEqual([null, expect.stringMatching(/^tokens: asked 100000, got \d+/)]);
    expect(results(log).filter((o) => o.includes('no tokens left to give a subagent'))).toHaveLength(3);
    // every carve settled exactly once
    const settled = ofType(log, 'budget/settled').filter((e) => reserved.some((r) => r.data.reservationId === e.data.reservationId));
    expect(settled.map((e) => e.data.reservationId).sort()).toEqual(reserved.map((e) => e.data.reservationId).sort());
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });
});

/** Every log of the tree once each spawned child has sent the notice of its turn. */
async function settledTree(sup: Awaited<ReturnType<typeof runTree>>['sup'], rootId: string, log: Awaited<ReturnType<typeof readLog>>) {
  const logs = new Map([[rootId, log]]);
  for (const s of ofType(log, 'subagent/spawned')) {
    logs.set(s.data.childId, await waitForLog(sup, { rootId, actorId: s.data.childId }, (l) => l.some((e) => e.type === 'subagent/notified')));
  }
  return logs;
}

describe('steps and tool calls carved from the parent', () => {
  it('three background children under maxToolCalls 5: the whole tree starts at most 5 tool calls, the parent\'s own among them', async () => {
    const three = ['a', 'b', 'c'].map((n) => ({ name: 'spawn_agent', arguments: { task: `read for ${n}`, name: n } }));
    const reads = [call('read_file', { path: 'src/a.txt' }), call('read_file', { path: 'src/a.txt' }), call('read_file', { path: 'src/a.txt' }), answer('read')];
    const { sup, actor, log } = await runTree({
      main: [{ tool_calls: three, usage: { input_tokens: 10, output_tokens: 10 } }, call('wait_agents', {}), call('wait_agents', {}), call('wait_agents', {}), answer('done')],
      a: reads, b: reads, c: reads,
    }, { maxToolCalls: 5 });
    const logs = await settledTree(sup, actor.rootId, log);
    const started = [...logs.values()].reduce((n, l) => n + ofType(l, 'tool/start').filter((e) => !e.data.rerun).length, 0);
    expect(started).toBeLessThanOrEqual(5);
    // what was given is what the parent had left after its three spawns, less the call it keeps for a wait
    const carves = ofType(log, 'budget/reserved').filter((e) => e.data.kind === 'subagent');
    expect(carves.reduce((n, e) => n + (e.data.calls ?? 0), 0)).toBeLessThanOrEqual(1);
    expect(results(log).filter((o) => o.includes('no toolCalls left to give a subagent'))).toHaveLength(2);
    expect(verifyTree(logs, actor.rootId).tree).toEqual([]);
    for (const l of logs.values()) {
      const v = verifyLog(l);
      expect(v, formatViolations(v)).toEqual([]);
    }
  });

  it('maxSteps 3 and a child asking for 100000 steps: the child gets what is left less the parent\'s next step, and says so', async () => {
    const { sup, actor, log, end } = await runTree({
      main: [call('spawn_agent', { task: 'think long', name: 'long', mode: 'foreground', budget: { steps: 100_000 } }), answer('done')],
      long: [call('read_file', { path: 'src/a.txt' }), call('read_file', { path: 'src/a.txt' }), answer('thought')],
    }, { maxSteps: 3 });
    const requested = only(log, 'subagent/spawn_requested');
    // three steps: the parent's first (spawning), its next (reading the answer), one for the child
    expect(requested.data.budget.maxSteps).toBe(1);
    expect(requested.data.clamped?.[0]).toMatch(/^steps: asked 100000, got 1/);
    expect(only(log, 'budget/reserved').data).toMatchObject({ kind: 'subagent', steps: 1 });
    const logs = await settledTree(sup, actor.rootId, log);
    const child = logs.get(requested.data.childId)!;
    expect(only(child, 'turn/start').data.settings.budgets.maxSteps).toBe(1);
    expect(only(child, 'turn/end').data).toMatchObject({ outcome: 'stopped', reason: 'step_budget', steps: 1 });
    // the parent still had its step to read the child's answer in
    expect(end.outcome).toBe('completed');
    const steps = [...logs.values()].reduce((n, l) => n + ofType(l, 'step/start').length, 0);
    expect(steps).toBeLessThanOrEqual(3);
    expect(verifyTree(logs, actor.rootId).tree).toEqual([]);
    const v = verifyLog(log);
    expect(v, formatViolations(v)).toEqual([]);
  });
});

describe('a child takes only its own task', () => {
  it('a subagent_task under another ID than its request\'s, or for another child, is refused', async () => {
    const { sup, actor, log } = await runTree({
      main: [call('spawn_agent', { task: 'say hi', name: 'kid', mode: 'foreground' }), answer('done')],
      kid: [answer('hi')],
    });
    const childId = only(log, 'subagent/spawned').data.childId;
    const original = ofType(await readLog(sup, actor.rootId, childId), 'inbox/received')[0]!;
    const content = JSON.parse(original.data.content) as Record<string, unknown>;
    const other = spawnRequestId('call_SOMEOTHERCALL');
    const port = (sup as unknown as { opts: { ports: { inbox: { publish(m: unknown, c: string): Promise<unknown> } } } }).opts.ports.inbox;
    // a copy of its task under a new ID; another request's task sent to it
    await port.publish(message(childId, JSON.stringify(content), { kind: 'subagent_task', from: actor.actorId }), 'actor');
    await port.publish(message(childId, JSON.stringify({ ...content, requestId: other }), { id: other, kind: 'subagent_task', from: actor.actorId }), 'actor');
    const after = await waitForLog(sup, { rootId: actor.rootId, actorId: childId }, (l) => ofType(l, 'inbox/cancelled').length >= 2);
    const reasons = ofType(after, 'inbox/cancelled').map((e) => e.data.reason);
    expect(reasons[0]).toMatch(/travels under its spawn request's ID/);
    expect(reasons[1]).toMatch(/names another child/);
    expect(ofType(after, 'turn/start')).toHaveLength(1);
  });
});

describe('messages handed over in-process', () => {
  it('a copy of a message whose receipt is not committed yet resolves only once it is (its ack must not come first)', async () => {
    const rt = await world.rts.open({ modelFor: treeModels({ main: [answer('hi')] }) });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'say hi', turnRequest(world.ws));
    await ended;
    const m = message(actor.actorId, 'later', { kind: 'inject', target: 'next_step' });
    const first = actor.receive(m, 'person');
    const copy = actor.receive(m, 'person');
    await copy;
    // the copy resolved: the receipt is in the log, once
    const log = await readLog(sup, actor.rootId, actor.actorId);
    expect(ofType(log, 'inbox/received').filter((e) => e.data.messageId === m.id)).toHaveLength(1);
    await first;
  });
});

describe('context', () => {
  it('fork: the child reads the parent\'s closed steps as a transcript, then its task as a message of its own; blank: the task alone', async () => {
    const { log, logOf } = await runTree({
      main: [
        call('read_file', { path: 'src/a.txt' }),
        { tool_calls: [
          { name: 'spawn_agent', arguments: { task: 'go on from there', name: 'forked', context: 'fork', mode: 'background' } },
          { name: 'spawn_agent', arguments: { task: 'start afresh', name: 'blank', mode: 'background' } },
        ], usage: { input_tokens: 1, output_tokens: 1 } },
        call('wait_agents', {}), call('wait_agents', {}),
        answer('done'),
      ],
      forked: [answer('forked done')],
      blank: [answer('blank done')],
    });
    const [forked, blank] = ofType(log, 'subagent/spawned').map((e) => e.data.childId);
    const f = ofType(await logOf(forked!), 'user/message').map((e) => e.data.content);
    expect(f).toHaveLength(2);
    // the parent's read_file call and its result are in it; the step that spawned (still open) is not
    expect(f[0]).toMatch(/What your parent agent has seen and done so far/);
    expect(f[0]).toContain('alpha');
    expect(f[0]).not.toContain('go on from there');
    expect(f[1]).toBe('go on from there');
    expect(ofType(await logOf(blank!), 'user/message').map((e) => e.data.content)).toEqual(['start afresh']);
    const v = verifyLog(await logOf(forked!));
    expect(v, formatViolations(v)).toEqual([]);
  });
});
