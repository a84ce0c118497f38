import { publishInbox } from '../bus/inbox.js';
import { parseInboxInput } from '../bus/inbox-port.js';
import { INBOX_MAX_MSG_BYTES } from '../bus/streams.js';
import { ConfigError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { Runtime } from './runtime.js';

/** How a kind is named to a person (the flag that sends it). */
export function kindLabel(kind: string): string {
  return kind === 'follow_up' ? 'follow-up' : kind === 'user_message' ? 'message' : kind;
}

/** The largest message this bus's inbox takes: the INBOX stream's limit, or the server's max_payload if lower. */
export function inboxLimitBytes(rt: Pick<Runtime, 'bus'>): number {
  const maxPayload = rt.bus.nc.info?.max_payload;
  return maxPayload && maxPayload > 0 ? Math.min(INBOX_MAX_MSG_BYTES, maxPayload) : INBOX_MAX_MSG_BYTES;
}

/** Bytes of a message as the inbox stores it (its JSON). */
export function messageBytes(msg: InboxMessage): number {
  return Buffer.byteLength(JSON.stringify(parseInboxInput(msg)));
}

/** Refuses, before anything is published, a message the inbox would not take (exit 2). */
export function checkMessageSize(msg: InboxMessage, limitBytes: number): void {
  const bytes = messageBytes(msg);
  if (bytes <= limitBytes) return;
  throw new ConfigError('cli.message_too_large',
    `the message is ${bytes.toLocaleString('en-US')} bytes, over the inbox's limit of ${limitBytes.toLocaleString('en-US')} bytes (${Math.floor(limitBytes / 1024)} KiB); nothing was sent`,
    { hint: 'put long text in a file in the workspace and tell the agent to read it' });
}

/** Checks a person's message against the inbox's limit and publishes it on the person channel (PubAck: it is in the inbox). */
export async function sendAsPerson(rt: Pick<Runtime, 'bus'>, msg: InboxMessage): Promise<void> {
  checkMessageSize(msg, inboxLimitBytes(rt));
  await publishInbox(await rt.bus.person(), msg, 'person');
}
