import { z } from 'zod';
import { StoreError, STORE_CODES } from '../protocol/errors.js';
import { CommitSchema, type ActorEvent } from '../protocol/events.js';

/**
 * How a commit is stored: one JSON message. The fields every event of a commit shares — schema
 * version, actor, epoch, consecutive seqs, and most often the time and the turn and step — are
 * written once in the commit rather than in each event. Decoding gives back the full events, so
 * nothing above the store sees the difference. A tool step's commits shrink by about a third,
 * which is bytes the server writes and keeps for ever and a reader reads on every rehydrate.
 *
 * Shape: `{ c: 2, v, actor, epoch, seq, at, turn?, step?, events: [...] }`. In an event, a
 * missing `at`, `turn` or `step` is the commit's; `turn: null` or `step: null` means the event
 * has none (the commit names one). Commits written as `{ events: [full events] }` (the first
 * format) decode as before.
 */
export const COMMIT_FORMAT = 2;

const CompactSchema = z.object({
  c: z.literal(COMMIT_FORMAT),
  v: z.number().int().positive(),
  actor: z.string(),
  epoch: z.number().int().nonnegative(),
  seq: z.number().int().positive(),
  at: z.string(),
  turn: z.string().optional(),
  step: z.string().optional(),
  events: z.array(z.record(z.string(), z.unknown())).min(1),
});

type Shared = 'turn' | 'step';

/** The value most events of the commit have for `key` (undefined when most have none); the first wins a tie. */
function common(events: ActorEvent[], key: Shared | 'at'): string | undefined {
  // a commit holds a handful of events: counting pairwise allocates nothing
  let best: string | undefined;
  let bestCount = 0;
  for (let i = 0; i < events.length; i++) {
    const value = events[i]![key];
    let n = 0;
    for (let k = i; k < events.length; k++) if (events[k]![key] === value) n++;
    if (n > bestCount) {
      best = value;
      bestCount = n;
    }
  }
  return best;
}

/** Encodes stamped, validated events (one actor, one epoch, consecutive seqs) as one commit. */
export function encodeCommit(events: ActorEvent[]): string {
  const first = events[0]!;
  const at = common(events, 'at')!;
  const turn = common(events, 'turn');
  const step = common(events, 'step');
  const out: Record<string, unknown>[] = [];
  for (const e of events) {
    // Field by field (the envelope's fields are fixed): an object rest or a literal that starts
    // with a spread is a slow path in Node 20's V8.
    const compact: Record<string, unknown> = { id: e.id, type: e.type };
    if (e.at !== at) compact['at'] = e.at;
    if (e.turn !== turn) compact['turn'] = e.turn ?? null;
    if (e.step !== step) compact['step'] = e.step ?? null;
    if (e.attempt !== undefined) compact['attempt'] = e.attempt;
    if (e.call !== undefined) compact['call'] = e.call;
    compact['data'] = e.data;
    out.push(compact);
  }
  return JSON.stringify({ c: COMMIT_FORMAT, v: first.v, actor: first.actor, epoch: first.epoch, seq: first.seq, at, turn, step, events: out });
}

/** What decoding found wrong: where in the message, and what. */
export interface CommitIssue {
  path: string;
  message: string;
}

/**
 * Decodes a parsed commit message (either format) into its events, validated by the event
 * schemas; returns the first issue instead when the message is not a valid commit.
 */
export function decodeCommitValue(raw: unknown): { events: ActorEvent[] } | { issue: CommitIssue } {
  let candidate: unknown = raw;
  if (typeof raw === 'object' && raw !== null && (raw as { c?: unknown }).c !== undefined) {
    const compact = CompactSchema.safeParse(raw);
    if (!compact.success) return { issue: issueOf(compact.error) };
    const h = compact.data;
    candidate = {
      events: h.events.map((e, i) => {
        const full: Record<string, unknown> = { v: h.v, seq: h.seq + i, at: h.at, epoch: h.epoch, actor: h.actor };
        if (h.turn !== undefined) full['turn'] = h.turn;
        if (h.step !== undefined) full['step'] = h.step;
        for (const key of Object.keys(e)) {
          const value = e[key];
          if ((key === 'turn' || key === 'step') && value === null) delete full[key];
          else full[key] = value;
        }
        return full;
      }),
    };
  }
  const parsed = CommitSchema.safeParse(candidate);
  if (!parsed.success) return { issue: issueOf(parsed.error) };
  return { events: parsed.data.events as ActorEvent[] };
}

function issueOf(error: z.ZodError): CommitIssue {
  const issue = error.issues[0];
  return { path: issue?.path.join('.') || '(root)', message: issue?.message ?? 'invalid' };
}

/** Decodes one commit message, validating every event; throws `store.invalid_event` naming the stream seq. */
export function decodeCommit(data: Uint8Array, streamSeq: number, actorId?: string): ActorEvent[] {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch (err) {
    throw new StoreError(STORE_CODES.invalidEvent, `log message at stream seq ${streamSeq} is not JSON`, { cause: err });
  }
  const decoded = decodeCommitValue(raw);
  if ('issue' in decoded) {
    throw new StoreError(STORE_CODES.invalidEvent,
      `log message at stream seq ${streamSeq} is not a valid commit: ${decoded.issue.path}: ${decoded.issue.message}`);
  }
  const events = decoded.events;
  if (actorId !== undefined && events.some((e) => e.actor !== actorId)) {
    throw new StoreError(STORE_CODES.invalidEvent, `log message at stream seq ${streamSeq} holds events of another actor`);
  }
  return events;
}
