import type { MachineStatesJson, StateValueJson } from '../protocol/inspection.js';
import { pendingApprovals, pendingQuestions, type Projection } from '../store/projection.js';

// The active states of an actor's machines, keyed as `GET /v1/machines` names them (`agent`,
// `turn`, `step`, `attempt`, `tool-call:<callId>`), from two sources. `activeStates` reads them
// off the committed events (the same projection every client folds): `machines.subscribe` sends
// that once, as a subscription opens. `activeOfReport` reads them off a host's live inspection
// report (what the agent's XState actor says after each event, src/protocol/inspection.ts), which
// names every state the actor passes through, also those between two commits; reports come only
// while someone watches, from hosts that run the actor.

/** Machine id (`tool-call:<callId>` for each open call) → its active state path. */
export function activeStates(p: Projection): Record<string, string> {
  const active: Record<string, string> = {};
  // the agent machine keeps the open approvals and questions as the projection does (approvals
  // first), so it waits exactly while the fold holds one pending
  if (p.stopped) active.agent = 'stopped';
  else if (!p.openTurn) active.agent = 'idle';
  else if (pendingApprovals(p).length > 0) active.agent = 'turn.waiting_approval';
  else if (pendingQuestions(p).length > 0) active.agent = 'turn.waiting_input';
  else active.agent = 'turn.running';
  if (!p.openTurn) return active;
  active.turn = p.openStep ? 'stepping' : 'launching';
  if (!p.openStep) return active;
  const calls = p.pending.calls;
  // a compaction open (its summary's attempt or not yet): the step is compacting
  active.step = p.compaction?.open ? 'compacting' : p.openAttempt ? 'generating.attempting' : calls.length > 0 ? 'tools' : 'assembling';
  if (p.openAttempt) active.attempt = 'streaming';
  const approvals = p.approvals ?? {};
  for (const c of calls) {
    const approval = c.approvalId ? approvals[c.approvalId] : undefined;
    let state: string;
    if (c.observation !== null) state = 'result';
    else if (c.started) state = 'started';
    else if (approval?.state === 'pending') state = 'awaiting_approval.waiting';
    else if (approval?.state === 'denied') state = 'denying';
    else if (c.status !== 'valid') state = 'rejecting';
    else state = 'deciding';
    active[`tool-call:${c.callId}`] = state;
  }
  return active;
}

/** A state value as a dotted path (`{generating: 'attempting'}` → `generating.attempting`); the machines have no parallel states. */
function pathOf(v: StateValueJson): string {
  if (typeof v === 'string') return v;
  const [k, child] = Object.entries(v)[0] ?? [];
  return k === undefined ? '' : child === undefined || (typeof child === 'object' && Object.keys(child).length === 0) ? k : `${k}.${pathOf(child)}`;
}

/** Machine id → its active state path, from a host's inspection report of the machines' state values. */
export function activeOfReport(m: MachineStatesJson): Record<string, string> {
  const active: Record<string, string> = { agent: pathOf(m.agent) };
  if (m.turn !== null) active.turn = pathOf(m.turn);
  if (m.step !== null) active.step = pathOf(m.step);
  if (m.attempt !== null) active.attempt = pathOf(m.attempt);
  for (const [callId, v] of Object.entries(m.calls)) active[`tool-call:${callId}`] = pathOf(v);
  return active;
}
