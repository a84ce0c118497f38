/** JetStream stream names (design §6). */
export const STREAMS = { logs: 'LOGS', inbox: 'INBOX', dlq: 'DLQ' } as const;

/** KV bucket names (design §6). */
export const BUCKETS = { actors: 'actors', leases: 'leases', hosts: 'hosts', resourceLeases: 'resource_leases', treeSlots: 'tree_slots', jobSlots: 'job_slots' } as const;

/**
 * The JetStream Object Store bucket of content-addressed blobs (its stream is `OBJ_blobs`, its
 * subjects `$O.blobs.>`): every host reads and writes it, so any host can take over any agent.
 */
export const BLOB_BUCKET = 'blobs';

/** The stream the Object Store keeps the blob bucket in. */
export const BLOB_STREAM = `OBJ_${BLOB_BUCKET}`;

/** Every subject of the blob bucket: its objects' chunks and their metadata. */
export const BLOB_SUBJECTS = `$O.${BLOB_BUCKET}.>`;

/** Subject of the chunks of one object of the blob bucket, by the object's `nuid` (the Object Store's layout). */
export function blobChunkSubject(nuid: string): string {
  return `$O.${BLOB_BUCKET}.C.${nuid}`;
}

/** Subject of the metadata of the object named `name` in the blob bucket: its name in padded base64url. */
export function blobMetaSubject(name: string): string {
  return `$O.${BLOB_BUCKET}.M.${Buffer.from(name, 'utf8').toString('base64').replace(/\+/g, '-').replace(/\//g, '_')}`;
}

/** Subject of one actor's append-only log: `log.<rootId>.<actorId>`. */
export function logSubject(rootId: string, actorId: string): string {
  return `log.${rootId}.${actorId}`;
}

/** Filter that replays a whole run (every actor under one root) in stream order: `log.<rootId>.>`. */
export function runLogFilter(rootId: string): string {
  return `log.${rootId}.>`;
}

/** The root and actor of a log subject, or null for a subject that is not one actor's log. */
export function parseLogSubject(subject: string): { rootId: string; actorId: string } | null {
  const parts = subject.split('.');
  if (parts.length !== 3 || parts[0] !== 'log' || !parts[1] || !parts[2]) return null;
  return { rootId: parts[1], actorId: parts[2] };
}

/**
 * Who a message in an inbox speaks for, told by the subject it came in on (design §11a): `person`
 * is published only by client users (the CLI, the gateway), `actor` by hosts on an actor's
 * behalf. NATS permissions enforce it; a message never says it for itself.
 */
export type InboxChannel = 'person' | 'actor';

/** Subject of an actor's durable inbox on one channel: `inbox.<actorId>.<channel>`. */
export function inboxSubject(actorId: string, channel: InboxChannel): string {
  return `inbox.${actorId}.${channel}`;
}

/** The filter of an actor's inbox consumer: both channels. */
export function inboxFilter(actorId: string): string {
  return `inbox.${actorId}.*`;
}

/** The actor and channel of an inbox subject, or null for a subject of no channel (an older sender's). */
export function parseInboxSubject(subject: string): { actorId: string; channel: InboxChannel } | null {
  const parts = subject.split('.');
  if (parts.length !== 3 || parts[0] !== 'inbox') return null;
  const channel = parts[2];
  return channel === 'person' || channel === 'actor' ? { actorId: parts[1]!, channel } : null;
}

/**
 * Core NATS subject (not persisted) on which a command asks the live hosts to claim an actor it
 * handed over with no new mail: each host tries its lease, exactly one wins.
 */
export function claimSubject(actorId: string): string {
  return `claim.${actorId}`;
}

/**
 * Core NATS subject (request/reply, not persisted) on which one host takes fault orders:
 * `fault.<hostKey>`, the host's name as its `hosts` KV key (`hostKey` in hosts.ts), a subject
 * token whatever the name holds. Only clients may publish on `fault.>`.
 */
export function faultSubject(hostKey: string): string {
  return `fault.${hostKey}`;
}

/** Name of the durable pull consumer that reads an actor's inbox. */
export function inboxConsumerName(actorId: string): string {
  return `inbox_${actorId}`;
}

/** The actor whose inbox a consumer reads, or null for a consumer actorloop did not name. */
export function actorOfInboxConsumer(consumer: string): string | null {
  return consumer.startsWith('inbox_') && consumer.length > 'inbox_'.length ? consumer.slice('inbox_'.length) : null;
}

/** Subject of the dead letters of one actor's inbox: `dlq.<actorId>`. */
export function dlqSubject(actorId: string): string {
  return `dlq.${actorId}`;
}

/**
 * Subject of the server's advisory that a consumer of `stream` gave up on a message after
 * max_deliver deliveries (`consumer` defaults to any).
 */
export function maxDeliveriesAdvisorySubject(stream: string, consumer = '*'): string {
  return `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${stream}.${consumer}`;
}

/** `Nats-Msg-Id` of a dead-letter record: one per inbox stream message, so a retried write is stored once. */
export function deadLetterMsgId(inboxSeq: number): string {
  return `dead:${inboxSeq}`;
}

/**
 * `Nats-Msg-Id` of a redriven message: not the message's own ID, which the inbox's 10-minute
 * duplicate window would swallow, but one per dead letter, so a retried redrive is stored once.
 */
export function redriveMsgId(messageId: string, deadLetterSeq: number): string {
  return `${messageId}:redrive:${deadLetterSeq}`;
}

/** `Nats-Msg-Id` of the record that a dead letter was redriven. */
export function redrivenMsgId(deadLetterSeq: number): string {
  return `redriven:${deadLetterSeq}`;
}

/** Core NATS subject of live (not persisted) stream deltas of a model attempt. */
export function liveSubject(rootId: string, actorId: string): string {
  return `live.${rootId}.${actorId}`;
}

/**
 * Core NATS subject (not persisted) of a host's live inspection reports of one actor: what its
 * machines did, published only while someone watches it (`watchSubject`). Only hosts may publish it.
 */
export function inspectSubject(rootId: string, actorId: string): string {
  return `inspect.${rootId}.${actorId}`;
}

/** Core NATS subject on which a watcher (a client) asks hosts to report an actor's inspection for a while. */
export function watchSubject(actorId: string): string {
  return `watch.${actorId}`;
}

/** The actor of a watch subject, or null for a subject that is not one. */
export function parseWatchSubject(subject: string): string | null {
  const parts = subject.split('.');
  return parts.length === 2 && parts[0] === 'watch' && parts[1] ? parts[1] : null;
}

/** `Nats-Msg-Id` of a commit: actor ID + first event seq, so a retried publish is deduped. */
export function commitMsgId(actorId: string, firstSeq: number): string {
  return `${actorId}:${firstSeq}`;
}
