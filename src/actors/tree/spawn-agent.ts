import { carveReservationId, childIdOf, spawnRequestId, stricterLimits, type ChildTask, type CarvedBudget, type ChildPermissions, type SubagentLimits } from '../../protocol/subagents.js';
import type { Projection } from '../../store/projection.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { TreeLimits } from '../../protocol/turn-settings.js';
import { childOfRequest, runningChildren, type SpawnRequestRecord } from '../../store/subagent-projection.js';
import { CHILD_TOOLS, PARENT_TOOLS, type SpawnAgentInput } from '../../tools/builtins/subagent-tools.js';
import { MEMORY } from '../../tools/builtins/knowledge-tools.js';
import { turnCountRoom, turnRoom, type Room } from '../goals/budget.js';
import { costOf } from '../../model/pricing.js';
import { forkTranscript } from './child-task.js';
import { settings, type EffectContext } from '../agent/effect-context.js';
import type { RuntimeTool, RuntimeToolRun } from '../agent/runtime-tool.js';
import { TURN_DEFAULTS } from '../agent/turn-settings.js';
import { modelName } from '../../model/model-spec.js';
import { armWait, callFailed, callSucceeded } from './child-waits.js';
import { ActorloopError } from '../../protocol/errors.js';

// `spawn_agent` (design §6b): two phases, each a commit before the next acts. First
// `subagent/spawn_requested` (with the carve of the parent's budget reserved in the same commit),
// before anything of the child exists; then the child — its directory entry, hosting, and its task
// in its inbox under the request's ID — and `subagent/spawned`. Every ID is derived from the call,
// so a kill anywhere in between finds the same child when the call runs again.

export { carveReservationId, childIdOf, spawnRequestId } from '../../protocol/subagents.js';


type Plan =
  | { error: string; code: string }
  | { permissions: ChildPermissions; budget: CarvedBudget; depth: number; name: string; clamped: string[]; reserve: CarveReserve | null };

/** The tree's limits this agent spawns under: the stricter of its host's and those its turn recorded (the run's, handed down the tree). */
export function limitsOf(a: EffectContext): SubagentLimits {
  return stricterLimits(a.ports.subagents!.limits, settings(a).treeLimits);
}

/**
 * Checks a spawn against the limits and the parent's permissions and budget; what the child gets,
 * or why not. Synchronous on purpose: the spawns of one step run at once, and each must see the
 * carves and children the ones before it staged (the tree's count, read before, is the only await).
 */
export function planSpawn(a: EffectContext, input: SpawnAgentInput): Plan {
  const port = a.ports.subagents!;
  const p = a.projection;
  const s = settings(a);
  const limits = limitsOf(a);
  const depth = (p.parentLink?.depth ?? 0) + 1;
  if (depth > limits.maxDepth) {
    return { code: 'subagent.depth', error: `you are at depth ${depth - 1} of your tree, and subagents go ${limits.maxDepth} deep at most (max_depth): do this part yourself` };
  }
  const running = runningChildren(p).length;
  if (running >= limits.maxChildrenPerParent) {
    return { code: 'subagent.width', error: `you have ${running} subagents running, the most one agent may have (max_children_per_parent = ${limits.maxChildrenPerParent}): wait for one with wait_agents first` };
  }
  // a child reads its parent's memory but changes it only when given `memory` by name
  const asked = input.tools ?? s.tools.filter((t) => !CHILD_TOOLS.has(t) && t !== MEMORY);
  const lacking = asked.filter((t) => !s.tools.includes(t) || CHILD_TOOLS.has(t));
  if (lacking.length > 0) {
    return { code: 'subagent.tools', error: `a subagent gets only tools you have, and you do not have ${lacking.join(', ')} (yours: ${s.tools.join(', ')})` };
  }
  // a child at the depth limit cannot spawn: it gets no parent tools; every child may report
  const tools = [...new Set([...asked.filter((t) => depth < limits.maxDepth || !PARENT_TOOLS.has(t)), 'report'])];
  if (input.workspace === 'worktree' && !port.worktree) {
    return { code: 'subagent.worktree', error: 'this runtime makes no git worktrees for subagents: use workspace "shared" or "readonly"' };
  }
  const carved = carve(a, input);
  if ('error' in carved) return carved;
  const n = Object.keys(p.children ?? {}).length + 1;
  return {
    permissions: {
      tools,
      approvalMode: s.approvalMode ?? 'ask',
      readOnly: input.workspace === 'readonly' || s.readOnly === true || s.planMode === true,
      workspace: s.workspace,
      workspaceMode: input.workspace,
    },
    budget: carved.budget,
    depth,
    name: input.name ?? `agent-${n}`,
    clamped: carved.clamped,
    reserve: carved.reserve,
  };
}

/** What a carve reserves in the parent's log: null where the parent has no limit of that key. */
export interface CarveReserve {
  tokens: number | null;
  costUsd: number | null;
  steps: number | null;
  calls: number | null;
}

/**
 * The child's budget, carved out of what the parent's turn has left (design §6b): tokens, cost,
 * steps and tool calls are reserved in the parent's log in the spawn's commit, so what running
 * children hold is no longer the parent's to give (a tree never spends past its root's budget);
 * the deadline is the parent's at the latest. A key asked for above what is left gets what is
 * left, and says so; a limited key with nothing left is refused. A step and a tool call are kept
 * for the parent's own next step (it reads what its children say), and a step or tool-call key
 * the child does not name gets a share of what is left: the parent's default steps would
 * otherwise all go to its first child.
 */
function carve(a: EffectContext, input: SpawnAgentInput): { error: string; code: string } | { budget: CarvedBudget; clamped: string[]; reserve: CarveReserve | null } {
  const p = a.projection;
  const turn = p.openTurn!;
  const b = turn.settings.budgets;
  const want = input.budget ?? {};
  const clamped: string[] = [];
  const room = keepForParent(a, turnRoom(p));
  const counts = turnCountRoom(p);
  const fit = (key: string, asked: number | undefined, left: number | null, share = false): number | null | { error: string; code: string } => {
    if (left === null) return asked ?? null;
    if (left <= 0) return { code: 'subagent.budget', error: `you have no ${key} left to give a subagent: your turn's budget is spent, given to running subagents, or kept for your own next step` };
    if (asked === undefined) return share ? Math.ceil(left / (spawnsToPlan(a) + 1)) : left;
    if (asked > left) {
      clamped.push(`${key}: asked ${asked}, got ${left} (what you had left)`);
      return left;
    }
    return asked;
  };
  const tokens = fit('tokens', want.tokens, room.tokens);
  if (typeof tokens === 'object' && tokens !== null) return tokens;
  const cost = fit('costUsd', want.costUsd, room.costUsd);
  if (typeof cost === 'object' && cost !== null) return cost;
  // the parent's own next step and a call of it (a wait) stay the parent's
  const steps = fit('steps', want.steps, counts.steps === null ? null : counts.steps - 1, true);
  if (typeof steps === 'object' && steps !== null) return steps;
  const toolCalls = fit('toolCalls', want.toolCalls, counts.calls === null ? null : counts.calls - 1, true);
  if (typeof toolCalls === 'object' && toolCalls !== null) return toolCalls;
  const nowMs = a.ports.clock.nowMs();
  const asked = want.seconds === undefined ? null : Math.round(nowMs + want.seconds * 1000);
  let deadlineAt = asked;
  if (b.deadlineAt !== null) {
    if (b.deadlineAt <= nowMs) return { code: 'subagent.budget', error: 'your turn is past its deadline: no time is left to give a subagent' };
    if (asked === null || asked > b.deadlineAt) {
      if (asked !== null) clamped.push(`seconds: asked ${want.seconds}, got ${Math.round((b.deadlineAt - nowMs) / 1000)} (your deadline)`);
      deadlineAt = b.deadlineAt;
    }
  }
  const reserve: CarveReserve = {
    tokens: room.tokens === null ? null : (tokens as number),
    costUsd: room.costUsd === null ? null : (cost as number),
    steps: counts.steps === null ? null : (steps as number),
    calls: counts.calls === null ? null : (toolCalls as number),
  };
  return {
    budget: {
      maxSteps: (steps as number | null) ?? want.steps ?? TURN_DEFAULTS.maxSteps,
      maxToolCalls: toolCalls as number | null,
      maxTokens: tokens as number | null,
      maxCostUsd: cost as number | null,
      deadlineAt,
    },
    clamped,
    // only a parent with a limit reserves: there is nothing to protect otherwise
    reserve: Object.values(reserve).some((v) => v !== null) ? reserve : null,
  };
}

/** Spawn calls of the open step whose request is not in the log yet, this one among them. */
function spawnsToPlan(a: EffectContext): number {
  const p = a.projection;
  return Math.max(1, p.pending.calls.filter((c) => c.name === 'spawn_agent' && c.status === 'valid' && !p.children?.[childIdOf(spawnRequestId(c.callId))]).length);
}

/**
 * What of the turn's room a child may be given: the room less what the parent keeps for its own
 * next step (its last request's tokens grown by a quarter, plus its output cap), so a fan-out
 * never spends the budget the parent needs to read what its children say.
 */
function keepForParent(a: EffectContext, room: Room): Room {
  if (room.tokens === null && room.costUsd === null) return room;
  const s = settings(a);
  const model = modelName(s.model);
  const cap = s.maxOutputTokens ?? a.turn.model?.capabilities(model).maxOutputTokens ?? DEFAULT_KEEP_OUTPUT;
  const keep = Math.ceil(((a.projection.lastPrepared?.bytes ?? 0) / 4) * 1.25) + cap;
  const price = a.ports.pricing?.(model) ?? null;
  const keepCost = costOf({ inputTokens: keep - cap, outputTokens: cap, estimated: true }, price) ?? 0;
  return {
    tokens: room.tokens === null ? null : room.tokens - keep,
    costUsd: room.costUsd === null ? null : Math.round((room.costUsd - keepCost) * 1_000_000) / 1_000_000,
  };
}

/** The output a parent keeps room for when its model names no cap. */
const DEFAULT_KEEP_OUTPUT = 4_096;

/** The child's task message: its ID is the request's, so a second publish is deduped. */
function taskMessage(a: EffectContext, requestId: string, childId: string, t: Omit<ChildTask, 'requestId' | 'parentId' | 'rootId'>): InboxMessage {
  const task: ChildTask = { requestId, parentId: a.actorId, rootId: a.rootId, ...t };
  return {
    id: requestId, from: a.actorId, to: childId, kind: 'subagent_task', target: 'next_turn', wakeup: true,
    content: JSON.stringify(task), request: null, sentAt: new Date(a.ports.clock.nowMs()).toISOString(),
  };
}

/**
 * `spawn_agent` as the runtime runs it. A rerun after a crash reads what the log holds: a request
 * already committed is not planned again (its child and carve are fixed), a child already spawned
 * is not created again, a foreground wait already armed keeps its deadline.
 */
export const spawnAgentRuntime: RuntimeTool = {
  name: 'spawn_agent',
  async run(a: EffectContext, r: RuntimeToolRun): Promise<void> {
    const input = r.input as SpawnAgentInput;
    const port = a.ports.subagents;
    if (!port) return callFailed(a, r, 'subagent.unavailable', 'this runtime hosts no subagents: do the work yourself');
    const requestId = spawnRequestId(r.ids.call);
    let childId = childOfRequest(a.projection, requestId);
    let clamped: string[] = [];
    const fresh = childId === undefined;
    if (childId === undefined) {
      if (input.workspace === 'worktree') {
        // refused before the request is committed: a workspace git cannot branch gets no child at all
        const problem = await port.worktreeProblem?.(settings(a).workspace);
        if (a.halted) return;
        if (problem) return callFailed(a, r, 'subagent.worktree', problem);
      }
      // the tree's place first, under the request's ID: a rerun after a crash takes the same one
      const max = limitsOf(a).maxChildrenPerTree;
      const slot = await port.takeSlot(a.rootId, childIdOf(requestId), requestId, max);
      if (a.halted) return;
      if (!slot.taken) {
        return callFailed(a, r, 'subagent.tree_width', `the tree already runs ${slot.running} of its ${max} subagents (max_children_per_tree): wait_agents first, or do this part yourself`);
      }
      // from here to the staging nothing awaits: a spawn beside this one plans after it
      const plan = planSpawn(a, input);
      if ('error' in plan) {
        await port.releaseSlot(a.rootId, childIdOf(requestId), [requestId]).catch((err: unknown) =>
          a.logger.warn({ err, requestId }, 'place in the tree of a refused spawn not given back; a full tree frees it later'));
        if (a.halted) return;
        return callFailed(a, r, plan.code, plan.error);
      }
      childId = childIdOf(requestId);
      clamped = plan.clamped;
      let last = a.stage({
        type: 'subagent/spawn_requested', ...r.ids,
        data: {
          requestId, childId, name: plan.name, task: input.task, mode: input.mode, context: input.context, depth: plan.depth,
          permissions: plan.permissions, budget: plan.budget, ...(plan.clamped.length > 0 ? { clamped: plan.clamped } : {}),
        },
      });
      if (plan.reserve) {
        last = a.stage({
          type: 'budget/reserved', ...r.ids,
          data: {
            reservationId: carveReservationId(requestId), scope: 'turn', kind: 'subagent', tokens: plan.reserve.tokens ?? 0, costUsd: plan.reserve.costUsd,
            ...(plan.reserve.calls !== null ? { calls: plan.reserve.calls } : {}), ...(plan.reserve.steps !== null ? { steps: plan.reserve.steps } : {}),
          },
        });
      }
      // committed before anything of the child exists: a kill after it finds the same child
      await commitWithSiblings(a, last.seq);
    }
    const child = a.projection.children![childId]!;
    if (child.state === 'requested') {
      const asked = requestOf(a, requestId);
      let workspace = asked.permissions.workspace;
      let worktree: string | null = null;
      if (asked.permissions.workspaceMode === 'worktree') {
        worktree = await port.worktree!(childId, asked.permissions.workspace);
        workspace = worktree;
      }
      const task = taskMessage(a, requestId, childId, {
        name: asked.name, depth: asked.depth, task: asked.task, mode: asked.mode, context: asked.context,
        forkTranscript: asked.context === 'fork' ? forkTranscript(a.projection.history, latestCheckpointAt(a.projection)) : null,
        permissions: { ...asked.permissions, workspace },
        budget: asked.budget,
        model: settings(a).model,
        baseUrl: settings(a).baseUrl,
        instructions: null,
        // the limits travel down the tree: a child's host applies them with its own
        treeLimits: treeLimitsOf(limitsOf(a)),
      });
      await port.spawn({
        actorId: childId, kind: 'subagent', parentId: a.actorId, rootId: a.rootId,
        title: `${asked.name}: ${a.ports.tooling.redactor.redact(asked.task.trim()).text.slice(0, 100)}`, workspace, labels: { name: asked.name },
      }, task, { fresh });
      if (a.halted) return;
      const spawned = a.stage({ type: 'subagent/spawned', ...r.ids, data: { requestId, childId, messageId: requestId, ...(worktree ? { worktree } : {}) } });
      await commitWithSiblings(a, spawned.seq);
    }
    const note = clamped.length > 0 ? `\nIts budget was cut to what you had left: ${clamped.join('; ')}.` : '';
    const name = child.name;
    switch (input.mode) {
      case 'background':
        return callSucceeded(a, r, `Spawned subagent ${name} (${childId}) in the background. Its final answer comes to you as a message when its turn ends; wait_agents waits for it.${note}`);
      case 'continuable':
        await port.firstTurn(a.rootId, childId, a.signal).catch(() => {});
        if (a.halted) return;
        if (a.signal.aborted) return void a.stage({ type: 'tool/cancelled', ...r.ids, data: { reason: 'the turn stopped waiting', started: true, confirmed: true } });
        return callSucceeded(a, r, `Subagent ${name} (${childId}) started its first turn. Give it more work with send_message (follow_up: true); its notices come to you as messages.${note}`);
      case 'foreground': {
        if (!a.projection.waits?.[r.ids.call]) {
          const seconds = input.timeout_seconds ?? null;
          const deadlineAt = seconds === null ? null : Math.round(a.ports.clock.nowMs() + seconds * 1000);
          a.stage({ type: 'subagent/waiting', ...r.ids, data: { childIds: [childId], deadlineAt, any: false } });
        }
        armWait(a, r.ids);
        return;
      }
    }
  },
};

/** The commit a spawn's events wait for, shared by every spawn of the agent staging in the same turn of the event loop. */
const sharedFlushes = new WeakMap<EffectContext, Promise<void>>();

/**
 * Resolves once the event at `seq` is committed. The commit is made a turn of the event loop
 * later, so the spawns of one step that reach the same phase together (their places taken, their
 * children created) share one commit of the parent's log instead of queueing one each behind it.
 * Waits for that seq, not for a flush: another flush may have taken the event and be in flight.
 */
async function commitWithSiblings(a: EffectContext, seq: number): Promise<void> {
  const committed = new Promise<void>((resolve, reject) => a.afterCommit(seq, {
    run: resolve,
    drop: () => reject(new ActorloopError('actor.stopped', `actor ${a.actorId} stopped before its spawn was committed`)),
  }));
  // a flush that fails says why; the drop that follows it is then nobody's to hear
  committed.catch(() => {});
  let flush = sharedFlushes.get(a);
  if (!flush) {
    flush = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      sharedFlushes.delete(a);
      return a.flush();
    });
    sharedFlushes.set(a, flush);
  }
  await flush;
  await committed;
}

/** The spawn request the log holds for a child. */
function requestOf(a: EffectContext, requestId: string): SpawnRequestRecord {
  const r = a.projection.spawnRequests?.[requestId];
  if (!r) throw new Error(`spawn request ${requestId} is not in the log`);
  return r;
}

function treeLimitsOf(l: SubagentLimits): TreeLimits {
  return { maxDepth: l.maxDepth, maxChildrenPerParent: l.maxChildrenPerParent, maxChildrenPerTree: l.maxChildrenPerTree };
}

/** The history index of the parent's latest checkpoint still in its history; null: none. */
function latestCheckpointAt(p: Projection): number | null {
  const ks = (p.compaction?.checkpoints ?? []).filter((k) => k.at !== null);
  return ks.length === 0 ? null : ks[ks.length - 1]!.at;
}
