import { followTree } from '../client/follower.js';
import type { LogReader } from '../store/log-port.js';
import type { Projection } from '../store/projection.js';
import type { ActorEvent } from '../protocol/events.js';
import { answerCommands, describeApproval } from './turn/approval-prompt.js';
import { answerCommandsFor, describeQuestion } from './turn/question-prompt.js';
import type { WhereConfig } from './hints.js';
import { terminalText } from '../client/terminal-text.js';

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
  /**
   * Called once the followed agent's whole tree can do nothing but wait for a person: a
   * descendant parked for one, and every agent with a turn open parked too or waiting only on its
   * children. With the descendant's `actor/parked`.
   */
  onStuck?: (parked: ActorEvent) => void;
}

/**
 * True when no agent of the tree under `actorId` can go on without a person: one is parked for
 * one, and every other agent with a turn open is parked or waits only on children (each open
 * call a wait, no attempt streaming), and no child it spawned is still starting.
 */
export function treeWaitsForPerson(actorId: string, projections: ReadonlyMap<string, Projection>, below: (id: string) => boolean): boolean {
  let parked = false;
  for (const [id, p] of projections) {
    if (id !== actorId && !below(id)) continue;
    for (const [childId, c] of Object.entries(p.children ?? {})) {
      if ((c.state === 'requested' || c.state === 'spawned') && !projections.get(childId)?.openTurn && !projections.get(childId)?.parked) return false;
    }
    if (!p.openTurn) continue;
    if (p.parked) {
      if (id !== actorId) parked = true;
      continue;
    }
    if (p.openAttempt) return false;
    const open = p.pending.calls.filter((c) => c.observation === null);
    if (open.length === 0 || !open.every((c) => p.waits?.[c.callId] !== undefined)) return false;
  }
  return parked;
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
    const lastParked = new Map<string, ActorEvent>();
    for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections })) {
      if (e.event.type === 'subagent/spawn_requested') {
        parents.set(e.event.data.childId, e.actorId);
        names.set(e.event.data.childId, e.event.data.name);
      }
      if (e.event.type === 'actor/parked') lastParked.set(e.actorId, e.event);
      last = e.streamSeq;
    }
    if (o.signal.aborted) return;
    for (const [actorId, p] of projections) sayOf(actorId, p);
    // parked before this command came, with nothing else of the tree able to go on
    if (o.onStuck && treeWaitsForPerson(o.actorId, projections, below)) {
      const parkedEvent = lastParked.get([...projections.keys()].find((id) => below(id) && projections.get(id)?.parked) ?? '');
      if (parkedEvent) o.onStuck(parkedEvent);
    }
    for await (const e of followTree({ reader: o.reader, rootId: o.rootId, projections, afterStreamSeq: Math.max(0, last - 1), signal: o.signal })) {
      if (e.event.type === 'subagent/spawn_requested') {
        parents.set(e.event.data.childId, e.actorId);
        names.set(e.event.data.childId, e.event.data.name);
      }
      if (e.event.type === 'actor/parked') {
        sayOf(e.actorId, e.projection);
        if (o.onStuck && below(e.actorId) && treeWaitsForPerson(o.actorId, projections, below)) o.onStuck(e.event);
      }
    }
  } catch {
    // the connection closing under a read as the command ends, or a log it cannot read
  }
}
