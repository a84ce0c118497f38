import { randomFillSync } from 'node:crypto';
import { sha256Bytes } from './canonical-json.js';
import { ConfigError } from './errors.js';
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
  /** A question `ask_user` asked a person: short, since a person types it into `actorloop answer`. */
  question: 'q',
  goal: 'goal',
  artifact: 'art',
  checkpoint: 'ckpt',
  /** A budget reservation: derived from its scope and what it reserves for, so a retried commit names the same one. */
  reservation: 'rsv',
  event: 'evt',
  /** A workflow run: an actor of its own, running a declared graph of nodes as jobs. */
  workflow: 'wf',
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

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

// Random bytes are drawn in pools: one crypto call per 256 IDs instead of one per character.
const pool = new Uint8Array(16 * 256);
let poolAt = pool.length;
let lastMs = -1;
const lastRandom = new Uint8Array(16);

function nextRandom(ms: number): Uint8Array {
  if (ms === lastMs) {
    // Monotonic within one millisecond: the random part counts up (base 32, 16 digits).
    for (let i = 15; i >= 0; i--) {
      if (lastRandom[i]! < 31) {
        lastRandom[i]! += 1;
        return lastRandom;
      }
      lastRandom[i] = 0;
    }
    return lastRandom; // 32^16 IDs in one millisecond: wrapped, still unique enough to never matter
  }
  if (poolAt >= pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  for (let i = 0; i < 16; i++) lastRandom[i] = pool[poolAt + i]! & 31;
  // Leave headroom so counting up within this millisecond cannot overflow the top digit.
  lastRandom[0] = lastRandom[0]! & 15;
  poolAt += 16;
  lastMs = ms;
  return lastRandom;
}

// An ID is written into this buffer and read out as one string: built a character at a time it
// cost ~30 short-lived strings (about 700 bytes of garbage) per ID, and a step draws a dozen.
const CODES = Uint8Array.from(CROCKFORD, (c) => c.charCodeAt(0));
const out = Buffer.alloc(32);
// The time part of the last ID, written once per millisecond.
const timeChars = new Uint8Array(10);
let timeMs = -1;

/** Writes the ULID of `nowMs` into `out` at `at`; returns where it ends. */
function writeUlid(nowMs: number, at: number): number {
  const ms = Math.max(nowMs, lastMs);
  if (ms !== timeMs) {
    let t = ms;
    for (let i = 9; i >= 0; i--) {
      timeChars[i] = CODES[t % 32]!;
      t = Math.floor(t / 32);
    }
    timeMs = ms;
  }
  out.set(timeChars, at);
  const r = nextRandom(ms);
  for (let i = 0; i < 16; i++) out[at + 10 + i] = CODES[r[i]!]!;
  return at + 26;
}

/** A ULID: 10 characters of millisecond time, 16 of randomness, monotonic within a millisecond. */
export function ulid(nowMs: number = Date.now()): string {
  return out.toString('latin1', 0, writeUlid(nowMs, 0));
}

const PREFIX_BYTES = Object.fromEntries(
  Object.entries(ID_PREFIXES).map(([kind, prefix]) => [kind, Buffer.from(`${prefix}_`, 'latin1')]),
) as Record<IdKind, Buffer>;

/** Draws a new ID of the given kind: `<prefix>_<ULID>`. */
export function newId<K extends IdKind>(kind: K, nowMs: number = Date.now()): Id<K> {
  const prefix = PREFIX_BYTES[kind];
  out.set(prefix, 0);
  return out.toString('latin1', 0, writeUlid(nowMs, prefix.length)) as Id<K>;
}

/**
 * Derives an ID from stable inputs, so it survives a retry (design §3): the same parts
 * always give the same ID. The body is 26 Crockford base32 characters of a SHA-256.
 */
export function derivedId<K extends IdKind>(kind: K, ...parts: string[]): Id<K> {
  const digest = sha256Bytes(parts.join('\u0000'));
  let out = '';
  for (let i = 0; i < 26; i++) out += CROCKFORD[digest[i]! & 31];
  return `${ID_PREFIXES[kind]}_${out}` as Id<K>;
}

const ID_BODY_LENGTH = 26;
const ID_BODY_PATTERN = `[0-9A-HJKMNP-TV-Z]{${ID_BODY_LENGTH}}`;
const ID_BODY = new RegExp(`^${ID_BODY_PATTERN}$`);

/** Stable codes of the ID check. */
export const ID_CODES = {
  /** An ID given from outside (a URL, an RPC, a command line) that is not of the form asked for. */
  bad: 'protocol.bad_id',
} as const;

/**
 * An ID given from outside that is not of the form its kind has (exit 2, HTTP 400, JSON-RPC
 * -32602): refused before it reaches the bus, where it would become a subject or a key.
 */
export class BadIdError extends ConfigError {
  constructor(readonly kind: IdKind, message: string) {
    super(ID_CODES.bad, message);
  }
}

/** What a person calls an ID of this kind, with its article: "an agent ID". */
function idLabel(kind: IdKind): string {
  return `${/^[aeiou]/.test(kind) ? 'an' : 'a'} ${kind} ID`;
}

/** `text` as an error quotes it: JSON-escaped (no control character reaches a terminal or a log line), a long one cut. */
function quoted(text: string): string {
  const cut = 40;
  return text.length <= cut ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, cut))}… (${text.length.toLocaleString('en-US')} characters)`;
}

/**
 * Why `text` is not an ID of the given kind, in one line for a person (the prefix expected, the
 * characters allowed, the length); null when it is one. Every ID the runtime makes, drawn or
 * derived, is `<prefix>_` and 26 Crockford base32 characters, so nothing else can name anything.
 */
export function idProblem(kind: IdKind, text: string): string | null {
  const prefix = `${ID_PREFIXES[kind]}_`;
  const form = `${idLabel(kind)} is ${prefix}<ULID>: ${ID_BODY_LENGTH} characters of 0-9 and A-Z but I, L, O and U`;
  const not = `${quoted(text)} is not ${idLabel(kind)}`;
  if (!text.startsWith(prefix)) return `${not}: it does not start with ${prefix} (${form})`;
  const body = text.slice(prefix.length);
  const why: string[] = [];
  const bad = [...body].find((c) => !CROCKFORD.includes(c));
  if (bad !== undefined) why.push(`it holds ${JSON.stringify(bad)}, which no ID holds`);
  if (body.length !== ID_BODY_LENGTH) {
    why.push(`${why.length > 0 ? 'has' : 'it has'} ${body.length.toLocaleString('en-US')} character${body.length === 1 ? '' : 's'} after ${prefix}, not ${ID_BODY_LENGTH}`);
  }
  return why.length > 0 ? `${not}: ${why.join(', and ')} (${form})` : null;
}

/** True when `value` is an ID of the given kind. */
export function isId<K extends IdKind>(kind: K, value: string): value is Id<K> {
  const prefix = `${ID_PREFIXES[kind]}_`;
  return value.startsWith(prefix) && ID_BODY.test(value.slice(prefix.length));
}

/**
 * The one check of an ID given from outside (the gateway's routes and methods, every command):
 * the branded ID, or a BadIdError saying what is wrong with it.
 */
export function parseId<K extends IdKind>(kind: K, text: string): Id<K> {
  if (isId(kind, text)) return text;
  throw new BadIdError(kind, idProblem(kind, text) ?? `${quoted(text)} is not ${idLabel(kind)}`);
}

/** A zod string that must be an ID of the given kind (the `parseId` check, its message the issue's); its type stays `string`, for wire schemas. */
export function idString(kind: IdKind) {
  const prefix = ID_PREFIXES[kind];
  return z.string().regex(new RegExp(`^${prefix}_${ID_BODY_PATTERN}$`), {
    error: (issue) => idProblem(kind, String(issue.input)) ?? `expected an ID of the form ${prefix}_<ULID>`,
  });
}

/** A zod schema that accepts only IDs of the given kind and brands them. */
export function idSchema<K extends IdKind>(kind: K) {
  return idString(kind).transform((v) => v as Id<K>);
}
