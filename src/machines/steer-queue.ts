import type { MachineEvent } from './machine-event.js';

/**
 * The steers a machine knows to be waiting for a step (design §6a): `pending` ones the next
 * step claims, and those the open step `claimed` until its prepared request includes them. A
 * step that ends first, or a recovery that finds no request prepared, gives its claims back.
 * Pure: a function of the log's events alone, kept by the agent machine (a steer left when a
 * turn ends starts the next one) and the turn machine (a steer pending when the model answers
 * means one more step).
 */
export interface SteerQueue {
  pending: string[];
  claimed: string[];
}

export const NO_STEERS: SteerQueue = { pending: [], claimed: [] };

/**
 * Kinds that wait for the next step and wake an idle agent: a person's steer, what a child
 * says to its parent (a report, a completion notice) and a job's notice to its owner, which it
 * reads at its next step.
 */
export const STEER_KINDS: ReadonlySet<string> = new Set(['steer', 'subagent_report', 'subagent_completed', 'job_notice']);

/** The queue after one event; what it was (absent: empty) when the event changes nothing. */
export function nextSteers(q: SteerQueue | undefined, e: MachineEvent): SteerQueue | undefined {
  const s = q ?? NO_STEERS;
  const same = q;
  switch (e.type) {
    case 'inbox/received':
      return STEER_KINDS.has(e.data.kind) ? { pending: [...s.pending, e.data.messageId], claimed: s.claimed } : same;
    case 'subagent/completed':
    case 'inbox/cancelled':
      return s.pending.includes(e.data.messageId) ? { pending: s.pending.filter((id) => id !== e.data.messageId), claimed: s.claimed } : same;
    case 'turn/start':
    case 'step/start': {
      const ids = e.data.messageIds ?? [];
      if (ids.length === 0 || s.pending.length === 0) return same;
      const claimed = s.pending.filter((id) => ids.includes(id));
      return { pending: s.pending.filter((id) => !ids.includes(id)), claimed: e.type === 'step/start' ? claimed : [] };
    }
    case 'request/prepared':
      return s.claimed.length > 0 ? { pending: s.pending, claimed: [] } : same;
    case 'step/end':
      return s.claimed.length > 0 ? { pending: [...s.claimed, ...s.pending], claimed: [] } : same;
    case 'recovery/started': {
      const back = s.claimed.filter((id) => (e.data.requeued ?? []).includes(id));
      return back.length > 0 ? { pending: [...back, ...s.pending], claimed: s.claimed.filter((id) => !back.includes(id)) } : same;
    }
    default:
      return same;
  }
}

/** True when `e` changes the queue (a guard, so an event that changes nothing copies no context). */
export function changesSteers(q: SteerQueue | undefined, e: MachineEvent): boolean {
  return nextSteers(q, e) !== q;
}
