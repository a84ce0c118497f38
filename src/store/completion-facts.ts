import type { ActorEvent } from '../protocol/events.js';
import { evidenceKey, searchHitPaths } from '../protocol/completion.js';

// What the completion policy decides on, folded from the log (tool/call, policy/decided,
// tool/start and the ends of calls), so a rehydrated agent and `verify` decide exactly as the
// incarnation that was running did. Plain JSON: it rides in the projection's snapshot.

/** Completion facts of a session (evidence) and of its open turn (changes, verifications, refusals). */
export interface CompletionFacts {
  /** Evidence keys (`evidenceKey`) the session retrieved: files read, search hits, artifacts. */
  evidence: Record<string, true>;
  /** Seq of the last event after which files may have changed in the open turn; null: none. */
  changedAt: number | null;
  /** The latest `tool/start` seq of a verification of the open turn that passed; null: none. */
  verifiedFrom: number | null;
  /** Answers the completion policy refused in the open turn. */
  rejections: number;
}

/** What the fold needs of a call of the open step (the projection's `OpenCall` has it). */
export interface FactCall {
  name: string;
  arguments: string;
  effects: 'none' | 'possible' | null;
  started: boolean;
  /** Its plan is a verification (policy/decided said so). */
  verifies?: boolean;
  /** Seq of its last `tool/start`. */
  startedAt?: number;
}

// File tools that refuse before they write: a failed result of theirs changed nothing. Any other
// tool with possible effects (shell above all) may have changed files whatever its result says.
const WRITES_ON_SUCCESS_ONLY = new Set(['write_file', 'apply_patch']);

/** Empty facts: a session that retrieved nothing and changed nothing. */
export function emptyFacts(): CompletionFacts {
  return { evidence: {}, changedAt: null, verifiedFrom: null, rejections: 0 };
}

/**
 * Folds one event into the facts, in place. `call` is the open step's call the event names (null
 * when none), `workspace` the open turn's, for evidence keys. O(size of the event).
 */
export function foldFacts(f: CompletionFacts, e: ActorEvent, call: FactCall | null, workspace: string): void {
  switch (e.type) {
    case 'turn/start':
      f.changedAt = null;
      f.verifiedFrom = null;
      f.rejections = 0;
      break;
    case 'completion/rejected':
      f.rejections += 1;
      break;
    case 'tool/result': {
      if (e.data.artifact) f.evidence[e.data.artifact.id] = true;
      if (!call) break;
      if (e.data.ok) for (const key of retrieved(call, e.data.output, workspace)) f.evidence[key] = true;
      if (call.verifies) {
        if (e.data.ok) f.verifiedFrom = Math.max(f.verifiedFrom ?? 0, call.startedAt ?? e.seq);
      } else if (call.effects === 'possible' && (e.data.ok || !WRITES_ON_SUCCESS_ONLY.has(call.name))) {
        f.changedAt = e.seq;
      }
      break;
    }
    // an effectful call that ended without a result may have done anything before it stopped
    case 'tool/outcome_unknown':
      if (call?.effects === 'possible') f.changedAt = e.seq;
      break;
    case 'tool/cancelled':
      if (call?.effects === 'possible' && call.started && !call.verifies) f.changedAt = e.seq;
      break;
    default:
      break;
  }
}

/** The evidence keys a successful call retrieved. */
function retrieved(call: FactCall, output: string, workspace: string): string[] {
  switch (call.name) {
    case 'read_file': {
      const path = argument(call.arguments, 'path');
      return path === null ? [] : [evidenceKey(path, workspace)];
    }
    case 'search':
      return searchHitPaths(output).map((p) => evidenceKey(p, workspace));
    case 'artifact_read': {
      const id = argument(call.arguments, 'id');
      return id === null ? [] : [evidenceKey(id, workspace)];
    }
    default:
      return [];
  }
}

function argument(raw: string, key: string): string | null {
  try {
    const v = (JSON.parse(raw) as Record<string, unknown>)[key];
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

/** Whether the open turn changed files after its last passing verification (or with none). */
export function unverifiedChange(f: CompletionFacts): boolean {
  return f.changedAt !== null && (f.verifiedFrom === null || f.verifiedFrom <= f.changedAt);
}
