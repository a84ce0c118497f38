import { parseInboxInput } from '../bus/inbox-port.js';
import { ConfigError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';

// A message the inbox would refuse is refused before it is published, with what to do instead:
// every client's send checks it here.

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
