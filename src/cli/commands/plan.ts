import { acceptedPlanText, requestAfterPlan } from '../../actors/agent/plan-mode.js';
import { publishInbox } from '../../bus/inbox.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError } from '../../protocol/errors.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { Projection } from '../../store/projection.js';
import { EXIT } from '../exit-codes.js';
import { entryOf, foldLog, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { lineFor, type CommandLine } from '../hints.js';
import { taskMessage } from '../../client/messages.js';
import { followTurn } from '../turn/follow-turn.js';
import { promptFor } from '../turn/approval-prompt.js';
import { acceptCommand, describePlan } from '../turn/plan-review.js';
import { awaitHosted, hostExisting } from '../turn/turn-hosting.js';

/** Options of `actorloop plan`. */
export interface PlanOptions {
  json?: boolean;
  /** Start the next turn in normal mode with the plan pinned in its context. */
  accept?: boolean;
  /** With `--accept`: host the agent here even when a host is running. */
  inProcess?: boolean;
}

/**
 * `actorloop plan <agent>`: the agent's current plan as its log has it (`--json`: the plan record,
 * or `null` when there is none); `--accept` starts the turn that carries it out.
 */
export async function planCommand(agentId: string, opts: PlanOptions, config: EffectiveConfig, out: Out): Promise<number> {
  if (opts.accept) return acceptPlan(agentId, opts, config, out);
  if (opts.inProcess) {
    throw new ConfigError('cli.plan_in_process', '--in-process goes with --accept: showing a plan hosts nothing', { hint: acceptCommand(lineFor(config), agentId, '--in-process') });
  }
  // reading a log: a client login is all it needs
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const p = await foldLog(rt, await entryOf(rt, agentId));
    if (opts.json) out.stdout.write(`${JSON.stringify(p.plan ?? null)}\n`);
    if (!p.plan) {
      out.stderr.write(`${agentId} has no plan yet: its agent writes one with update_plan (actorloop run --plan-mode asks for one)\n`);
      return EXIT.completed;
    }
    if (!opts.json) out.stdout.write(describePlan(p.plan));
    if (awaitsAcceptance(p)) out.stderr.write(`the plan waits for you: ${acceptCommand(lineFor(config), agentId)} carries it out\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}

/** True when the agent's last turn ran in plan mode, ended, and left a plan: what `--accept` takes. */
function awaitsAcceptance(p: Projection): boolean {
  return p.plan !== undefined && p.openTurn === null && p.lastSettings?.planMode === true;
}

/**
 * `actorloop plan <agent> --accept`: sends the agent a user message (person channel) that starts
 * its next turn with the settings of the last one in normal mode and the plan as its message, and
 * follows that turn to its end as `run` does: on the host that holds the agent or takes it on the
 * mail, else hosting it here. Refused (exit 2) when there is no plan, a turn is still open, or the
 * last turn was not in plan mode (the plan was accepted already, or written while carrying work out).
 */
async function acceptPlan(agentId: string, opts: PlanOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = await entryOf(rt, agentId);
    const p = await foldLog(rt, entry);
    const line = lineFor(config);
    const msg = acceptMessage(agentId, p, line);
    if (opts.inProcess !== true) {
      const code = await acceptOnHost(rt, entry, p, msg, json, out);
      if (code !== null) return code;
    }
    const h = await hostExisting(agentId, rt, out, json);
    // hydrating may have let a turn start meanwhile (a message another command sent)
    if (h.actor.projection.openTurn) throw turnStillOpen(agentId, line);
    await h.supervisor.send(msg);
    return await awaitHosted(h, entry, p, json, out);
  } finally {
    await rt.close();
  }
}

/** `--accept` through a host: sends and follows there, or null when no host takes the agent. */
async function acceptOnHost(rt: Runtime, entry: DirectoryEntry, p: Projection, msg: InboxMessage, json: boolean, out: Out): Promise<number | null> {
  const place = await placementOf(rt, entry.actorId);
  if (place.kind === 'other' || (place.kind === 'free' && place.hosts.length === 0)) return null;
  if (place.kind === 'free') await releaseToHosts(rt, entry);
  await publishInbox(await rt.bus.person(), msg, 'person');
  return followTurn({
    rt, entry, from: p, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
    prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: place.kind === 'free' },
  });
}

function turnStillOpen(agentId: string, line: CommandLine): ConfigError {
  return new ConfigError('cli.turn_open', `${agentId} is still in a turn, so its plan cannot be accepted yet`, {
    hint: `follow it to its end with ${line('resume', agentId)} (or stop it with ${line('interrupt', agentId)}), then accept`,
  });
}

/** The message that starts the turn carrying the plan out; a ConfigError (exit 2) when there is nothing to accept yet. */
export function acceptMessage(agentId: string, p: Projection, line: CommandLine): InboxMessage {
  if (!p.plan || !p.lastSettings) {
    throw new ConfigError('cli.no_plan', `${agentId} has no plan to accept`, {
      hint: 'an agent writes its plan with update_plan; actorloop run --plan-mode "<task>" asks it for one',
    });
  }
  if (p.openTurn) throw turnStillOpen(agentId, line);
  if (p.lastSettings.planMode !== true) {
    throw new ConfigError('cli.plan_not_waiting', `the plan of ${agentId} is not waiting to be accepted: its last turn did not run in plan mode`, {
      hint: `the plan was accepted already, or written in a normal turn; ${line('plan', agentId)} shows it`,
    });
  }
  return taskMessage(agentId, acceptedPlanText(p.plan), requestAfterPlan(p.lastSettings));
}
