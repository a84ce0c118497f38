import { publishInbox } from '../bus/inbox.js';
import { parseInboxInput } from '../bus/inbox-port.js';
import { INBOX_MAX_MSG_BYTES } from '../bus/streams.js';
import { ConfigError } from '../protocol/errors.js';
import { newId } from '../protocol/ids.js';
import type { TurnRequest } from '../protocol/events.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { Runtime } from './runtime.js';

/** What a person's text can be sent as (design §6): into the running turn, or as a turn of its own. */
export type TextKind = 'steer' | 'inject' | 'follow_up' | 'user_message';

/** Where each kind lands and whether it wakes the agent (design §6, "Kinds of message"). */
const ROUTE: Record<TextKind, Pick<InboxMessage, 'target' | 'wakeup'>> = {
  steer: { target: 'next_step', wakeup: true },
  inject: { target: 'next_step', wakeup: false },
  follow_up: { target: 'next_turn', wakeup: true },
  user_message: { target: 'next_turn', wakeup: true },
};

/** How a kind is named to a person (the flag that sends it). */
export function kindLabel(kind: string): string {
  return kind === 'follow_up' ? 'follow-up' : kind === 'user_message' ? 'message' : kind;
}

/**
 * A person's text for an agent's inbox. `request` is null: a turn it starts takes the settings of
 * the agent's last turn (`resolveSettings`), as a follow-up does; a task's settings are `run`'s to set.
 */
export function textMessage(agentId: string, kind: TextKind, text: string): InboxMessage {
  return {
    id: newId('message'),
    from: CLI_SENDER,
    to: agentId,
    kind,
    ...ROUTE[kind],
    content: text,
    request: null,
    sentAt: new Date().toISOString(),
  };
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

/** Who every message of a person's command comes from: only client commands may answer approvals. */
export const CLI_SENDER = 'client:cli';

/**
 * The message that carries the next task, with its settings (only a person's message may carry
 * them): to an idle agent the task of its next turn, as `run`'s is; to one in a turn, a follow-up
 * it takes when that turn ends.
 */
export function nextTaskMessage(agentId: string, task: string, request: TurnRequest, busy: boolean): InboxMessage {
  return {
    id: newId('message'),
    from: CLI_SENDER,
    to: agentId,
    kind: busy ? 'follow_up' : 'user_message',
    target: 'next_turn',
    wakeup: true,
    content: task,
    request,
    sentAt: new Date().toISOString(),
  };
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
