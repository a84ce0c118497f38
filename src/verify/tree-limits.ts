import type { ApprovalMode, EventOf, TurnSettings } from '../protocol/events.js';
import { carveReservationId } from '../protocol/subagents.js';
import { stricterMode } from '../protocol/turn-settings.js';
import type { ActorFacts } from './tree-facts.js';
import type { TreeReport } from './violations.js';

// The tree's limits (design §6b): no child is given more than its parent had, and the whole
// tree spends within what its root's turn allowed.

// Costs are whole micro-dollars; a sum compared with a limit allows for float rounding alone.
const EPSILON_USD = 1e-9;

const modeOf = (s: TurnSettings): ApprovalMode => s.approvalMode ?? 'ask';
const readOnlyOf = (s: TurnSettings): boolean => s.readOnly === true || s.planMode === true;

/**
 * Permissions only narrow down the tree: every turn of a child runs with at most the tools, the
 * run mode and the read-only flag its spawn request recorded, and the request gives at most what
 * the parent's turn that made it had (its tools plus `report`, which every child may use).
 */
export function checkPermissions(facts: Map<string, ActorFacts>, report: TreeReport): void {
  for (const parent of facts.values()) {
    for (const r of parent.requests) {
      const p = r.data.permissions;
      const open = r.turn ? parent.turns.get(r.turn) : undefined;
      if (!open) {
        report('tree.spawn_outside_turn', parent.actorId, r.seq, `spawn of ${r.data.childId} is in no turn of ${parent.actorId}: its permissions have nothing to be checked against`);
      } else {
        const s = open.start.data.settings;
        const extra = p.tools.filter((t) => t !== 'report' && !s.tools.includes(t));
        if (extra.length > 0) {
          report('tree.tools_wider', parent.actorId, r.seq, `${r.data.childId} is given ${extra.join(', ')}, which turn ${r.turn} of its parent does not have`);
        }
        if (stricterMode(p.approvalMode, modeOf(s)) !== p.approvalMode) {
          report('tree.mode_looser', parent.actorId, r.seq, `${r.data.childId} is given run mode ${p.approvalMode}, looser than its parent's ${modeOf(s)}`);
        }
        if (readOnlyOf(s) && !p.readOnly) {
          report('tree.readonly_dropped', parent.actorId, r.seq, `${r.data.childId} may change things, but turn ${r.turn} of its parent is read-only`);
        }
      }
      const child = facts.get(r.data.childId);
      if (!child) continue;
      for (const id of child.turnOrder) {
        const start = child.turns.get(id)!.start;
        const s = start.data.settings;
        const extra = s.tools.filter((t) => !p.tools.includes(t));
        if (extra.length > 0) {
          report('tree.tools_wider', child.actorId, start.seq, `turn ${id} runs with ${extra.join(', ')}, which its spawn request (seq ${r.seq} of ${parent.actorId}) did not give it`);
        }
        if (stricterMode(modeOf(s), p.approvalMode) !== modeOf(s)) {
          report('tree.mode_looser', child.actorId, start.seq, `turn ${id} runs in mode ${modeOf(s)}, looser than the ${p.approvalMode} its spawn request gave it`);
        }
        if (p.readOnly && !readOnlyOf(s)) {
          report('tree.readonly_dropped', child.actorId, start.seq, `turn ${id} may change things, but its spawn request made it read-only`);
        }
      }
    }
  }
}

/**
 * The tree's spend (every attempt of every actor) is within its root's limits: each root turn
 * that set `maxTokens` or `maxCostUsd` pays for its own attempts and for those of every child
 * spawned in it, and of their children in turn; its steps and tool calls, with those of each
 * child's first turn (the one its carve paid for), are within `maxSteps` and `maxToolCalls`. Unknown costs (null) count as nothing: a limit in
 * dollars cannot be checked against a price nobody knows.
 */
export function checkTreeBudget(facts: Map<string, ActorFacts>, rootId: string, report: TreeReport): void {
  const root = facts.get(rootId);
  if (!root) return;
  // the root turn each actor's work counts against: a child's is its parent's turn at the spawn
  const origin = new Map<string, string>();
  const queue: Array<{ actor: ActorFacts; rootTurn: (turn: string | undefined) => string | undefined }> = [{ actor: root, rootTurn: (t) => t }];
  while (queue.length > 0) {
    const { actor, rootTurn } = queue.shift()!;
    for (const r of actor.requests) {
      const turn = rootTurn(r.turn);
      const child = facts.get(r.data.childId);
      if (turn === undefined || !child || origin.has(child.actorId)) continue;
      origin.set(child.actorId, turn);
      queue.push({ actor: child, rootTurn: () => turn });
    }
  }
  const spend = new Map<string, { tokens: number; costUsd: number; steps: number; calls: number }>();
  const add = (turn: string | undefined, f: ActorFacts) => {
    if (turn === undefined) return;
    const s = spend.get(turn) ?? { tokens: 0, costUsd: 0, steps: 0, calls: 0 };
    for (const a of f.attempts) {
      if (f === root && a.turn !== turn) continue;
      s.tokens += a.data.usage.inputTokens + a.data.usage.outputTokens;
      s.costUsd += a.data.costUsd ?? 0;
    }
    // steps and tool calls of the turn a carve paid for: the root's own turn, a child's first
    const counted = f === root ? turn : f.turnOrder[0];
    for (const e of f.events) {
      if (e.turn !== counted) continue;
      if (e.type === 'step/start') s.steps += 1;
      else if (e.type === 'tool/start' && !e.data.rerun) s.calls += 1;
    }
    spend.set(turn, s);
  };
  for (const turn of root.turnOrder) add(turn, root);
  for (const [actorId, turn] of origin) add(turn, facts.get(actorId)!);
  for (const turn of root.turnOrder) {
    const start = root.turns.get(turn)!.start;
    const { maxTokens, maxCostUsd, maxSteps, maxToolCalls } = start.data.settings.budgets;
    const s = spend.get(turn)!;
    if (maxSteps !== null && s.steps > maxSteps) {
      report('tree.over_budget', rootId, start.seq, `the tree took ${s.steps} steps for turn ${turn}, past its limit of ${maxSteps}`);
    }
    if (maxToolCalls !== null && s.calls > maxToolCalls) {
      report('tree.over_budget', rootId, start.seq, `the tree started ${s.calls} tool calls for turn ${turn}, past its limit of ${maxToolCalls}`);
    }
    if (maxTokens != null && s.tokens > maxTokens) {
      report('tree.over_budget', rootId, start.seq, `the tree spent ${s.tokens} tokens for turn ${turn}, past its limit of ${maxTokens}`);
    }
    if (maxCostUsd != null && s.costUsd > maxCostUsd + EPSILON_USD) {
      report('tree.over_budget', rootId, start.seq, `the tree spent $${s.costUsd} for turn ${turn}, past its limit of $${maxCostUsd}`);
    }
  }
}

/** One key of a carve: the parent's limit, what the child was given, what its reservation holds. */
interface CarveKey {
  key: string;
  parent: number | null | undefined;
  child: number | null;
  reserved?: number | undefined;
}

/**
 * Every carve is within its parent's turn (design §6b): each limited key of the parent's turn —
 * steps, tool calls, tokens, cost, deadline — is limited for the child and at most the parent's,
 * the spend keys are reserved in the parent's log at least at what the child was given (so the
 * parent's own budget check sees what running children hold), and the child's first turn runs
 * within its carve and spends no more steps and tool calls than it was given.
 */
export function checkCarves(facts: Map<string, ActorFacts>, report: TreeReport): void {
  for (const parent of facts.values()) {
    const reservations = new Map<string, EventOf<'budget/reserved'>>();
    for (const e of parent.events) if (e.type === 'budget/reserved' && e.data.kind === 'subagent') reservations.set(e.data.reservationId, e);
    for (const r of parent.requests) {
      const open = r.turn ? parent.turns.get(r.turn) : undefined;
      if (!open) continue;
      const b = open.start.data.settings.budgets;
      const c = r.data.budget;
      const rsv = reservations.get(carveReservationId(r.data.requestId))?.data;
      const keys: CarveKey[] = [
        { key: 'steps', parent: b.maxSteps, child: c.maxSteps, reserved: rsv?.steps },
        { key: 'tool calls', parent: b.maxToolCalls, child: c.maxToolCalls, reserved: rsv?.calls },
        { key: 'tokens', parent: b.maxTokens, child: c.maxTokens, reserved: rsv?.tokens },
        { key: 'USD', parent: b.maxCostUsd, child: c.maxCostUsd, reserved: rsv?.costUsd ?? undefined },
        { key: 'deadline', parent: b.deadlineAt, child: c.deadlineAt },
      ];
      for (const k of keys) {
        if (k.parent == null) continue;
        if (k.child === null || k.child > k.parent + (k.key === 'USD' ? EPSILON_USD : 0)) {
          report('tree.carve_wider', parent.actorId, r.seq, `${r.data.childId} is given ${k.child === null ? 'no limit' : k.child} of ${k.key}, past its parent's turn's ${k.parent}`);
        } else if (k.key !== 'deadline' && (k.reserved === undefined || k.reserved + (k.key === 'USD' ? EPSILON_USD : 0) < k.child)) {
          report('tree.carve_unreserved', parent.actorId, r.seq, `${r.data.childId} is given ${k.child} of ${k.key}, but its parent's log reserves ${k.reserved ?? 'none'} of them for it`);
        }
      }
      const child = facts.get(r.data.childId);
      const first = child?.turnOrder[0];
      const turn = first === undefined ? undefined : child!.turns.get(first);
      if (!child || !turn) continue;
      const cb = turn.start.data.settings.budgets;
      const within: Array<[string, number | null | undefined, number | null]> = [
        ['steps', cb.maxSteps, c.maxSteps], ['tool calls', cb.maxToolCalls, c.maxToolCalls], ['tokens', cb.maxTokens, c.maxTokens],
        ['USD', cb.maxCostUsd, c.maxCostUsd], ['deadline', cb.deadlineAt, c.deadlineAt],
      ];
      for (const [key, ran, given] of within) {
        if (given === null) continue;
        if (ran == null || ran > given) {
          report('tree.carve_exceeded', child.actorId, turn.start.seq, `turn ${first} runs with ${ran ?? 'no limit'} of ${key}, past the ${given} its spawn request (seq ${r.seq} of ${parent.actorId}) gave it`);
        }
      }
      const end = turn.end?.data;
      if (end && end.steps > c.maxSteps) report('tree.carve_exceeded', child.actorId, turn.end!.seq, `turn ${first} took ${end.steps} steps, past the ${c.maxSteps} it was given`);
      if (end && c.maxToolCalls !== null && end.toolCalls > c.maxToolCalls) report('tree.carve_exceeded', child.actorId, turn.end!.seq, `turn ${first} started ${end.toolCalls} tool calls, past the ${c.maxToolCalls} it was given`);
    }
  }
}
