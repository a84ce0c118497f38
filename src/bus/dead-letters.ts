import { JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { ActorloopError, BusError, ConfigError, NotFoundError } from '../protocol/errors.js';
import { InboxMessageSchema, type InboxMessage } from '../protocol/inbox.js';
import {
  actorOfInboxConsumer, deadLetterMsgId, dlqSubject, inboxSubject, parseInboxSubject, redriveMsgId, redrivenMsgId, STREAMS,
  type InboxChannel,
} from './subjects.js';

/** Why a message could not be taken: a stable code and one line for a person. */
export const DeadLetterErrorSchema = z.object({ code: z.string().min(1), message: z.string() });
/** Why a message could not be taken. */
export type DeadLetterError = z.infer<typeof DeadLetterErrorSchema>;

/**
 * Header holding a DLQ record's metadata as JSON. The payload of a dead letter is the original
 * inbox message bytes, unchanged: JSON-in-JSON would escape them, base64 would grow them by a
 * third, and either could push a large message past the server's max payload.
 */
export const DEAD_LETTER_HEADER = 'Actorloop-Dead-Letter';

const Seq = z.number().int().positive();

/** The metadata of one record on `dlq.<actorId>`: a dead letter, or the note that one was redriven. */
export const DlqRecordSchema = z.discriminatedUnion('type', [
  z.object({
    v: z.literal(1),
    type: z.literal('dead_letter'),
    actorId: z.string().min(1),
    messageId: z.string().min(1),
    inboxSeq: Seq,
    deliveries: z.number().int().nonnegative(),
    error: DeadLetterErrorSchema,
    at: z.string(),
  }),
  z.object({
    v: z.literal(1),
    type: z.literal('redriven'),
    actorId: z.string().min(1),
    messageId: z.string().min(1),
    deadLetterSeq: Seq,
    /** Where the redriven copy landed in INBOX. */
    inboxSeq: Seq,
    at: z.string(),
  }),
]);
/** One DLQ record's metadata. */
export type DlqRecord = z.infer<typeof DlqRecordSchema>;

// What the server publishes when a consumer gives up on a message (fields actorloop reads).
const MaxDeliveriesAdvisorySchema = z.object({
  type: z.literal('io.nats.jetstream.advisory.v1.max_deliver'),
  timestamp: z.string(),
  stream: z.string(),
  consumer: z.string(),
  stream_seq: Seq,
  deliveries: z.number().int(),
});

/** A dead letter as `actorloop dlq list` shows it. */
export interface DeadLetter {
  /** Its sequence in the DLQ stream: the record's own handle. */
  seq: number;
  /** The message ID (`msg_…`); for bytes that name none, `inbox:<inboxSeq>`. */
  id: string;
  actorId: string;
  /** The original's sequence in INBOX. */
  inboxSeq: number;
  deliveries: number;
  error: DeadLetterError;
  /** When it was given up on (ISO 8601). */
  at: string;
  /** `host`: recorded by the host on the last delivery; `advisory`: the server gave up with no host recording it. */
  source: 'host' | 'advisory';
  /** The original message bytes. */
  data: Uint8Array;
  /** Set once it was sent again. */
  redriven: { at: string; inboxSeq: number } | null;
}

/** What a host knows when it gives up on a message. */
export interface DeadLetterInput {
  actorId: string;
  messageId: string;
  inboxSeq: number;
  deliveries: number;
  error: DeadLetterError;
  data: Uint8Array;
  at?: string;
}

const MAX_ERROR_CHARS = 500;

/** An error as a dead letter records it: its stable code when it has one, its first line, clipped. */
export function deadLetterErrorOf(err: unknown, fallbackCode = 'inbox.take_failed'): DeadLetterError {
  const code = err instanceof ActorloopError ? err.code : fallbackCode;
  const text = err instanceof Error ? err.message : String(err);
  return { code, message: text.replace(/\s+/g, ' ').trim().slice(0, MAX_ERROR_CHARS) };
}

/** Decodes inbox bytes: the message, or why it is not one (code `inbox.invalid_message`). */
export function decodeInboxMessage(data: Uint8Array): { message: InboxMessage } | { error: DeadLetterError } {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    return { error: { code: 'inbox.invalid_message', message: `not JSON: ${(err as Error).message}`.slice(0, MAX_ERROR_CHARS) } };
  }
  const parsed = InboxMessageSchema.safeParse(value);
  if (parsed.success) return { message: parsed.data };
  const issue = parsed.error.issues[0];
  return {
    error: { code: 'inbox.invalid_message', message: `${issue?.path.join('.') || '(root)'}: ${issue?.message}`.slice(0, MAX_ERROR_CHARS) },
  };
}

/** The ID a dead letter goes by: the message's own, else its `Nats-Msg-Id`, else `inbox:<seq>`. */
export function messageIdOf(data: Uint8Array, natsMsgId: string | undefined, inboxSeq: number): string {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as { id?: unknown };
    if (typeof value?.id === 'string' && /^[\x21-\x7e]{1,200}$/.test(value.id)) return value.id;
  } catch {
    // not JSON: fall through to the header
  }
  return natsMsgId || `inbox:${inboxSeq}`;
}

/**
 * Records a dead letter on `dlq.<actorId>` and resolves with its DLQ sequence once the server
 * stored it; a retried write of the same inbox message is stored once.
 */
export async function recordDeadLetter(js: JetStreamClient, input: DeadLetterInput): Promise<number> {
  const record: DlqRecord = {
    v: 1,
    type: 'dead_letter',
    actorId: input.actorId,
    messageId: input.messageId,
    inboxSeq: input.inboxSeq,
    deliveries: input.deliveries,
    error: input.error,
    at: input.at ?? new Date().toISOString(),
  };
  const ack = await publish(js, dlqSubject(input.actorId), input.data, deadLetterMsgId(input.inboxSeq), record);
  return ack.seq;
}

/** Options of `listDeadLetters`. */
export interface ListDeadLettersOptions {
  /** Only this actor's. */
  actorId?: string;
  /** Include the ones already redriven (default: only those still dead). */
  includeRedriven?: boolean;
  logger?: Logger;
}

/** The bus handles the DLQ functions use. */
export interface DlqBus {
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * Every dead letter, oldest first: the records hosts wrote, plus the captured max-deliveries
 * advisories no host recorded (their bytes are read back from INBOX), each marked redriven when
 * it was sent again.
 */
export async function listDeadLetters(bus: DlqBus, opts: ListDeadLettersOptions = {}): Promise<DeadLetter[]> {
  const logger = opts.logger ?? pino({ level: 'silent' });
  const letters = new Map<number, DeadLetter>();
  const recordedInboxSeqs = new Set<number>();
  const redrives: Extract<DlqRecord, { type: 'redriven' }>[] = [];
  const advisories: Array<{ seq: number; advisory: z.infer<typeof MaxDeliveriesAdvisorySchema> }> = [];
  for (const r of await readAll(bus)) {
    if (r.subject.startsWith(dlqSubject(''))) {
      const meta = parseRecordMeta(r.header);
      if (!meta) {
        logger.warn({ dlqSeq: r.seq, subject: r.subject }, 'DLQ record without valid metadata skipped');
        continue;
      }
      if (meta.type === 'redriven') {
        redrives.push(meta);
        continue;
      }
      recordedInboxSeqs.add(meta.inboxSeq);
      letters.set(r.seq, {
        seq: r.seq, id: meta.messageId, actorId: meta.actorId, inboxSeq: meta.inboxSeq, deliveries: meta.deliveries,
        error: meta.error, at: meta.at, source: 'host', data: r.data, redriven: null,
      });
      continue;
    }
    const advisory = parseJson(MaxDeliveriesAdvisorySchema, r.data);
    if (advisory && advisory.stream === STREAMS.inbox) advisories.push({ seq: r.seq, advisory });
    else logger.warn({ dlqSeq: r.seq, subject: r.subject }, 'DLQ advisory not understood; skipped');
  }
  // After every record: a host slow on a last delivery may record it after the server gave up.
  for (const { seq, advisory } of advisories) {
    const actorId = actorOfInboxConsumer(advisory.consumer);
    if (!actorId || recordedInboxSeqs.has(advisory.stream_seq)) continue;
    const stored = await bus.jsm.streams.getMessage(STREAMS.inbox, { seq: advisory.stream_seq }).catch(() => null);
    const data = stored?.data ?? new Uint8Array();
    letters.set(seq, {
      seq,
      id: messageIdOf(data, stored?.header.get('Nats-Msg-Id'), advisory.stream_seq),
      actorId,
      inboxSeq: advisory.stream_seq,
      deliveries: advisory.deliveries,
      error: {
        code: 'inbox.unsettled',
        message: stored
          ? 'its last delivery was never settled (the host stopped, or took longer than its ack wait), so the server gave up on it'
          : 'the server gave up on it, and its bytes are no longer in INBOX',
      },
      at: advisory.timestamp,
      source: 'advisory',
      data,
      redriven: null,
    });
  }
  for (const r of redrives) {
    const letter = letters.get(r.deadLetterSeq);
    if (letter && !letter.redriven) letter.redriven = { at: r.at, inboxSeq: r.inboxSeq };
  }
  return [...letters.values()]
    .filter((l) => (opts.actorId === undefined || l.actorId === opts.actorId) && (opts.includeRedriven || !l.redriven))
    .sort((a, b) => a.seq - b.seq);
}

/** What a redrive did. */
export interface RedriveResult {
  letter: DeadLetter;
  message: InboxMessage;
  /** Sequence of the copy in INBOX. */
  inboxSeq: number;
  /** The inbox had it already: a redrive retried within the duplicate window. */
  duplicate: boolean;
}

/**
 * Sends a dead letter again to its actor's inbox and records that it was. The copy keeps the
 * message's `id`, so an actor that did take it after all acks and drops it; its `Nats-Msg-Id` is
 * the redrive's own, since the original's would fall in the inbox's 10-minute duplicate window.
 */
export async function redriveDeadLetter(bus: DlqBus, id: string, opts: { at?: string } = {}): Promise<RedriveResult> {
  const matching = (await listDeadLetters(bus, { includeRedriven: true })).filter((l) => l.id === id);
  if (matching.length === 0) {
    throw new NotFoundError('dlq.not_found', `no dead letter ${id}`, {
      hint: 'list them with `actorloop dlq list`, and pass the same --data-dir and --nats as the runs',
    });
  }
  const open = matching.filter((l) => !l.redriven);
  const letter = open.at(-1);
  if (!letter) {
    const last = matching.at(-1)!;
    throw new ConfigError('dlq.already_redriven', `dead letter ${id} was already redriven at ${last.redriven!.at}`, {
      hint: `if it failed again it is listed as a new dead letter; \`actorloop events ${last.actorId}\` (with the same --data-dir and --nats) shows whether the agent took it`,
    });
  }
  const decoded = decodeInboxMessage(letter.data);
  if ('error' in decoded) {
    throw new ConfigError('dlq.not_redrivable', `dead letter ${id} is not a valid inbox message (${decoded.error.message}), so it would fail again`, {
      hint: 'send a corrected message instead; `actorloop dlq list --json` shows its bytes (base64)',
    });
  }
  const at = opts.at ?? new Date().toISOString();
  const channel = await channelOf(bus, letter.inboxSeq);
  const ack = await publish(bus.js, inboxSubject(letter.actorId, channel), letter.data, redriveMsgId(letter.id, letter.seq));
  // Every open dead letter of this message is answered by the one copy.
  for (const l of open) {
    await publish(bus.js, dlqSubject(l.actorId), new Uint8Array(), redrivenMsgId(l.seq), {
      v: 1, type: 'redriven', actorId: l.actorId, messageId: l.id, deadLetterSeq: l.seq, inboxSeq: ack.seq, at,
    });
  }
  return { letter, message: decoded.message, inboxSeq: ack.seq, duplicate: ack.duplicate };
}

/**
 * The channel a dead letter first came in on, from its original in INBOX: a redrive speaks for
 * whom the original spoke for, never more. An original that is gone, or came on a subject of no
 * channel, goes back on the actors' channel, where nothing only a person may say is taken.
 */
async function channelOf(bus: DlqBus, inboxSeq: number): Promise<InboxChannel> {
  try {
    const original = await bus.jsm.streams.getMessage(STREAMS.inbox, { seq: inboxSeq });
    return (original && parseInboxSubject(original.subject)?.channel) || 'actor';
  } catch {
    return 'actor';
  }
}

async function publish(
  client: JetStreamClient, subject: string, data: Uint8Array, msgID: string, meta?: DlqRecord,
): Promise<{ seq: number; duplicate: boolean }> {
  const h = headers();
  // Header values must be one line of ASCII: JSON escapes newlines, and \u escapes the rest.
  if (meta) h.set(DEAD_LETTER_HEADER, JSON.stringify(meta).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
  try {
    const ack = await client.publish(subject, data, { msgID, headers: h });
    return { seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    const refused = err instanceof JetStreamApiError;
    throw new BusError(refused ? 'bus.dlq_refused' : 'bus.publish_unknown', `cannot publish to ${subject}: ${(err as Error).message}`,
      { cause: err, retryable: !refused });
  }
}

interface RawRecord {
  seq: number;
  subject: string;
  data: Uint8Array;
  header: string | undefined;
}

/** The whole DLQ stream as of the call, through an ordered consumer. */
async function readAll(bus: DlqBus): Promise<RawRecord[]> {
  const info = await bus.jsm.streams.info(STREAMS.dlq);
  if (info.state.messages === 0) return [];
  const last = info.state.last_seq;
  const consumer = await bus.js.consumers.get(STREAMS.dlq);
  const messages = await consumer.consume({ max_messages: 256 });
  const out: RawRecord[] = [];
  try {
    for await (const m of messages) {
      out.push({ seq: m.seq, subject: m.subject, data: m.data, header: m.headers?.get(DEAD_LETTER_HEADER) });
      if (m.seq >= last || m.info.pending === 0) break;
    }
  } finally {
    messages.stop();
    void consumer.delete().catch(() => {});
  }
  return out;
}

function parseRecordMeta(header: string | undefined): DlqRecord | null {
  if (!header) return null;
  try {
    const parsed = DlqRecordSchema.safeParse(JSON.parse(header));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function parseJson<T>(schema: z.ZodType<T>, data: Uint8Array): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
