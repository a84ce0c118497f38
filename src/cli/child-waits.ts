import { followTree } from '../client/follower.js';
import type { LogReader } from '../store/log-port.js';
import type { Projection } from '../store/projection.js';
import { describeApproval } from './commands/approvals.js';
import { answerCommands } from './commands/pending-approvals.js';
import { answerCommandsFor, describeQuestion } from './commands/questions.js';
import type { WhereConfig } from './hints.js';
import { terminalText } from './terminal-text.js';

// A subagent that needs a person (an approval, a question) parks on its own log, which the
// command following its root does not print (design §6b: the operator talks to the root). This
// watch reads the tree beside it and says which subagent waits, on what, and the command that
// answers it: the answer goes to the subagent by its own ID, wherever it is hosted.

/** What `watchChildWaits` needs. */
export interface ChildWaitsOptions {
  reader: Pick<LogReader, 'read' | 'readTree' | 'followTree'>;
  /** Where the printed commands reach (this command's --data-dir and --nats). */
  config: WhereConfig;
  rootId: string;
  /** The agent the command follows: waits of its descendants are said. */
  actorId: string;
  /** Says one wait, its lines together. */
  say: (lines: string[]) => void;
  /** Ends the watch. */
  signal: AbortSignal;
}

/** The lines that say a subagent waits for a person, with the commands that answer it (empty: it does not). */
export function childWaitLines(config: WhereConfig, childId: string, name: string, p: Projection, said: Set<string>): string[] {
  if (!p.parked || !p.openTurn) return [];
  const who = `subagent ${terminalText(name)} (${childId})`;
  const lines: string[] = [];
  for (const id of p.parked.ids) {
    if (said.has(id)) continue;
    if (p.parked.waitingFor === 'approval') {
      const a = p.approvals?.[id];
      if (a?.state !== 'pending') continue;
      const c = answerCommands(config, childId, id);
      lines.push(`${who} needs approval ${id}`, ...describeApproval(id, a).map((l) => `  ${l}`), `approve: ${c.approve}`, `deny:    ${c.deny}`);
    } else {
      const q = p.questions?.[id];
      if (q?.state !== 'pending') continue;
      lines.push(`${who} asks question ${id}`, ...describeQuestion(id, q).map((l) => `  ${l}`), ...answerCommandsFor(config, childId, id, q).map((c) => `answer: ${c}`));
    }
    said.add(id);
  }
  return lines;
}

/**
 * Watches the tree of `rootId` until `signal` aborts and says each wait for a person of a
 * descendant of `actorId`: those open as the watch starts, then each `actor/parked` as it is
 * committed. Each approval or question is said once. Never throws: it is beside the command's own
 * following, and a tree it cannot read costs only these lines.
 */
export async function watchChildWaits(o: ChildWaitsOptions): Promise<void> {
  const parents = new Map<string, string>();
  const names = new Map<string, string>();
  const projections = new Map<string, Projection>();
  const said = new Set<string>();
  const below = (id: string): boolean => {
    // spawn records come before any event of the child: its chain of parents is known by then
    for (let at = parents.get(id); at !== undefined; at = parents.get(at)) if (at === o.actorId) return true;
    return false;
  };
  const sayOf = (actorId: string, p: Projection): void => {
    if (!below(actorId)) return;
    const lines = childWaitLines(o.config, actorId, names.get(actorId) ?? p.parentLink?.name ?? actorId, p, said);
    if (lines.length > 0) o.say(lines);
  };
  try {
    let last = 0;
    // what was asked and answered before this command came is not news: only what still waits
    for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections })) {
      if (e.event.type === 'subagent/spawn_requested') {
        parents.set(e.event.data.childId, e.actorId);
        names.set(e.event.data.childId, e.event.data.name);
      }
      last = e.streamSeq;
    }
    if (o.signal.aborted) return;
    for (const [actorId, p] of projections) sayOf(actorId, p);
    for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections, afterStreamSeq: Math.max(0, last - 1), signal: o.signal })) {
      if (e.event.type === 'subagent/spawn_requested') {
        parents.set(e.event.data.childId, e.actorId);
        names.set(e.event.data.childId, e.event.data.name);
      }
      if (e.event.type === 'actor/parked') sayOf(e.actorId, e.projection);
    }
  } catch {
    // the connection closing under a read as the command ends, or a log it cannot read
  }
}
