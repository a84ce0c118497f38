import { describe, expect, it } from 'vitest';
import { answer, call, treeModels } from '../helpers/scripted-tree.js';
import type { ScriptResponse } from '../../src/model/script.js';
import { parseEvent, type ActorEvent, type EventData, type EventType, type TurnSettings } from '../../src/protocol/events.js';
import type { ChildTask } from '../../src/protocol/subagents.js';
import { readTreeView, TreeFold, type TreeAgent } from '../../src/client/tree.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { turnRequest } from '../helpers/runtime.js';
import { actorTestWorld, startTurn, waitForLog } from '../actors/harness.js';

const ROOT = 'agt_01TREEROOT000000000000000A';
const CHILD = 'agt_01TREECHILD00000000000000B';
const GRANDCHILD = 'agt_01TREEGRAND00000000000000C';

const SETTINGS: TurnSettings = {
  model: 'scripted', baseUrl: null, workspace: '/tmp/ws', tools: ['read_file', 'write_file', 'spawn_agent'], instructions: 'Be brief.',
  budgets: { maxSteps: 10, maxToolCalls: null, deadlineAt: null }, maxAttempts: 3,
};

/** One actor's log, each event parsed by the real schema, folded as it is written. */
class ActorLog {
  readonly projection: Projection;
  private seq = 0;
  constructor(readonly actorId: string, private readonly fold: TreeFold, private epoch = 1) {
    this.projection = emptyProjection(actorId);
  }

  push<T extends EventType>(type: T, data: EventData<T>, scope: { turn?: string; step?: string; attempt?: string; call?: string } = {}): ActorEvent {
    this.seq += 1;
    const event = parseEvent({ v: 1, seq: this.seq, id: `evt_${this.actorId}_${this.seq}`, at: '2026-01-01T00:00:00.000Z', epoch: this.epoch, actor: this.actorId, ...scope, type, data });
    foldEvent(this.projection, event);
    this.fold.apply({ actorId: this.actorId, event, projection: this.projection });
    return event;
  }

  crash(): void {
    this.epoch += 1;
    this.push('actor/killed', { point: null, detectedBy: 'recovery found open work and no actor/released', epoch: this.epoch - 1, lastSeq: this.seq });
  }
}

const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens, estimated: false });

function startTurn1(log: ActorLog, settings: TurnSettings = SETTINGS): void {
  log.push('inbox/received', { messageId: `msg_${log.actorId}`, kind: 'user_message', from: 'cli', content: 'go', request: null });
  log.push('turn/start', { source: 'user_message', messageIds: [`msg_${log.actorId}`], settings }, { turn: 't1' });
  log.push('user/message', { messageId: `msg_${log.actorId}`, content: 'go' }, { turn: 't1' });
}

function step(log: ActorLog, index: number, tokens: [number, number], costUsd: number | null): void {
  const scope = { turn: 't1', step: `s${index}` };
  log.push('step/start', { index, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, scope);
  log.push('attempt/start', { index: 1, requestDigest: 'sha256:x' }, { ...scope, attempt: `a${index}` });
  log.push('attempt/end', { outcome: 'succeeded', error: null, usage: usage(...tokens), backoffMs: null, latencyMs: 1, costUsd }, { ...scope, attempt: `a${index}` });
}

function callTool(log: ActorLog, index: number, name: string, call: string): void {
  const scope = { turn: 't1', step: `s${index}`, call };
  log.push('tool/call', {
    index: 0, providerId: `p_${call}`, name, arguments: '{}', status: 'valid', error: null, effects: 'possible', recovery: 'rerun', withinBudget: true,
  }, scope);
  log.push('tool/start', { name, input: {}, effects: 'possible', idempotencyKey: `idem_${call}`, rerun: false }, scope);
}

function spawnRequested(parent: ActorLog, childId: string, name: string, depth: number): void {
  parent.push('subagent/spawn_requested', {
    requestId: `req_${childId}`, childId, name, task: 'do it', mode: 'foreground', context: 'blank', depth,
    permissions: { tools: ['write_file'], approvalMode: 'ask', readOnly: false, workspace: '/tmp/ws', workspaceMode: 'shared' },
    budget: { maxSteps: 5, maxToolCalls: null, maxTokens: null, maxCostUsd: null, deadlineAt: null },
  }, { turn: 't1', step: 's1', call: `spawn_${childId}` });
}

function childTask(child: ActorLog, parentId: string, name: string, depth: number): void {
  const task: ChildTask = {
    requestId: `req_${child.actorId}`, parentId, rootId: ROOT, name, depth, task: 'do it', mode: 'foreground', context: 'blank', forkTranscript: null,
    permissions: { tools: ['write_file'], approvalMode: 'ask', readOnly: false, workspace: '/tmp/ws', workspaceMode: 'shared' },
    budget: { maxSteps: 5, maxToolCalls: null, maxTokens: null, maxCostUsd: null, deadlineAt: null },
    model: 'scripted', baseUrl: null, instructions: null,
  };
  child.push('inbox/received', { messageId: `task_${child.actorId}`, kind: 'subagent_task', from: parentId, content: JSON.stringify(task), request: null });
}

const byName = (agents: TreeAgent[]): Record<string, TreeAgent> => Object.fromEntries(agents.map((a) => [a.name, a]));

describe('the tree fold', () => {
  it('names, parents and depths from the spawn records; statuses, steps, running tools and sums from each log', () => {
    const fold = new TreeFold(ROOT);
    const root = new ActorLog(ROOT, fold);
    startTurn1(root);
    step(root, 1, [100, 10], 0.01);
    callTool(root, 1, 'spawn_agent', 'c1');
    spawnRequested(root, CHILD, 'reader', 1);

    // spawned, its log not started: it is there, starting
    let view = fold.view();
    expect(view.agents.map((a) => [a.name, a.actorId, a.parentId, a.depth, a.status])).toEqual([
      ['main', ROOT, null, 0, 'running'],
      ['reader', CHILD, ROOT, 1, 'starting'],
    ]);
    expect(byName(view.agents).main).toMatchObject({ step: 1, tool: 'spawn_agent', tokens: 110, costUsd: 0.01, children: [CHILD] });
    expect(view.settled).toBe(false);

    const child = new ActorLog(CHILD, fold);
    childTask(child, ROOT, 'reader', 1);
    expect(byName(fold.view().agents).reader!.status).toBe('starting');
    child.push('turn/start', { source: 'subagent_task', messageIds: [`task_${CHILD}`], settings: { ...SETTINGS, agentName: 'reader' } }, { turn: 't1' });
    step(child, 1, [40, 4], 0.002);
    callTool(child, 1, 'write_file', 'w1');
    child.push('policy/decided', { decision: 'ask', rule: 'default:write', reason: 'writes need approval' }, { turn: 't1', step: 's1', call: 'w1' });
    child.push('approval/requested', {
      approvalId: 'apr_1', tool: 'write_file', toolVersion: '1', planDigest: 'sha256:p', expiresAt: Date.parse('2026-01-02T00:00:00.000Z'), plan: {},
    }, { turn: 't1', step: 's1', call: 'w1' });
    child.push('actor/parked', { waitingFor: 'approval', ids: ['apr_1'], commands: [] });

    view = fold.view();
    const reader = byName(view.agents).reader!;
    expect(reader).toMatchObject({ status: 'waiting', waitingFor: { kind: 'approval', ids: ['apr_1'] }, step: 1, tokens: 44, costUsd: 0.002 });
    expect(view.total).toEqual({ agents: 2, tokens: 154, estimated: false, costUsd: 0.012 });

    // a grandchild sits under its parent, after it in the listing, whatever the order of logs
    spawnRequested(child, GRANDCHILD, 'helper', 2);
    const grand = new ActorLog(GRANDCHILD, fold);
    childTask(grand, CHILD, 'helper', 2);
    grand.push('turn/start', { source: 'subagent_task', messageIds: [`task_${GRANDCHILD}`], settings: { ...SETTINGS, agentName: 'helper' } }, { turn: 't1' });
    step(grand, 1, [10, 1], null);
    grand.crash();
    view = fold.view();
    expect(view.agents.map((a) => `${'  '.repeat(a.depth)}${a.name}`)).toEqual(['main', '  reader', '    helper']);
    // the death first (the page and the gateway read the same), then the new incarnation taking over
    expect(byName(view.agents).helper).toMatchObject({ parentId: CHILD, depth: 2, status: 'killed' });
    expect(view.settled).toBe(false);
    grand.push('actor/rehydrated', { snapshotSeq: 0, tailEvents: 1 });
    view = fold.view();
    expect(byName(view.agents).helper).toMatchObject({ parentId: CHILD, depth: 2, status: 'recovering' });
    // a price not known anywhere in the tree makes the tree's cost unknown, never a smaller sum
    expect(view.total.costUsd).toBeNull();
    expect(view.total.tokens).toBe(165);
  });

  it('is settled once no agent runs or waits, and not while a child owes its parent the notice', () => {
    const fold = new TreeFold(ROOT);
    const root = new ActorLog(ROOT, fold);
    startTurn1(root);
    step(root, 1, [1, 1], 0);
    root.push('turn/end', { outcome: 'completed', reason: null, answer: 'ok', steps: 1, toolCalls: 0, usage: usage(1, 1) }, { turn: 't1' });
    expect(fold.view()).toMatchObject({ settled: true, agents: [{ name: 'main', status: 'completed', step: null, tool: null }] });

    // a background child that ended its turn and has not sent its notice yet
    spawnRequested(root, CHILD, 'bg', 1);
    const child = new ActorLog(CHILD, fold);
    childTask(child, ROOT, 'bg', 1);
    child.push('turn/start', { source: 'subagent_task', messageIds: [`task_${CHILD}`], settings: { ...SETTINGS, agentName: 'bg' } }, { turn: 't1' });
    step(child, 1, [1, 1], 0);
    child.push('turn/end', { outcome: 'completed', reason: null, answer: 'ok', steps: 1, toolCalls: 0, usage: usage(1, 1), noticeOwed: true }, { turn: 't1' });
    expect(fold.view()).toMatchObject({ settled: false, agents: [{ status: 'completed' }, { name: 'bg', status: 'completed' }] });
    child.push('subagent/notified', { parentId: ROOT, messageId: 'msg_notice', turn: 't1', outcome: 'completed' });
    expect(fold.view().settled).toBe(true);
  });
});

describe('the tree of a real run', () => {
  const world = actorTestWorld();

  it('folds the logs a parent and its two children wrote, read over the whole tree', async () => {
    const scripts: Record<string, ScriptResponse[]> = {
      main: [
        { tool_calls: [
          { name: 'spawn_agent', arguments: { task: 'read src/a.txt', name: 'reader' } },
          { name: 'spawn_agent', arguments: { task: 'count its lines', name: 'counter' } },
        ], usage: { input_tokens: 60, output_tokens: 6 } },
        call('wait_agents', {}),
        call('wait_agents', {}),
        answer('alpha, 2 lines'),
      ],
      reader: [call('read_file', { path: 'src/a.txt' }), answer('alpha')],
      counter: [answer('2 lines')],
    };
    const rt = await world.rts.open({
      modelFor: treeModels(scripts),
    });
    const sup = rt.supervisor();
    const { actor, ended } = await startTurn(sup, 'investigate', turnRequest(world.ws));
    expect((await ended).outcome).toBe('completed');
    const view0 = await readTreeView({ reader: sup.reader, rootId: actor.rootId });
    for (const a of view0.agents.slice(1)) {
      await waitForLog(sup, { rootId: actor.rootId, actorId: a.actorId }, (l) => l.some((e) => e.type === 'subagent/notified'));
    }
    const view = await readTreeView({ reader: sup.reader, rootId: actor.rootId });
    expect(view.agents.map((a) => [a.name, a.depth, a.parentId, a.status])).toEqual([
      ['main', 0, null, 'completed'],
      ['reader', 1, actor.actorId, 'completed'],
      ['counter', 1, actor.actorId, 'completed'],
    ]);
    expect(view.agents.map((a) => a.tokens)).toEqual([66 * 3 + 55, 66 + 55, 55]);
    expect(view.total.tokens).toBe(66 * 4 + 55 * 3);
    expect(view.settled).toBe(true);
  });
});
