import { pendingApprovals, type Projection } from '../store/projection.js';

// The active states of an actor's machines as its committed events say them. The hosts' live
// XState inspection is not on the bus, so `machines.subscribe` derives what the log holds: the
// same projection every client folds, read into the machines' state names (`GET /v1/machines`).
// It names the state an actor rests in between commits, not each transient one it passes through.

/** Machine id (`tool-call:<callId>` for each open call) → its active state path. */
export function activeStates(p: Projection): Record<string, string> {
  const active: Record<string, string> = {};
  const waitingApproval = p.parked?.waitingFor === 'approval' || pendingApprovals(p).length > 0;
  if (p.stopped) active.agent = 'stopped';
  else if (!p.openTurn) active.agent = 'idle';
  else if (waitingApproval) active.agent = 'waiting_approval';
  else if (p.parked?.waitingFor === 'question') active.agent = 'turn.waiting_input';
  else active.agent = 'turn.running';
  if (!p.openTurn) return active;
  active.turn = p.openStep ? 'stepping' : 'launching';
  if (!p.openStep) return active;
  const calls = p.pending.calls;
  active.step = p.openAttempt ? 'generating.attempting' : calls.length > 0 ? 'tools' : 'assembling';
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
