import type { AgentActor } from '../../actors/actor/agent-actor.js';
import type { TurnEnded } from '../../actors/actor/hosted-agent.js';
import type { Supervisor } from '../../actors/hosting/supervisor.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { EffectiveConfig } from '../../config/config.js';
import type { Projection } from '../../store/projection.js';
import type { Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import type { Runtime } from '../runtime.js';
import { promptFor } from './approval-prompt.js';
import { followTurn } from './follow-turn.js';

/** An agent rehydrated in this process, ready to be hosted to the end of its turn. */
export interface Hosted {
  rt: Runtime;
  supervisor: Supervisor;
  actor: AgentActor;
  recovered: boolean;
  /** Rejects when the actor stops on an error; never resolves. */
  failed: Promise<never>;
  printer: RunPrinter;
  /** True when commits are printed as they are made (a fault plan may kill this process right after one). */
  printsOnCommit: boolean;
}

/**
 * With a fault plan this process may SIGKILL itself right after a commit, before a follower could
 * print it: its commits are printed as the actor makes them, and the follower prints none again.
 */
export function printsOnCommit(config: EffectiveConfig): boolean {
  return config.faults !== null;
}

/** A promise that rejects when `ended` does (the actor stopped on an error) and never resolves. */
export function failureOf(ended: Promise<unknown>): Promise<never> {
  const failed = ended.then(() => new Promise<never>(() => {}));
  // raced by the follower; an actor that fails after the command has ended is not an error of it
  failed.catch(() => {});
  return failed;
}

/**
 * Rehydrates an agent in this process under its lease (held elsewhere: refused, naming the holder)
 * to host it to the end of its next turn, with the rest of its tree that has work (`hostTree`).
 */
export async function hostExisting(agentId: string, rt: Runtime, out: Out, json: boolean, onHydrated?: (p: Projection) => void): Promise<Hosted> {
  const printer = new RunPrinter(out, json);
  const echo = printsOnCommit(rt.config);
  const supervisor = rt.supervisor({
    onCommit: (id, events) => {
      // the agent's own status is its follower's to record, the rest of its tree's is kept here
      if (id !== agentId) rt.statuses.committed(id, events);
      // the agent's own commits: the other agents of its tree hosted here have logs of their own
      if (echo && id === agentId) printer.commit(events);
    },
  });
  // no agent is rehydrated twice at once: a host process (or another command) holding its lease wins
  const lease = await rt.pin(agentId);
  let ended!: Promise<TurnEnded>;
  const { actor, recovered, entry } = await supervisor.hydrate(
    agentId,
    (a) => {
      onHydrated?.(a.projection);
      // before recovery starts: a short rest of a turn can end while the inbox is being set up
      ended = a.whenTurnEnds();
    },
    { epoch: lease.epoch },
  );
  // an agent that spawned none and was spawned by none is a tree of one: nothing to list
  // its children and jobs too (a job left running by a killed process is ended, or run again, here)
  const jobs = Object.values(actor.projection.jobs ?? {}).some((j) => !j.notified);
  if (Object.keys(actor.projection.children ?? {}).length > 0 || actor.projection.parentLink || jobs) await hostTree(rt, supervisor, entry);
  return { rt, supervisor, actor, recovered, failed: failureOf(ended), printer, printsOnCommit: echo };
}

/**
 * Hosts here, beside the agent, every other agent and job of its tree the directory says needs a host
 * (running or waiting) and nobody live holds, each under a lease this command keeps: when the
 * process that ran a tree in-process is killed, a child left mid-turn or owing its notice, and a
 * parent waiting on one, go on only if someone hosts them, and no host may be running.
 */
async function hostTree(rt: Runtime, supervisor: Supervisor, entry: DirectoryEntry): Promise<void> {
  const others = (await rt.bus.directory.list()).filter(
    (e) => e.rootId === entry.rootId && e.actorId !== entry.actorId && (e.status === 'running' || e.status === 'waiting'),
  );
  await Promise.all(others.map((e) => supervisor.adopt(e).catch((err: unknown) => {
    // the agent resumed goes on; the one not hosted goes on when it is resumed itself
    rt.logger.warn({ err, actorId: e.actorId }, 'an agent of the tree could not be hosted here');
  })));
}

/** Follows the turn of an agent hosted here from `from` (its log before it was hosted) to its end. */
export function awaitHosted(h: Hosted, entry: DirectoryEntry, from: Projection, json: boolean, out: Out, answered?: Map<string, string>): Promise<number> {
  return followTurn({
    rt: h.rt, entry, from, directory: h.rt.bus.directory, printer: h.printer, out, json,
    prompt: promptFor(out, json), answered, hosting: { kind: 'here', failed: h.failed }, echo: !h.printsOnCommit,
  });
}
