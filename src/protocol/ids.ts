import { createHash } from 'node:crypto';
import { monotonicFactory } from 'ulidx';
import { z } from 'zod';

/** Every kind of entity that has a stable, prefixed, sortable ID (design §3). */
export const ID_PREFIXES = {
  session: 'ses',
  agent: 'agt',
  job: 'job',
  turn: 'turn',
  step: 'step',
  attempt: 'att',
  call: 'call',
  message: 'msg',
  approval: 'apr',
  goal: 'goal',
  artifact: 'art',
  checkpoint: 'ckpt',
  event: 'evt',
} as const;

/** The kinds of ID actorloop makes. */
export type IdKind = keyof typeof ID_PREFIXES;

declare const brand: unique symbol;
/** A string that is known to be an ID of kind K. */
export type Id<K extends IdKind> = string & { readonly [brand]: K };

export type AgentId = Id<'agent'>;
export type TurnId = Id<'turn'>;
export type StepId = Id<'step'>;
export type AttemptId = Id<'attempt'>;
export type CallId = Id<'call'>;
export type MessageId = Id<'message'>;
export type EventId = Id<'event'>;

const ulid = monotonicFactory();
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** Draws a new ID of the given kind: `<prefix>_<ULID>`. */
export function newId<K extends IdKind>(kind: K, nowMs?: number): Id<K> {
  return `${ID_PREFIXES[kind]}_${ulid(nowMs)}` as Id<K>;
}

/**
 * Derives an ID from stable inputs, so it survives a retry (design §3): the same parts
 * always give the same ID. The body is 26 Crockford base32 characters of a SHA-256.
 */
export function derivedId<K extends IdKind>(kind: K, ...parts: string[]): Id<K> {
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  let out = '';
  for (let i = 0; i < 26; i++) out += CROCKFORD[digest[i]! & 31];
  return `${ID_PREFIXES[kind]}_${out}` as Id<K>;
}

const ID_BODY = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `value` is an ID of the given kind. */
export function isId<K extends IdKind>(kind: K, value: string): value is Id<K> {
  const prefix = `${ID_PREFIXES[kind]}_`;
  return value.startsWith(prefix) && ID_BODY.test(value.slice(prefix.length));
}

/** A zod schema that accepts only IDs of the given kind and brands them. */
export function idSchema<K extends IdKind>(kind: K) {
  return z
    .string()
    .refine((v) => isId(kind, v), { message: `expected an ID of the form ${ID_PREFIXES[kind]}_<ULID>` })
    .transform((v) => v as Id<K>);
}
