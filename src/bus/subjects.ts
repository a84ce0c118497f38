/** JetStream stream names (design §6). */
export const STREAMS = { logs: 'LOGS', inbox: 'INBOX', idem: 'IDEM' } as const;

/** KV bucket names (design §6). */
export const BUCKETS = { actors: 'actors', leases: 'leases' } as const;

/** Subject of one actor's append-only log: `log.<rootId>.<actorId>`. */
export function logSubject(rootId: string, actorId: string): string {
  return `log.${rootId}.${actorId}`;
}

/** Filter that replays a whole run (every actor under one root) in stream order. */
export function runLogFilter(rootId: string): string {
  return `log.${rootId}.>`;
}

/** Subject of an actor's durable inbox. */
export function inboxSubject(actorId: string): string {
  return `inbox.${actorId}`;
}

/** Name of the durable pull consumer that reads an actor's inbox. */
export function inboxConsumerName(actorId: string): string {
  return `inbox_${actorId}`;
}

/** Subject of a permanent idempotency record for an effectful tool call. */
export function idemSubject(key: string): string {
  return `idem.${key}`;
}

/** Core NATS subject of live (not persisted) stream deltas of a model attempt. */
export function liveSubject(rootId: string, actorId: string): string {
  return `live.${rootId}.${actorId}`;
}

/** `Nats-Msg-Id` of a commit: actor ID + first event seq, so a retried publish is deduped. */
export function commitMsgId(actorId: string, firstSeq: number): string {
  return `${actorId}:${firstSeq}`;
}
