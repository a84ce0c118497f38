import type { ActorEvent, TurnOutcome } from '../protocol/events.js';
import { continuationPending, type Projection } from '../store/projection.js';

// The one answer to "what is this agent doing?" that every client gives: the CLI (`runs`, `tree`,
// `send`), the gateway's reads and the page all call these, so the same log reads the same
// everywhere. Only protocol and projection types and the projection's pure helpers come in: the
// page bundles this file for the browser.

/**
 * What an agent is doing, as its log says (design §11: clients never guess): `running` with a
 * turn open or a task received and not yet started, `waiting` once it committed `actor/parked`
 * (a person must answer), the outcome of its last turn once that ended, `idle` before any.
 */
export type ClientStatus = 'idle' | 'running' | 'waiting' | TurnOutcome;

/**
 * What one agent of a tree is doing: `statusOf`'s statuses, `starting` for a child its parent
 * spawned whose log has no turn yet, `killed` while its log's last word is a death, `recovering`
 * while a new incarnation takes over from one that died, `released` when its incarnation let it
 * go on purpose with work open and nothing runs it until a host or `resume` takes it.
 */
export type TreeStatus = ClientStatus | 'starting' | 'killed' | 'recovering' | 'released';

/** The status of an agent whose log folds to `p` (its last turn's, without what only the last event says). */
export function statusOf(p: Projection): ClientStatus {
  if (p.parked) return 'waiting';
  if (p.openTurn) return 'running';
  if (startsTurn(p) && !p.stopped) return 'running';
  return p.lastTurn?.outcome ?? 'idle';
}

/**
 * The status of an agent whose log folds to `p` and whose last event is of type `lastType`:
 * what every client shows. `statusOf`, and what it cannot say alone — a death or a recovery in
 * progress, work let go, a child whose task is not started yet, a goal that owes its next turn.
 */
export function agentStatus(p: Projection, lastType: ActorEvent['type'] | null): TreeStatus {
  if (lastType === 'actor/killed') return 'killed';
  if (p.openTurn && lastType === 'actor/rehydrated') return 'recovering';
  // a release keeps a wait: a person's answer brings a host
  if (p.parked) return 'waiting';
  const taskPending = !p.stopped && Object.values(p.inbox).some((i) => i.state === 'pending' && i.kind === 'subagent_task');
  if (p.released && (p.openTurn || (startsTurn(p) && !p.stopped) || taskPending || continuationPending(p))) return 'released';
  const status = statusOf(p);
  if (status === 'running') return status;
  if (continuationPending(p)) return 'running';
  if (taskPending) return p.turns === 0 ? 'starting' : 'running';
  return status;
}

/** True while more happens to the agent: it runs, starts, recovers from a death, or waits on a person (work let go waits for a command). */
export function isBusy(status: TreeStatus): boolean {
  return status === 'running' || status === 'starting' || status === 'recovering' || status === 'waiting' || status === 'killed';
}

/** A task or follow-up received and not taken by a turn yet. */
function startsTurn(p: Projection): boolean {
  return Object.values(p.inbox).some((i) => i.state === 'pending' && (i.kind === 'user_message' || i.kind === 'follow_up'));
}

/**
 * Whether a root whose status is `rootStatus` and whose log folds to `root` is running only
 * because it waits on its children: a `wait_agents` call open and no model attempt open. Then what
 * its run is doing is what its children are doing (`runStatus`).
 */
export function waitsOnChildren(rootStatus: TreeStatus, root: Pick<Projection, 'waits' | 'openAttempt'>): boolean {
  return rootStatus === 'running' && Object.keys(root.waits ?? {}).length > 0 && !root.openAttempt;
}

/**
 * A run's status (`actorloop runs`, the gateway's runs list, the page): its root's, but `waiting`
 * when the root only waits on its children (`waitsOnChildren`) and one of them waits on a person:
 * the run goes on when someone answers, not by itself. `children` are the statuses of the tree's
 * other actors (a reader that must fetch them may ask `waitsOnChildren` first whether they matter).
 */
export function runStatus(rootStatus: TreeStatus, root: Pick<Projection, 'waits' | 'openAttempt'>, children: Iterable<TreeStatus>): TreeStatus {
  if (!waitsOnChildren(rootStatus, root)) return rootStatus;
  for (const s of children) if (s === 'waiting') return 'waiting';
  return rootStatus;
}
