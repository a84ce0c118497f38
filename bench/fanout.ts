import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createJetStreamPorts } from '../src/actors/hosting/supervisor-ports.js';
import { createFaultInjector } from '../src/actors/faults/faults.js';
import { reportTool, spawnAgentTool, waitAgentsTool } from '../src/tools/builtins/subagent-tools.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { echoTool } from './echo-tool.js';
import { fmtMs, nowMs, percentile, settleGc, table } from './stats.js';

/** What one fan-out run measured. */
export interface FanoutResult {
  children: number;
  hosts: number;
  /** The parent's first spawn call started (its tool/start committed) until every child's notice was included in it. */
  allMs: number;
  /** Per child: its `subagent/spawn_requested` commit (the spawn begins) until the child's first request/prepared commit. */
  firstRequestMs: number[];
  /** Per notice: the child's `subagent/notified` commit (right after the notice's PubAck) until the parent's commit that included it. */
  noticeMs: number[];
  /** Heap growth per child once the tree is idle, bytes (after a GC). */
  heapPerChild: number;
  /** Commits of the parent's log over the whole run (its spawns' phases among them). */
  parentCommits: number;
  completed: number;
  failed: number;
}

/** A child's script: three echo steps and an answer. */
const CHILD: ScriptResponse[] = [
  ...[1, 2, 3].map((i): ScriptResponse => ({ tool_calls: [{ name: 'echo', arguments: { text: `child echo ${i}` } }], usage: { input_tokens: 100, output_tokens: 10 } })),
  { content: 'child done', usage: { input_tokens: 100, output_tokens: 10 } },
];

/** The parent's script: one step spawning every child in the background, then waits until all their notices are in. */
function parentScript(children: number): ScriptResponse[] {
  const spawns = Array.from({ length: children }, (_, i) => ({ name: 'spawn_agent', arguments: { task: `child ${i}: call echo three times`, name: 'w' } }));
  // each wait takes every notice waiting (often many), so fewer are used; the rest fail fast ("nothing to wait for")
  const waits = Array.from({ length: children + 2 }, (): ScriptResponse => ({ tool_calls: [{ name: 'wait_agents', arguments: { timeout_seconds: 600 } }], usage: { input_tokens: 100, output_tokens: 10 } }));
  return [{ tool_calls: spawns, usage: { input_tokens: 100, output_tokens: 10 } }, ...waits, { content: 'all children done', usage: { input_tokens: 100, output_tokens: 10 } }];
}

/**
 * One parent spawns `children` background children on the bench's runtime, each three echo steps
 * and an answer; with `hosts = 2` a second supervisor on the same server hosts every other child
 * (the first one's adopter declines it, and the second takes it on its mail, as a second host
 * process would). Timestamps are taken in `onCommit` (the commit acked), one clock for all.
 */
export async function runFanout(rt: BenchRuntime, children: number, hosts: 1 | 2): Promise<FanoutResult> {
  const tools = createToolRegistry([echoTool, spawnAgentTool, waitAgentsTool, reportTool]);
  const parentSteps = parentScript(children);
  const committedAt = new Map<string, number>();
  const spawnStartAt = new Map<string, number>();
  const firstRequest = new Map<string, number>();
  const notifiedAt = new Map<string, number>();
  const includedAt = new Map<string, number>();
  let parentId = '';
  let lastInclusion = 0;
  let firstCallAt: number | undefined;
  let parentCommits = 0;
  const onCommit = (actorId: string, events: ActorEvent[]): void => {
    const t = nowMs();
    if (actorId === parentId) parentCommits += 1;
    for (const e of events) {
      if (actorId === parentId) {
        if (e.type === 'tool/start' && e.data.name === 'spawn_agent') committedAt.set(e.call!, t);
        if (e.type === 'subagent/spawn_requested') {
          spawnStartAt.set(e.data.childId, t);
          firstCallAt ??= committedAt.get(e.call!) ?? t;
        }
        if (e.type === 'subagent/completed') {
          includedAt.set(e.data.messageId, t);
          lastInclusion = t;
        }
        if (e.type === 'request/prepared') for (const id of e.data.messageIds ?? []) includedAt.set(id, t);
      } else {
        if (e.type === 'request/prepared' && !firstRequest.has(actorId)) firstRequest.set(actorId, t);
        if (e.type === 'subagent/notified') notifiedAt.set(e.data.messageId, t);
      }
    }
  };
  const limits = { maxDepth: 3, maxChildrenPerParent: children, maxChildrenPerTree: children, onParentEnd: 'cancel' as const };
  const modelFor = async (s: { agentName?: string }, cursor: number) =>
    createScriptedModel({ responses: s.agentName === 'w' ? CHILD : parentSteps, cursor, record: false });
  const make = (): Supervisor => new Supervisor({
    ports: createJetStreamPorts(rt.bus), blobs: rt.blobs, snapshots: rt.snapshots, tools, logger: rt.logger,
    faults: createFaultInjector([]), snapshotEvery: 64, modelFor, onCommit, subagentLimits: limits,
    tooling: undefined,
  });
  const sup = make();
  let other: Supervisor | null = null;
  if (hosts === 2) {
    other = make();
    let n = 0;
    // every other child is declined here; the second supervisor hosts it when its task arrives
    sup.setAdopter(async () => (n++ % 2 === 0 ? 1 : null));
    await other.listenForMail((actorId) => void other!.hydrate(actorId).catch(() => {}));
  }
  settleGc();
  const heapBefore = process.memoryUsage().heapUsed;
  parentId = newId('agent');
  const parent = await sup.create({ actorId: parentId, kind: 'agent', parentId: null, rootId: parentId, title: 'fan-out bench', workspace: rt.workspace, labels: {} });
  const ended = parent.whenTurnEnds();
  // each child's steps are carved out of the parent's (its share of what is left), so the parent
  // has room for its own steps and every child's, twice over
  const maxSteps = parentSteps.length + 2 + 2 * children * (CHILD.length + 1);
  const request = { ...benchTurnRequest(rt.workspace, maxSteps), tools: ['echo', 'spawn_agent', 'wait_agents'] };
  await sup.send({
    id: newId('message'), from: 'client:bench', to: parentId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: `Spawn ${children} children and wait for them.`, request, sentAt: new Date().toISOString(),
  });
  const out = await ended;
  if (out.outcome !== 'completed') process.stderr.write(`fan-out parent did not complete: ${out.outcome} (${out.reason})\n`);
  const firstSpawn = firstCallAt ?? Math.min(...spawnStartAt.values());
  // idle: every child has ended and said so
  for (let i = 0; i < 2_000 && notifiedAt.size < children; i++) await new Promise((r) => setTimeout(r, 10));
  settleGc();
  const heapPerChild = Math.max(0, process.memoryUsage().heapUsed - heapBefore) / children;
  const firstRequestMs = [...spawnStartAt].map(([child, at]) => (firstRequest.get(child) ?? NaN) - at).filter(Number.isFinite);
  const noticeMs = [...notifiedAt].map(([id, at]) => Math.max(0, (includedAt.get(id) ?? NaN) - at)).filter(Number.isFinite);
  await sup.stop();
  await other?.stop();
  return {
    children, hosts, allMs: lastInclusion - firstSpawn, firstRequestMs, noticeMs, heapPerChild, parentCommits,
    completed: notifiedAt.size, failed: out.outcome === 'completed' ? 0 : 1,
  };
}

/** Prints the fan-out table. */
export function printFanout(results: FanoutResult[]): void {
  console.log('');
  console.log('== fan-out: one parent spawns N background children (each 3 echo steps and an answer) ==');
  console.log(table(
    ['N', 'hosts', 'spawn → all notices in ms', 'spawn → 1st request p50 / p99 ms', 'notice → included p50 / p99 ms', 'heap per child KB', 'parent commits', 'children done', 'parent failed'],
    results.map((r) => [
      String(r.children), String(r.hosts), fmtMs(r.allMs),
      `${fmtMs(percentile(r.firstRequestMs, 50))} / ${fmtMs(percentile(r.firstRequestMs, 99))}`,
      `${fmtMs(percentile(r.noticeMs, 50))} / ${fmtMs(percentile(r.noticeMs, 99))}`,
      (r.heapPerChild / 1024).toFixed(1), String(r.parentCommits), `${r.completed}/${r.children}`, String(r.failed),
    ]),
  ));
  console.log('notes: times from onCommit (each commit acked); all notices from the spawn calls\' tool/start commit; 1st request from the child\'s subagent/spawn_requested commit; notice = the child\'s subagent/notified commit, right after the notice\'s PubAck; included = the parent\'s commit taking it (wait_agents) or a request including it. Heap: growth after a GC with the tree idle, divided by N.');
}
