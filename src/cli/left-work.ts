import type { DirectoryEntry } from '../bus/directory.js';
import type { Supervisor } from '../actors/hosting/supervisor.js';
import type { Projection } from '../store/projection.js';
import { EXIT } from './exit-codes.js';
import { releaseToHosts } from './hand-off.js';
import { cliLine, type WhereConfig } from './hints.js';
import type { Out } from './output.js';
import type { Runtime } from './runtime.js';

// A command that hosts an agent in-process follows one turn. A follow-up sent while that turn ran
// starts the next turn the moment it ends, before the command lets go: work the command claimed
// and will not run. It must not be left as a silent `running`: a live host is handed it now, or
// the person is told which command carries it on.

/**
 * Stops hosting here and, when the agent was left in a turn this command did not follow (or with
 * mail it did not take), hands it to a live host or prints on stderr that `resume` carries it on.
 * `code` is the command's exit code for the turn it followed: with `waiting` that turn is still
 * open, parked for a person, and the lines already printed say which command answers it.
 */
export async function handOverLeftWork(rt: Runtime, supervisor: Supervisor, entry: DirectoryEntry, agent: { projection: Projection }, out: Out, code: number): Promise<void> {
  // stopped first: a turn the agent starts after a look would be left as silently as before
  await supervisor.stop('the command that hosted it ended after the turn it followed');
  if (code === EXIT.waiting) return;
  const p = agent.projection;
  const open = p.openTurn !== null;
  const mail = Object.values(p.inbox).some((m) => m.state === 'pending');
  if (!open && !mail) return;
  const what = open ? `turn ${p.turns + 1} (a follow-up) started as this command ended` : 'a follow-up waits in its inbox';
  await rt.unpin(entry.actorId);
  const hosts = await rt.hosts.live(Date.now());
  if (hosts.length > 0) {
    await releaseToHosts(rt, (await rt.bus.directory.get(entry.actorId)) ?? entry);
    out.stderr.write(`${entry.actorId}: ${what}; handed to a live host: follow it with ${cliLine(rt.config, 'events', entry.actorId, '--follow')}\n`);
    return;
  }
  out.stderr.write(`${entry.actorId}: ${what}; ${nothingRunsIt(rt.config, entry.actorId)}\n`);
}

/** What is said of work let go that nobody runs (`released`): the command that carries it on. */
export function nothingRunsIt(config: WhereConfig, actorId: string): string {
  return `nothing runs it now: ${cliLine(config, 'resume', actorId)} carries it on`;
}
