import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError } from '../../protocol/errors.js';
import type { Projection } from '../../store/projection.js';
import { entryOf, foldLog, inboxPending, latestAgent, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { sendAsPerson } from '../person-messages.js';
import { nextTaskMessage } from '../../client/messages.js';
import { createLogger, openRuntime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine, placeholder } from '../hints.js';
import { followTurn } from '../turn/follow-turn.js';
import { handOverLeftWork } from '../left-work.js';
import { afterPlanTurn } from '../turn/plan-review.js';
import { promptFor } from '../turn/approval-prompt.js';
import { startAgent } from '../turn/start-agent.js';
import { checkTask, continueRequest, type RunOptions } from '../turn/turn-flags.js';
import { awaitHosted, hostExisting } from '../turn/turn-hosting.js';

// A conversation is one agent over many turns (design §6a: a follow-up starts the next turn with
// the history so far). `run --continue <agent>` and `run --last` send the next task as a
// follow-up through the agent's inbox, with the settings of its last turn and this command's flags
// over them, and follow the turn that takes it.

/**
 * `actorloop run "<task>"`: a new agent on the task (see `startAgent`); with `--continue <agent>`
 * or `--last`, the next turn of an existing agent.
 */
export async function runCommand(task: string, opts: RunOptions, config: EffectiveConfig, out: Out): Promise<number> {
  if (opts.continue !== undefined || opts.last === true) return continueCommand({ agentId: opts.continue, last: opts.last }, task, opts, config, out);
  return startAgent(task, opts, config, out);
}

/** Where `--continue` / `--last` point. */
export interface ContinueTarget {
  agentId?: string;
  last?: boolean;
}

/**
 * `actorloop run --continue <agent> "<task>"` (or `--last`): the next turn of an existing agent,
 * with its history. The task goes to the agent's inbox on the person channel; an agent in a turn
 * takes it as a follow-up when that turn ends. Then the command follows the agent as `run` does (on
 * the host that holds it, on a live host it is handed to, or hosting it here) until the turn that
 * took the task ends, and exits with that turn's code.
 */
export async function continueCommand(target: ContinueTarget, task: string, opts: RunOptions, config: EffectiveConfig, out: Out): Promise<number> {
  checkTask(task);
  if (target.agentId !== undefined && target.last) {
    throw new ConfigError('cli.continue_last', '--continue <agent> and --last name the agent twice', { hint: 'pass one of them' });
  }
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = target.agentId !== undefined ? await entryOf(rt, target.agentId) : await latestAgent(rt, opts.cwd ?? '.');
    const agentId = entry.actorId;
    const p = await foldLog(rt, entry);
    if (!p.lastSettings) {
      const onItsWay = p.openTurn !== null || (await inboxPending(rt, agentId)) > 0;
      throw new ConfigError('cli.no_settings', `${agentId} has run no turn yet, so there is nothing to continue`, {
        hint: onItsWay ? `its first task is on its way: ${cliLine(config, 'resume', agentId)} follows it` : `start an agent with ${cliLine(config, 'run', placeholder('"<task>"'))}`,
      });
    }
    const request = await continueRequest(opts, config, p.lastSettings);
    const msg = nextTaskMessage(agentId, task, request, p.openTurn !== null);
    const place = await placementOf(rt, agentId);
    const here = opts.inProcess === true || config.faults !== null;
    let elsewhere = place.kind === 'host' || place.kind === 'other' || (place.kind === 'free' && place.hosts.length > 0 && !here);
    if (place.kind === 'other' && here) {
      // another command hosts it: the task is mail it takes, and this command follows it there
      out.stderr.write(`${agentId} is hosted by another command; following it there\n`);
    }
    if (elsewhere && place.kind === 'free') await releaseToHosts(rt, entry);
    // The lease before the mail: a live host claims an agent with mail waiting, so a task sent
    // first could be taken there while this command finds the lease gone and says nothing ran.
    // One that is taken anyway (a host got it in between) is followed there: the task still runs.
    const hosted = elsewhere ? null : await hostExisting(agentId, rt, out, json).catch((err: unknown) => {
      if (!(err instanceof ConfigError) || err.code !== 'cli.hosted_elsewhere') throw err;
      elsewhere = true;
      return null;
    });
    await sendAsPerson(rt, msg);
    // --quiet: stdout is the answer's alone
    (json || out.quiet ? out.stderr : out.stdout).write(`${agentId}\n`);
    out.stderr.write(`${terminalText(continuing(p))}\n`);
    if (elsewhere && here && place.kind === 'free') out.stderr.write(`${agentId} was taken by a host; following it there\n`);
    const follow = (from: Projection): Promise<number> =>
      hosted
        ? awaitHosted(hosted, entry, from, json, out)
        : followTurn({
            rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
            prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: place.kind === 'free' },
          });
    let code: number;
    for (;;) {
      const before = p.lastTurn?.id ?? null;
      code = await follow(p);
      // the follower returns at a turn's end, or when the person left or must answer: only a turn
      // that ended without taking the task (one running when it came) is followed past
      const ended = (p.lastTurn?.id ?? null) !== before;
      // (the log may not hold the task yet when that turn ends: received, it is pending)
      const state = p.inbox[msg.id]?.state;
      if (!ended || (state !== undefined && state !== 'pending')) break;
    }
    if (request.planMode) return await afterPlanTurn(rt, entry, code, out, json);
    if (hosted) await handOverLeftWork(rt, hosted.supervisor, entry, hosted.actor, out, code);
    return code;
  } finally {
    await rt.close();
  }
}

/** What the person is told on stderr: which turn this is, or that it waits for the running one. */
function continuing(p: Projection): string {
  const turn = p.turns + 1;
  if (p.openTurn) return `${p.actorId} is in turn ${turn}: this task is queued as a follow-up and starts turn ${turn + 1} when that one ends`;
  const last = p.lastTurn ? `; turn ${p.turns} ended ${p.lastTurn.outcome}${p.lastTurn.reason ? ` (${p.lastTurn.reason})` : ''}` : '';
  return `continuing ${p.actorId}: turn ${turn}, with the history so far${last}`;
}
