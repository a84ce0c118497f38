import type { InboxItemState, Projection } from './projection.js';

// Delivery states of inbox messages (design §6), as the projection folds them: which messages
// the next step claims, and how a claim no request included goes back to pending.

/** Kinds of message delivered at the next step boundary of the running (or next) turn. */
export const NEXT_STEP_KINDS: ReadonlySet<string> = new Set(['steer', 'inject', 'subagent_report', 'subagent_completed', 'job_notice']);

export function without(ids: string[], drop: readonly string[]): string[] {
  return ids.filter((id) => !drop.includes(id));
}

export function setState(p: Projection, id: string, state: InboxItemState): void {
  const item = p.inbox[id];
  if (item) p.inbox[id] = { ...item, state };
}

/** A reserved message no request included goes back to `pending`, first in line for the next step. */
export function requeue(p: Projection, id: string): void {
  const item = p.inbox[id];
  if (!item || item.state !== 'reserved') return;
  p.inbox[id] = { ...item, state: 'pending' };
  if (NEXT_STEP_KINDS.has(item.kind)) p.nextStep = [id, ...without(p.nextStep ?? [], [id])];
}

/** A step that ended before its request held what it claimed gives the messages back. */
export function requeueClaimed(p: Projection): void {
  if (!p.claimed || p.claimed.length === 0) return;
  const ids = p.claimed;
  p.claimed = [];
  for (const id of [...ids].reverse()) requeue(p, id);
}

/** Messages waiting for a later turn (user messages, follow-ups), oldest first. */
export function queuedForNextTurn(p: Projection): string[] {
  return Object.entries(p.inbox)
    .filter(([, item]) => item.state === 'pending' && (item.kind === 'follow_up' || item.kind === 'user_message'))
    .map(([id]) => id);
}
