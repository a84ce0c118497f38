import type { Violation } from '../../verify/verify.js';
import type { ActorEvent } from '../../protocol/events.js';

/** The file a chaos scenario's effectful calls append to, in the root of the run's workspace. */
export const EFFECT_FILE = 'effects.log';

/** How one tool call ended, as far as the log says. */
type CallEnd = 'ok' | 'error' | 'outcome_unknown' | 'cancelled' | 'denied' | null;

interface LoggedCall {
  callId: string;
  name: string;
  /** Seq of its `tool/call`, for violations that point at it. */
  seq: number;
  /** Every string in its arguments: a line of the effect file is the call's when one of them holds it. */
  strings: string[];
  started: boolean;
  end: CallEnd;
}

function stringsOf(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsOf(v, into);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) stringsOf(v, into);
  return into;
}

function argumentStrings(raw: string): string[] {
  try {
    return stringsOf(JSON.parse(raw));
  } catch {
    // arguments that are not JSON never pass validation, so such a call never starts anyway
    return [raw];
  }
}

function callsOf(events: readonly ActorEvent[]): Map<string, LoggedCall> {
  const calls = new Map<string, LoggedCall>();
  for (const e of events) {
    if (e.call === undefined) continue;
    if (e.type === 'tool/call') {
      calls.set(e.call, { callId: e.call, name: e.data.name, seq: e.seq, strings: argumentStrings(e.data.arguments), started: false, end: null });
      continue;
    }
    const call = calls.get(e.call);
    if (!call) continue;
    if (e.type === 'tool/start') call.started = true;
    else if (e.type === 'tool/result') call.end = e.data.ok ? 'ok' : 'error';
    else if (e.type === 'tool/outcome_unknown') call.end = 'outcome_unknown';
    else if (e.type === 'tool/cancelled') call.end = 'cancelled';
    else if (e.type === 'tool/denied') call.end = 'denied';
  }
  return calls;
}

/** The lines of an effect file (null: the file does not exist), without the empty last one. */
export function effectLines(text: string | null): string[] {
  if (text === null || text === '') return [];
  return text.replace(/\n$/, '').split('\n');
}

/**
 * Checks a scenario's effect file against its log (design §7: an effectful tool never starts
 * twice for one call, and no effect happens without a committed `tool/start`). A line belongs
 * to the calls whose arguments contain it. Violations:
 * - `effect.duplicate`: a line appears more often than calls that write it started. A call the
 *   log closed as `tool/outcome_unknown` does not excuse a duplicate: that outcome says the call
 *   ran at most once and nobody knows whether; only a second call (the model asking again)
 *   may write the line again.
 * - `effect.without_start`: a line no started call writes (an effect with no `tool/start`).
 * - `effect.lost` (with `expected`, the lines a clean run wrote): a call the log says succeeded
 *   left its line out of the file.
 */
export function checkEffects(text: string | null, events: readonly ActorEvent[], expected: readonly string[] = []): Violation[] {
  const found: Violation[] = [];
  const calls = [...callsOf(events).values()];
  const counts = new Map<string, number>();
  for (const line of effectLines(text)) counts.set(line, (counts.get(line) ?? 0) + 1);
  const writers = (line: string): LoggedCall[] => calls.filter((c) => c.strings.some((s) => s.includes(line)));
  const ids = (cs: LoggedCall[]): string => cs.map((c) => `${c.name} ${c.callId} (${c.end ?? 'open'})`).join(', ');

  for (const [line, n] of counts) {
    if (line.trim() === '') continue;
    const all = writers(line);
    const started = all.filter((c) => c.started);
    if (started.length === 0) {
      found.push({
        code: 'effect.without_start',
        seq: all[0]?.seq ?? null,
        message: `${EFFECT_FILE} holds "${line}", but no call that writes it has a committed tool/start${all.length ? ` (${ids(all)})` : ''}`,
      });
    } else if (n > started.length) {
      const unknown = started.some((c) => c.end === 'outcome_unknown');
      found.push({
        code: 'effect.duplicate',
        seq: started[0]!.seq,
        message:
          `${EFFECT_FILE} holds "${line}" ${n} times, but only ${started.length} call(s) that write it started: ${ids(started)}` +
          (unknown ? '; outcome_unknown allows at most one run, not a second' : ''),
      });
    }
  }
  for (const line of new Set(expected)) {
    const succeeded = writers(line).filter((c) => c.end === 'ok');
    const n = counts.get(line) ?? 0;
    if (n < succeeded.length) {
      found.push({
        code: 'effect.lost',
        seq: succeeded[0]!.seq,
        message: `${succeeded.length} call(s) that write "${line}" ended with a successful tool/result (${ids(succeeded)}), but ${EFFECT_FILE} holds it ${n} time(s)`,
      });
    }
  }
  return found.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
}
