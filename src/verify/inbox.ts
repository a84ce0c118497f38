import type { ActorEvent } from '../protocol/events.js';
import type { Check, Report } from './violations.js';

/** Where one received message is in its delivery (design §6). */
type Delivery =
  | { state: 'pending' }
  | { state: 'reserved'; seq: number; by: 'turn' | 'step'; step?: string }
  | { state: 'included'; seq: number; by: string }
  | { state: 'cancelled' };

/**
 * Delivery states (design §6): each inbox message is received once; reserved by the one
 * `turn/start` or `step/start` that claims it while it is pending; included once, by the first
 * prepared request that holds it (or consumed by the one answer, interrupt or question it is);
 * given back to pending only while reserved by a step and not yet included (the step ended first,
 * or recovery found no request prepared); and its content enters the history at most once. A
 * complete log loses none: nothing a step reserved is left reserved.
 */
export function createInboxCheck(report: Report): Check {
  const received = new Map<string, number>();
  const delivery = new Map<string, Delivery>();
  const inHistory = new Map<string, number>();

  const known = (seq: number, id: string, by: string): Delivery | null => {
    if (!received.has(id)) {
      report('inbox.claim_unreceived', seq, `${by} names message ${id}, which was never received before it`);
      return null;
    }
    return delivery.get(id) ?? { state: 'pending' };
  };
  const twice = (seq: number, id: string, by: string, d: Delivery): void => {
    const where = d.state === 'included' ? `already included at seq ${d.seq} by ${d.by}` : d.state === 'reserved' ? `already reserved at seq ${d.seq}` : 'cancelled';
    report('inbox.included_twice', seq, `${by} takes message ${id}, ${where}`);
  };
  const reserve = (seq: number, id: string, by: 'turn' | 'step', step: string | undefined, who: string) => {
    const d = known(seq, id, who);
    if (!d) return;
    if (d.state !== 'pending') return twice(seq, id, who, d);
    delivery.set(id, { state: 'reserved', seq, by, ...(step ? { step } : {}) });
  };
  /** A message taken whole by what names it (an answer, an interrupt): included whatever it was before. */
  const consume = (seq: number, id: string, by: string) => {
    const d = known(seq, id, by);
    if (!d) return;
    if (d.state !== 'pending') return twice(seq, id, by, d);
    delivery.set(id, { state: 'included', seq, by });
  };
  const giveBack = (step: string | undefined) => {
    for (const [id, d] of delivery) if (d.state === 'reserved' && d.by === 'step' && d.step === step) delivery.set(id, { state: 'pending' });
  };

  return {
    event(e: ActorEvent) {
      switch (e.type) {
        case 'inbox/received': {
          const first = received.get(e.data.messageId);
          if (first !== undefined) report('inbox.received_twice', e.seq, `message ${e.data.messageId} was already received at seq ${first}`);
          else received.set(e.data.messageId, e.seq);
          break;
        }
        case 'turn/start':
          for (const id of e.data.messageIds) reserve(e.seq, id, 'turn', undefined, `turn ${e.turn}`);
          break;
        case 'step/start':
          for (const id of e.data.messageIds ?? []) reserve(e.seq, id, 'step', e.step, `step ${e.step}`);
          break;
        case 'request/prepared':
          for (const id of e.data.messageIds ?? []) {
            const d = known(e.seq, id, `the request of step ${e.step}`);
            if (!d) continue;
            if (d.state === 'reserved') delivery.set(id, { state: 'included', seq: e.seq, by: `the request of step ${e.step}` });
            else if (d.state === 'pending') report('inbox.included_unreserved', e.seq, `the request of step ${e.step} includes message ${id}, which no turn or step reserved`);
            else twice(e.seq, id, `the request of step ${e.step}`, d);
          }
          break;
        case 'step/end':
          giveBack(e.step);
          break;
        case 'recovery/started':
          for (const id of e.data.requeued ?? []) {
            const d = delivery.get(id);
            if (d?.state === 'reserved' && d.by === 'step') delivery.set(id, { state: 'pending' });
            else report('inbox.requeue_invalid', e.seq, `recovery gives message ${id} back to pending, but it is ${d?.state ?? (received.has(id) ? 'pending' : 'never received')}${d?.state === 'reserved' ? ' by its turn' : ''}: only a step's claim no request included goes back`);
          }
          break;
        case 'approval/granted':
        case 'approval/denied':
          if (e.data.messageId !== undefined) consume(e.seq, e.data.messageId, `the answer to approval ${e.data.approvalId}`);
          break;
        case 'ask/answered':
          if (e.data.messageId !== null) consume(e.seq, e.data.messageId, `the answer to question ${e.data.questionId}`);
          break;
        case 'interrupt/requested':
          consume(e.seq, e.data.messageId, 'interrupt/requested');
          break;
        case 'subagent/completed':
          consume(e.seq, e.data.messageId, `the call ${e.call ?? ''} that waited for ${e.data.childId}`);
          break;
        case 'inbox/cancelled':
          if (received.has(e.data.messageId)) delivery.set(e.data.messageId, { state: 'cancelled' });
          break;
        case 'user/message': {
          const first = inHistory.get(e.data.messageId);
          if (first !== undefined) {
            report('inbox.included_twice', e.seq, `message ${e.data.messageId} enters the history again (first at seq ${first})`);
          } else inHistory.set(e.data.messageId, e.seq);
          break;
        }
        default:
          break;
      }
    },
    end(complete) {
      if (!complete) return;
      for (const [id, d] of delivery) {
        if (d.state === 'reserved' && d.by === 'step') {
          report('inbox.lost', d.seq, `message ${id} was reserved by step ${d.step} at seq ${d.seq} and never included nor given back`);
        }
      }
    },
  };
}

/**
 * An interrupt ends its turn (design §6a): after `interrupt/requested` the turn starts no model
 * attempt and no tool call (a recovery's run again of a call already started is not new), and
 * it ends other than `completed`; a complete log leaves no interrupted turn open.
 */
export function createInterruptCheck(report: Report): Check {
  /** Open turns that were interrupted, with the seq of their interrupt. */
  const interrupted = new Map<string, number>();
  return {
    event(e: ActorEvent) {
      if (e.type === 'interrupt/requested') {
        if (e.turn !== undefined && !interrupted.has(e.turn)) interrupted.set(e.turn, e.seq);
        return;
      }
      const at = e.turn === undefined ? undefined : interrupted.get(e.turn);
      if (at === undefined) return;
      if (e.type === 'attempt/start' || (e.type === 'tool/start' && !e.data.rerun)) {
        report('interrupt.dispatch_after', e.seq, `${e.type} in turn ${e.turn} after its interrupt at seq ${at}: an interrupt dispatches nothing new`);
      } else if (e.type === 'turn/end') {
        interrupted.delete(e.turn!);
        if (e.data.outcome === 'completed') report('interrupt.turn_completed', e.seq, `turn ${e.turn} was interrupted at seq ${at} and still ended completed`);
      }
    },
    end(complete) {
      if (!complete) return;
      for (const [turn, at] of interrupted) report('interrupt.unended', at, `turn ${turn} was interrupted at seq ${at} and never ended`);
    },
  };
}
