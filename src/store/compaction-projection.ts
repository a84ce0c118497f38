import type { ActorEvent, EventData } from '../protocol/events.js';
import type { OpenCall, Projection } from './projection.js';

// What compaction needs of the log, folded as it goes (design §10): the history revision a
// checkpoint's commit is checked against, the facts every checkpoint must keep (the user's
// corrections, the files changed, the verifications, the calls whose outcome is unknown), the
// compaction in progress and the checkpoints committed. Plain JSON: it rides in the snapshot.

/** A committed checkpoint as the projection keeps it (its text is the history item it became). */
export interface CheckpointRecord {
  id: string;
  range: { from: number; to: number };
  digest: string;
  tokensBefore: number;
  tokensAfter: number;
  kept: string[];
  /** The seq of its `checkpoint/committed`. */
  seq: number;
  /** The history index its text sits at now (a later checkpoint that compacted it again: null). */
  at: number | null;
}

/** Compaction's part of the projection (made on first use). */
export interface CompactionState {
  /**
   * One more with every change of the closed history (a user message, a step closed, a checkpoint)
   * or of what a checkpoint must keep (a steer or inject arriving): a candidate is committed only
   * while the revision it was made from holds. Tail events (`request/prepared`, a message's
   * inclusion) do not change it.
   */
  historyRevision: number;
  /** The session's task: its first user message (a fork's transcript aside). */
  task: string | null;
  /** What the user said after the task (messages, steers, injects, follow-ups), oldest first. */
  corrections: string[];
  /** Paths the agent's file tools changed, in the order first changed. */
  files: string[];
  /** Verification commands run, with whether the last run passed. */
  verifications: Record<string, boolean>;
  /** Calls whose outcome is unknown and not reconciled since. */
  unknown: Array<{ callId: string; tool: string; reason: string }>;
  /** The latest failed tool result (its first `ERROR_MAX_CHARS` characters); absent: none failed. */
  latestError?: { tool: string; callId: string; text: string };
  /** The compaction started and neither committed nor rejected yet. */
  open: (EventData<'compaction/started'> & { seq: number }) | null;
  checkpoints: CheckpointRecord[];
  /** Compaction attempts that returned a summary: the scripted model's place in its `summaries`. */
  summaries: number;
  /** A person's `compact` message not acted on yet. */
  asked: string | null;
  /** The open step's request revision: one more with every checkpoint committed within it. */
  requestRevision: number;
  /** The open step's last model attempt ended `overflow` (the provider refused it) and no checkpoint was committed since. */
  overflowed: boolean;
  /** What the provider said when it refused it (absent: it said nothing, or nothing was refused). */
  refusal?: string;
  /** Candidates of the open step rejected on a conflict (the history changed while they were made). */
  conflicts: number;
  /** Summary attempts of the open compaction so far. */
  attempts?: number;
  /** When the open compaction's next summary attempt may start (a retryable failure's backoff), ms since epoch. */
  retryAt?: number;
}

/** A failed result's text is kept up to this many characters. */
export const ERROR_MAX_CHARS = 2_000;

/** Corrections are kept whole up to this many characters each (the checkpoint's lines say so). */
export const CORRECTION_MAX_CHARS = 2_000;

// the kinds of a person's word after the task
const SAID_KINDS: ReadonlySet<string> = new Set(['user_message', 'steer', 'inject', 'follow_up']);
const WRITE_TOOLS: ReadonlySet<string> = new Set(['write_file', 'apply_patch']);

/** The compaction state, made on first use. */
export function compactionState(p: Projection): CompactionState {
  return (p.compaction ??= {
    historyRevision: 0,
    task: null,
    corrections: [],
    files: [],
    verifications: {},
    unknown: [],
    open: null,
    checkpoints: [],
    summaries: 0,
    asked: null,
    requestRevision: 1,
    overflowed: false,
    conflicts: 0,
  });
}

/**
 * Folds one event, in place, before the projection's own fold of it (it reads the open step's
 * call and the inbox item an event names as they were). O(size of the event).
 */
export function foldCompaction(p: Projection, e: ActorEvent): void {
  switch (e.type) {
    case 'inbox/received':
      if (e.data.kind === 'compact') compactionState(p).asked = e.data.messageId;
      else if (e.data.kind === 'steer' || e.data.kind === 'inject') compactionState(p).historyRevision += 1;
      break;
    case 'user/message': {
      const c = compactionState(p);
      c.historyRevision += 1;
      if (e.data.messageId.endsWith('#fork')) break;
      if (c.task === null) c.task = e.data.content;
      else if (SAID_KINDS.has(p.inbox[e.data.messageId]?.kind ?? '')) c.corrections.push(e.data.content.slice(0, CORRECTION_MAX_CHARS));
      break;
    }
    case 'step/start': {
      const c = p.compaction;
      if (c) {
        c.requestRevision = 1;
        c.overflowed = false;
        delete c.refusal;
        c.conflicts = 0;
      }
      break;
    }
    case 'step/end':
      compactionState(p).historyRevision += 1;
      break;
    case 'tool/result': {
      const call = openCall(p, e.call);
      if (!call) break;
      const c = compactionState(p);
      dropUnknown(c, e.call);
      if (!e.data.ok) c.latestError = { tool: call.name, callId: e.call!, text: e.data.output.slice(0, ERROR_MAX_CHARS) };
      if (e.data.ok && WRITE_TOOLS.has(call.name)) for (const path of writtenPaths(call)) if (!c.files.includes(path)) c.files.push(path);
      if (call.verifies) {
        const command = commandOf(call);
        if (command !== null) c.verifications[command] = e.data.ok;
      }
      break;
    }
    case 'tool/outcome_unknown': {
      const call = openCall(p, e.call);
      const c = compactionState(p);
      dropUnknown(c, e.call);
      c.unknown.push({ callId: e.call!, tool: call?.name ?? 'tool', reason: e.data.reason });
      break;
    }
    case 'tool/reconciled':
      if (e.data.verdict !== 'unknown' && p.compaction) dropUnknown(p.compaction, e.call);
      break;
    case 'tool/cancelled':
      if (p.compaction) dropUnknown(p.compaction, e.call);
      break;
    case 'attempt/start':
      if (e.data.kind === 'compaction') compactionState(p).attempts = (p.compaction?.attempts ?? 0) + 1;
      break;
    case 'compaction/started': {
      const c = compactionState(p);
      c.open = { ...e.data, seq: e.seq };
      c.attempts = 0;
      delete c.retryAt;
      if (e.data.messageId !== undefined && c.asked === e.data.messageId) c.asked = null;
      break;
    }
    case 'attempt/end':
      if (p.openAttempt?.kind === 'compaction') {
        const c = compactionState(p);
        if (e.data.outcome === 'succeeded') c.summaries += 1;
        if (e.data.backoffMs !== null) c.retryAt = Date.parse(e.at) + e.data.backoffMs;
        else delete c.retryAt;
      } else if (e.data.outcome === 'overflow') {
        const c = compactionState(p);
        c.overflowed = true;
        if (e.data.error) c.refusal = e.data.error.message;
      }
      break;
    case 'checkpoint/committed': {
      const c = compactionState(p);
      const { from, to } = e.data.range;
      p.history.splice(from, to - from, { role: 'user', content: e.data.text });
      // checkpoints inside the range are compacted into this one; those after it move up
      for (const k of c.checkpoints) {
        if (k.at === null) continue;
        if (k.at >= from && k.at < to) k.at = null;
        else if (k.at >= to) k.at -= to - from - 1;
      }
      c.checkpoints.push({ id: e.data.id, range: e.data.range, digest: e.data.digest, tokensBefore: e.data.tokensBefore, tokensAfter: e.data.tokensAfter, kept: e.data.kept, seq: e.seq, at: from });
      c.open = null;
      c.overflowed = false;
      delete c.refusal;
      c.historyRevision += 1;
      c.requestRevision += 1;
      break;
    }
    case 'compaction/rejected': {
      const c = compactionState(p);
      c.open = null;
      if (e.data.reason === 'conflict') c.conflicts += 1;
      if (e.data.messageId !== undefined && c.asked === e.data.messageId) c.asked = null;
      break;
    }
    default:
      break;
  }
}

function openCall(p: Projection, callId: string | undefined): OpenCall | null {
  return callId === undefined ? null : (p.pending.calls.find((c) => c.callId === callId) ?? null);
}

function dropUnknown(c: CompactionState, callId: string | undefined): void {
  if (c.unknown.length > 0) c.unknown = c.unknown.filter((u) => u.callId !== callId);
}

function argsOf(call: OpenCall): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(call.arguments);
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The paths a successful file write named: `write_file`'s path, the files of `apply_patch`'s patch. */
export function writtenPaths(call: Pick<OpenCall, 'name' | 'arguments'>): string[] {
  const a = argsOf(call as OpenCall);
  if (call.name === 'write_file') return typeof a['path'] === 'string' && a['path'] !== '' ? [a['path']] : [];
  if (call.name === 'apply_patch' && typeof a['patch'] === 'string') {
    const paths = new Set<string>();
    for (const m of a['patch'].matchAll(/^(?:\+\+\+|---) (?:[ab]\/)?(\S+)/gm)) if (m[1] !== '/dev/null') paths.add(m[1]!);
    return [...paths];
  }
  return [];
}

function commandOf(call: OpenCall): string | null {
  const a = argsOf(call);
  const c = a['command'] ?? a['cmd'];
  if (typeof c === 'string') return c;
  if (Array.isArray(c) && c.every((x) => typeof x === 'string')) return c.join(' ');
  return null;
}
