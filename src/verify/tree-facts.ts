import type { ActorEvent, EventOf } from '../protocol/events.js';
import { NOTICE_KINDS, SubagentNoticeSchema } from '../protocol/subagents.js';

// What the tree checks read of each actor's log, indexed once: its turns, the tasks it received,
// the children it asked for, and the notices and reports it received and included.

/** One turn of an actor: its start and, once ended, its end. */
export interface TurnFacts {
  start: EventOf<'turn/start'>;
  end?: EventOf<'turn/end'>;
}

/** A child's notice or report as its parent's log holds it. */
export interface ChildMessage {
  messageId: string;
  kind: string;
  /** The seq of its `inbox/received`. */
  seq: number;
  /** The child the message is from (`inbox/received.from`). */
  from: string;
  /** A completion notice's turn (of the child). */
  turn?: string;
  /** Where it entered the parent's history: `subagent/completed` or a request's `messageIds`. */
  includedAt: Array<{ seq: number; by: string }>;
  cancelled: boolean;
}

/** Everything the tree checks need of one actor's log. */
export interface ActorFacts {
  actorId: string;
  events: ActorEvent[];
  turns: Map<string, TurnFacts>;
  /** Turn IDs in the order they started. */
  turnOrder: string[];
  /** Every `subagent_task` the log received. */
  tasks: Array<EventOf<'inbox/received'>>;
  requests: Array<EventOf<'subagent/spawn_requested'>>;
  spawned: Array<EventOf<'subagent/spawned'>>;
  /** `subagent/message_sent` of kind interrupt, by child. */
  interrupts: Map<string, EventOf<'subagent/message_sent'>>;
  detached: Map<string, EventOf<'subagent/detached'>>;
  /** Notices and reports received from children, by message ID. */
  fromChildren: Map<string, ChildMessage>;
  /** Message IDs this actor sent its parent (`subagent/reported`, `subagent/notified`). */
  sentUp: Array<{ seq: number; messageId: string }>;
  /** Turns whose end owes a notice not yet `subagent/notified`. */
  owing: Set<string>;
  attempts: Array<EventOf<'attempt/end'>>;
}

function noticeTurn(content: string): string | undefined {
  try {
    const n = SubagentNoticeSchema.safeParse(JSON.parse(content));
    return n.success ? n.data.turn : undefined;
  } catch {
    return undefined;
  }
}

/** Indexes one actor's log for the tree checks, in one pass. */
export function actorFacts(actorId: string, events: ActorEvent[]): ActorFacts {
  const f: ActorFacts = {
    actorId, events, turns: new Map(), turnOrder: [], tasks: [], requests: [], spawned: [], interrupts: new Map(),
    detached: new Map(), fromChildren: new Map(), sentUp: [], owing: new Set(), attempts: [],
  };
  const include = (id: string, seq: number, by: string) => f.fromChildren.get(id)?.includedAt.push({ seq, by });
  for (const e of events) {
    switch (e.type) {
      case 'turn/start':
        if (e.turn) {
          f.turns.set(e.turn, { start: e });
          f.turnOrder.push(e.turn);
        }
        break;
      case 'turn/end': {
        const t = e.turn ? f.turns.get(e.turn) : undefined;
        if (t) t.end = e;
        if (e.turn && e.data.noticeOwed === true) f.owing.add(e.turn);
        break;
      }
      case 'inbox/received':
        if (e.data.kind === 'subagent_task') f.tasks.push(e);
        else if (NOTICE_KINDS.has(e.data.kind) && !f.fromChildren.has(e.data.messageId)) {
          const turn = e.data.kind === 'subagent_completed' ? noticeTurn(e.data.content) : undefined;
          f.fromChildren.set(e.data.messageId, {
            messageId: e.data.messageId, kind: e.data.kind, seq: e.seq, from: e.data.from, includedAt: [], cancelled: false,
            ...(turn !== undefined ? { turn } : {}),
          });
        }
        break;
      case 'inbox/cancelled': {
        const m = f.fromChildren.get(e.data.messageId);
        if (m) m.cancelled = true;
        break;
      }
      case 'subagent/completed':
        include(e.data.messageId, e.seq, `the call ${e.call ?? ''} that waited for ${e.data.childId}`);
        break;
      case 'request/prepared':
        for (const id of e.data.messageIds ?? []) include(id, e.seq, `the request of step ${e.step ?? ''}`);
        break;
      case 'subagent/spawn_requested':
        f.requests.push(e);
        break;
      case 'subagent/spawned':
        f.spawned.push(e);
        break;
      case 'subagent/message_sent':
        if (e.data.kind === 'interrupt') f.interrupts.set(e.data.childId, e);
        break;
      case 'subagent/detached':
        f.detached.set(e.data.childId, e);
        break;
      case 'subagent/reported':
        f.sentUp.push({ seq: e.seq, messageId: e.data.messageId });
        break;
      case 'subagent/notified':
        f.sentUp.push({ seq: e.seq, messageId: e.data.messageId });
        f.owing.delete(e.data.turn);
        break;
      case 'attempt/end':
        f.attempts.push(e);
        break;
      default:
        break;
    }
  }
  return f;
}

/** The actor's last turn, if it had one. */
export function lastTurn(f: ActorFacts): TurnFacts | undefined {
  const id = f.turnOrder[f.turnOrder.length - 1];
  return id === undefined ? undefined : f.turns.get(id);
}

/** Why the tree is still running (empty: nothing in its logs is under way), one line per reason. */
export function runningReasons(facts: Map<string, ActorFacts>, parentOf: Map<string, string>): string[] {
  const why: string[] = [];
  for (const f of facts.values()) {
    const last = lastTurn(f);
    if (last && !last.end) why.push(`${f.actorId} has turn ${last.start.turn} open`);
    for (const t of f.owing) why.push(`${f.actorId} still owes its parent the notice of turn ${t}`);
    const parent = parentOf.get(f.actorId);
    const received = parent === undefined ? undefined : facts.get(parent)?.fromChildren;
    for (const s of f.sentUp) if (received && !received.has(s.messageId)) why.push(`${parent} has not received ${s.messageId} from ${f.actorId} yet`);
    // an idle agent holding an unread notice claims a turn for it next
    for (const m of f.fromChildren.values()) {
      if (!m.cancelled && m.includedAt.length === 0 && (!last || last.end)) why.push(`${f.actorId} has ${m.messageId} from ${m.from} to take into a turn`);
    }
  }
  return why;
}
