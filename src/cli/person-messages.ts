import { publishInbox } from '../bus/inbox.js';
import { INBOX_MAX_MSG_BYTES } from '../bus/streams.js';
import type { InboxMessage } from '../protocol/inbox.js';
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
