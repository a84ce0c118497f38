/**
 * A tree of N actors for the page bench, written straight to the real stores: directory entries
 * and log commits through the real JetStream writer (each event parsed by its schema on commit),
 * the commits a running tree makes — a root whose first step spawned N-1 children in the
 * background (as `spawn_agent` logs it) and whose second waits for them all, each child's task
 * received and its turn started — and then a pump that commits the events of tool-loop
 * steps (step, request, attempt with usage and cost, the accepted call, policy, tool start and
 * result, step end) round-robin across the children at a given rate. No model, host or
 * supervisor: the page sees what a busy tree's logs hold, at the rate asked for.
 */
import type { Bus } from '../src/bus/connection.js';
import type { DirectoryEntry } from '../src/bus/directory.js';
import type { EventDraft, TurnSettings } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import type { ChildTask } from '../src/protocol/subagents.js';
import { createJetStreamLogs } from '../src/store/jetstream-log.js';
import type { ActorLogWriter } from '../src/store/log-port.js';
import { pool } from './harness.js';
import { nowMs } from './stats.js';

const SETTINGS: TurnSettings = {
  model: 'scripted', baseUrl: null, workspace: '/tmp/ws', tools: ['echo', 'spawn_agent'], instructions: 'Be brief.',
  budgets: { maxSteps: 100_000, maxToolCalls: null, deadlineAt: null }, maxAttempts: 3,
};
const PERMISSIONS: ChildTask['permissions'] = { tools: ['echo'], approvalMode: 'full-auto', readOnly: false, workspace: '/tmp/ws', workspaceMode: 'shared' };
const BUDGET = { maxSteps: 100_000, maxToolCalls: null, maxTokens: null, maxCostUsd: null, deadlineAt: null };
const USAGE = { inputTokens: 400, outputTokens: 40, estimated: false };

type Scope = Pick<EventDraft, 'turn' | 'step' | 'attempt' | 'call'>;
const draft = (type: EventDraft['type'], data: unknown, scope: Scope = {}): EventDraft => ({ type, data, ...scope }) as EventDraft;

/** One child as the pump drives it: its writer and how far into its current step it is. */
interface PumpedChild {
  id: string;
  writer: ActorLogWriter;
  step: number;
  /** Index into the step's events of the next one to commit. */
  at: number;
}

/** The events of step `n` of a child's tool loop, in log order: ten, one a commit. */
function stepEvents(n: number): EventDraft[] {
  const turn = 't1';
  const step = `s${n}`;
  const attempt = `a${n}`;
  const call = `c${n}`;
  const s = { turn, step };
  return [
    draft('step/start', { index: n, maxAttempts: 3, toolBudgetLeft: null, model: 'scripted', maxOutputTokens: null }, s),
    draft('request/prepared', { digest: `sha256-${n}`, bytes: 1200, messages: 2 * n }, s),
    draft('attempt/start', { index: 1, requestDigest: `sha256-${n}` }, { ...s, attempt }),
    draft('attempt/end', { outcome: 'succeeded', error: null, usage: USAGE, backoffMs: null, latencyMs: 300, costUsd: 0.0004 }, { ...s, attempt }),
    draft('assistant/accepted', { content: null, toolCalls: [{ id: `p${n}`, name: 'echo', arguments: `{"text":"step ${n}"}` }], finishReason: 'tool_calls' }, { ...s, attempt }),
    draft('tool/call', { index: 0, providerId: `p${n}`, name: 'echo', arguments: `{"text":"step ${n}"}`, status: 'valid', error: null, effects: 'none', recovery: 'rerun', withinBudget: true }, { ...s, call }),
    draft('policy/decided', { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null }, { ...s, call }),
    draft('tool/start', { name: 'echo', input: { text: `step ${n}` }, effects: 'none', idempotencyKey: `idem_${call}`, rerun: false }, { ...s, call }),
    draft('tool/result', { ok: true, output: `step ${n}`, error: null, durationMs: 1 }, { ...s, call }),
    draft('step/end', { outcome: 'tool_calls', reason: null, toolCalls: 1 }, s),
  ];
}

/** A tree written to the bus, and its pump. */
export interface PageTree {
  rootId: string;
  actors: number;
  /** Events its logs held once written (what the page replays first). */
  initialEvents: number;
  /**
   * Commits `rate` events a second, one a commit, round-robin across the children, until `stop`
   * resolves; gives the events committed and the seconds it ran.
   */
  pump(rate: number, stop: Promise<unknown>): Promise<{ events: number; seconds: number }>;
}

function entry(actorId: string, rootId: string, parentId: string | null, title: string): DirectoryEntry {
  const at = new Date().toISOString();
  return { actorId, kind: parentId === null ? 'agent' : 'subagent', parentId, rootId, status: 'running', title, workspace: '/tmp/ws', createdAt: at, updatedAt: at, labels: {} };
}

/** Writes a tree of `actors` (a root and actors-1 children) to `bus`: directory entries and logs. */
export async function writePageTree(bus: Bus, actors: number): Promise<PageTree> {
  const logs = createJetStreamLogs({ publisher: bus.logJs, js: bus.js, jsm: bus.jsm });
  const rootId = newId('agent');
  const childIds = Array.from({ length: actors - 1 }, () => newId('agent'));
  const writer = (actorId: string): ActorLogWriter => logs.writer({ rootId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  await bus.directory.put(entry(rootId, rootId, null, 'page bench'));
  await pool(childIds, 16, (id, i) => bus.directory.put(entry(id, rootId, rootId, `worker-${i + 1}`)));

  // the root: a task, a turn, one step whose answer spawns every child
  const root = writer(rootId);
  const t = { turn: 't1' };
  const s1 = { turn: 't1', step: 's1' };
  const request = { model: 'scripted', baseUrl: null, workspace: '/tmp/ws', tools: null, instructions: null, maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null };
  const rootHead: EventDraft[] = [
    draft('inbox/received', { messageId: 'msg_root', kind: 'user_message', from: 'cli', content: `split the work over ${actors - 1} workers`, request }),
    draft('turn/start', { source: 'user_message', messageIds: ['msg_root'], settings: SETTINGS }, t),
    draft('user/message', { messageId: 'msg_root', content: `split the work over ${actors - 1} workers` }, t),
    ...stepEvents(1).slice(0, 4),
  ];
  let initialEvents = rootHead.length;
  await root.commit(rootHead);
  // each spawn as the runtime logs a background one: the call, its policy, its start, the request,
  // the spawn, its result; then the step ends and the next one waits for every child
  const spawns: EventDraft[] = [];
  childIds.forEach((childId, i) => {
    const call = { ...s1, call: `spawn_${i + 1}` };
    const args = `{"task":"part ${i + 1}","name":"worker-${i + 1}","mode":"background"}`;
    spawns.push(
      draft('tool/call', { index: i, providerId: `p_${call.call}`, name: 'spawn_agent', arguments: args, status: 'valid', error: null, effects: 'possible', recovery: 'rerun', withinBudget: true }, call),
      draft('policy/decided', { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null }, call),
      draft('tool/start', { name: 'spawn_agent', input: JSON.parse(args), effects: 'possible', idempotencyKey: `idem_${call.call}`, rerun: false }, call),
      draft('subagent/spawn_requested', {
        requestId: `req_${childId}`, childId, name: `worker-${i + 1}`, task: `part ${i + 1}`, mode: 'background', context: 'blank', depth: 1, permissions: PERMISSIONS, budget: BUDGET,
      }, call),
      draft('subagent/spawned', { requestId: `req_${childId}`, childId, messageId: `req_${childId}` }, call),
      draft('tool/result', { ok: true, output: `Spawned subagent worker-${i + 1} (${childId}) in the background.`, error: null, durationMs: 3 }, call),
    );
  });
  const s2 = { turn: 't1', step: 's2' };
  const wait = { ...s2, call: 'wait_1' };
  spawns.push(
    draft('step/end', { outcome: 'tool_calls', reason: null, toolCalls: childIds.length }, s1),
    ...stepEvents(2).slice(0, 4),
    draft('tool/call', { index: 0, providerId: 'p_wait_1', name: 'wait_agents', arguments: '{}', status: 'valid', error: null, effects: 'none', recovery: 'rerun', withinBudget: true }, wait),
    draft('policy/decided', { decision: 'allow', rule: 'builtin:allow-visible-tools', reason: null }, wait),
    draft('tool/start', { name: 'wait_agents', input: {}, effects: 'none', idempotencyKey: 'idem_wait_1', rerun: false }, wait),
    draft('subagent/waiting', { childIds, deadlineAt: null, any: false }, wait),
  );
  // commits of a few hundred events: one message each, well under the server's payload limit
  for (let i = 0; i < spawns.length; i += 300) await root.commit(spawns.slice(i, i + 300));
  initialEvents += spawns.length;

  // each child: its task received, its turn started
  const children: PumpedChild[] = await pool(childIds, 16, async (id, i) => {
    const name = `worker-${i + 1}`;
    const task: ChildTask = {
      requestId: `req_${id}`, parentId: rootId, rootId, name, depth: 1, task: `part ${i + 1}`, mode: 'background', context: 'blank', forkTranscript: null,
      permissions: PERMISSIONS, budget: BUDGET, model: 'scripted', baseUrl: null, instructions: null,
    };
    const w = writer(id);
    await w.commit([
      draft('inbox/received', { messageId: `task_${id}`, kind: 'subagent_task', from: rootId, content: JSON.stringify(task), request: null }),
      draft('turn/start', { source: 'subagent_task', messageIds: [`task_${id}`], settings: { ...SETTINGS, agentName: name } }, t),
      draft('user/message', { messageId: `task_${id}`, content: `part ${i + 1}` }, t),
    ]);
    return { id, writer: w, step: 1, at: 0 };
  });
  initialEvents += children.length * 3;

  return {
    rootId,
    actors,
    initialEvents,
    async pump(rate, stop) {
      let stopped = false;
      void stop.then(() => (stopped = true));
      let sent = 0;
      let next = 0;
      const t0 = nowMs();
      while (!stopped) {
        const due = Math.floor((rate * (nowMs() - t0)) / 1000) - sent;
        const batch: Promise<unknown>[] = [];
        // one event per child per tick at most: a child's commits are in order by its writer anyway
        for (let k = 0; k < Math.min(due, children.length); k++) {
          const c = children[next]!;
          next = (next + 1) % children.length;
          const events = stepEvents(c.step);
          batch.push(c.writer.commit([events[c.at]!]));
          c.at += 1;
          if (c.at === events.length) {
            c.at = 0;
            c.step += 1;
          }
        }
        sent += batch.length;
        await Promise.all(batch);
        await new Promise((r) => setTimeout(r, 10));
      }
      return { events: sent, seconds: (nowMs() - t0) / 1000 };
    },
  };
}
