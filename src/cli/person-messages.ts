import { publishInbox } from '../bus/inbox.js';
import { INBOX_MAX_MSG_BYTES } from '../bus/streams.js';
import { ConfigError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { TextKind } from '../client/messages.js';
import type { Runtime } from './runtime.js';
import { checkMessageSize } from '../client/message-size.js';
import { createBusTransport, type BusTransport, type BusTransportOptions } from '../client/bus-transport.js';

/** How a kind is named to a person (the flag that sends it). */
export function kindLabel(kind: string): string {
  return kind === 'follow_up' ? 'follow-up' : kind === 'user_message' ? 'message' : kind;
}

/** The largest message this bus's inbox takes: the INBOX stream's limit, or the server's max_payload if lower. */
export function inboxLimitBytes(rt: Pick<Runtime, 'bus'>): number {
  const maxPayload = rt.bus.nc.info?.max_payload;
  return maxPayload && maxPayload > 0 ? Math.min(INBOX_MAX_MSG_BYTES, maxPayload) : INBOX_MAX_MSG_BYTES;
}

/** Checks a person's message against the inbox's limit and publishes it on the person channel (PubAck: it is in the inbox). */
export async function sendAsPerson(rt: Pick<Runtime, 'bus'>, msg: InboxMessage): Promise<void> {
  checkMessageSize(msg, inboxLimitBytes(rt));
  await publishInbox(await rt.bus.person(), msg, 'person');
}

/**
 * The bus transport of a command: its log reader and directory, its person login, the inbox's
 * limit of this bus. `from` and `beforeSend` are the gateway's (its sender name, and a free agent
 * handed to a live host before its mail).
 */
export function personTransport(rt: Pick<Runtime, 'bus' | 'reader'>, o: Pick<BusTransportOptions, 'from' | 'beforeSend'> = {}): BusTransport {
  return createBusTransport({ reader: rt.reader, directory: rt.bus.directory, person: () => rt.bus.person(), limitBytes: inboxLimitBytes(rt), ...o });
}

/** Options of `actorloop send`, as commander parsed them (the three kind flags exclude each other there). */
export interface SendOptions {
  steer?: boolean;
  inject?: boolean;
  followUp?: boolean;
  json?: boolean;
  /** False with `--no-follow`: return once the inbox accepted the message. */
  follow?: boolean;
  /** Host the agent here to carry the message out when no host holds it, even with hosts running. */
  inProcess?: boolean;
}

/** Checks what needs no bus: each mistake is one line and exit 2, before anything is opened. */
export function validateSend(text: string, opts: SendOptions): TextKind | null {
  if (text.trim() === '') {
    throw new ConfigError('cli.empty_message', 'the message is empty', { hint: 'say what the agent should know, e.g. actorloop send <agent> "use the v2 API"' });
  }
  const kinds = ([['steer', opts.steer], ['inject', opts.inject], ['follow_up', opts.followUp]] as const).filter(([, on]) => on === true);
  if (kinds.length > 1) {
    // commander refuses these first; a caller of the function gets the same answer
    throw new ConfigError('cli.send_kinds', 'choose one of --steer, --inject and --follow-up');
  }
  return kinds[0]?.[0] ?? null;
}

/** All of a stream, as UTF-8 text; empty without one. */
export async function readAll(input: NodeJS.ReadableStream | undefined): Promise<string> {
  if (!input) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** What `compact` says the agent does with the ask, by whether a turn is open. */
export function compactFate(agentId: string, turnOpen: boolean): string {
  return turnOpen
    ? `${agentId} compacts its closed steps into a checkpoint at its next step boundary (actorloop events shows compaction/started, then checkpoint/committed or compaction/rejected)`
    : `${agentId} has no open turn: it compacts at the first step of its next turn`;
}
