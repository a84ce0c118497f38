import type { InboxChannel } from '../../bus/subjects.js';
import type { InboxKind, InboxMessage } from '../../protocol/inbox.js';

/**
 * Kinds of message only a person may send (design §11a): a grant, an answer, a stop, and the
 * change of a goal, the start of a task, whose request carries the workspace, run mode, model endpoint and budgets.
 */
export const PERSON_ONLY_KINDS: ReadonlySet<InboxKind> = new Set<InboxKind>([
  'user_message', 'approval_response', 'ask_answer', 'interrupt', 'control', 'goal_control', 'compact',
]);

/** How a person's command names itself in `from` (`client:cli`); anything else becomes `client:unknown`. */
const CLIENT_NAME = /^client:[a-z0-9_-]{1,64}$/;

/** What the door decided about one delivery: taken with the sender it is recorded as, or refused and why. */
export type DoorVerdict = { admit: true; from: string } | { admit: false; reason: string };

/**
 * Who a message is from, and whether it may say what it says, decided by the channel it came in
 * on, never by what it claims. On the person channel the sender is a client (its self-chosen name
 * kept only when it is a plain client name); on the actors' channel, a message claiming a client,
 * of a kind only a person sends, or carrying a task's settings is refused.
 */
export function admit(msg: InboxMessage, channel: InboxChannel): DoorVerdict {
  if (channel === 'person') return { admit: true, from: CLIENT_NAME.test(msg.from) ? msg.from : 'client:unknown' };
  const refuse = (why: string): DoorVerdict => ({
    admit: false,
    reason: `${why}; it came in on the actors' channel, and only a person's client (actorloop CLI, gateway) may send that`,
  });
  if (PERSON_ONLY_KINDS.has(msg.kind)) return refuse(`a ${msg.kind} is a person's to send`);
  if (msg.request !== null) return refuse("a task's settings (workspace, run mode, model, budgets) are a person's to set");
  if (msg.from.startsWith('client:')) return refuse(`the message claims to be from ${msg.from}`);
  return { admit: true, from: msg.from };
}
