import { StoreError, STORE_CODES } from '../protocol/errors.js';
import { EVENT_VERSION, type ActorEvent, type EventDraft } from '../protocol/events.js';
import { newId } from '../protocol/ids.js';
import { eventCheck } from './event-check.js';

/** Where a commit's events go: the seq of its first event, the writer's epoch and actor. */
export interface CommitPlace {
  firstSeq: number;
  epoch: number;
  actorId: string;
}

/**
 * Stamps v, seq, id, at, epoch and actor on each draft and checks it (`store.invalid_event`
 * otherwise). A draft the caller already stamped for this very place (an actor's staged event)
 * is used as it is, its ID filled in; any other is copied.
 */
export function stampDrafts(drafts: EventDraft[], place: CommitPlace, now: () => Date): ActorEvent[] {
  const check = eventCheck();
  const { epoch, actorId } = place;
  // the runtime stages every event with its time: the clock is read only for a draft without one
  let at: string | undefined;
  return drafts.map((d, i) => {
    const seq = place.firstSeq + i;
    const e = d as Partial<ActorEvent>;
    // Object.assign, not `{ ...d, v, … }`: that literal takes a slow path in Node 20's V8.
    let raw: object = d;
    if (e.seq === seq && e.epoch === epoch && e.actor === actorId && e.v === EVENT_VERSION && e.at !== undefined) e.id = newId('event');
    else raw = Object.assign({}, d, { v: EVENT_VERSION, seq, id: newId('event'), at: d.at ?? (at ??= now().toISOString()), epoch, actor: actorId });
    const issue = check(raw);
    if (issue) throw new StoreError(STORE_CODES.invalidEvent, `invalid ${d.type} event: ${issue.path}: ${issue.message}`);
    return raw as ActorEvent;
  });
}
