import type { AgentActor, TurnEnded } from '../../actors/agent-actor.js';
import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import { RunPrinter, type Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import type { Supervisor } from '../../actors/supervisor.js';
import { approvalMessage, ttyPrompt, type ApprovalAnswer, type Prompt } from './approvals.js';
import { awaitTurn, whenAnswered } from './host-turn.js';

/** A person to ask on this terminal, or null (not a TTY, or stdout belongs to `--json`). */
export function promptFor(out: Out, json: boolean): Prompt | null {
  if (json || !out.stdin?.isTTY || !out.stderr.isTTY) return null;
  return ttyPrompt(out.stdin, out.stderr);
}

/** An agent rehydrated in this process, ready to be hosted to the end of its turn. */
interface Hosted {
  rt: Runtime;
  supervisor: Supervisor;
  actor: AgentActor;
  recovered: boolean;
  ended: Promise<TurnEnded>;
  printer: RunPrinter;
}

async function hostExisting(agentId: string, json: boolean, config: EffectiveConfig, out: Out, rt: Runtime): Promise<Hosted> {
  const printer = new RunPrinter(out, json);
  const supervisor = rt.supervisor({ onCommit: (_id, events) => printer.commit(events) });
  // no agent is rehydrated twice at once: a host process (or another command) holding its lease wins
  const lease = await rt.pin(agentId);
  let ended!: Promise<TurnEnded>;
  const { actor, recovered } = await supervisor.hydrate(
    agentId,
    (a) => {
      const p = a.projection;
      printer.seed(p.openStep?.index ?? p.openTurn?.steps ?? 0, p.usage.inputTokens + p.usage.outputTokens);
      // before recovery starts: a short rest of a turn can end while the inbox is being set up
      ended = a.whenTurnEnds();
    },
    { epoch: lease.epoch },
  );
  return { rt, supervisor, actor, recovered, ended, printer };
}

function awaitHosted(h: Hosted, json: boolean, out: Out): Promise<number> {
  return awaitTurn({
    actor: h.actor,
    ended: h.ended,
    directory: h.rt.bus.directory,
    printer: h.printer,
    out,
    json,
    send: (msg) => h.supervisor.send(msg),
    prompt: promptFor(out, json),
  });
}

/**
 * `actorloop resume`: rehydrates an agent from its LMDB snapshot plus log tail, closes what a
 * crash left open, commits `recovery/continuation`, and hosts it to the end of the turn.
 */
export async function resumeCommand(agentId: string, opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const h = await hostExisting(agentId, json, config, out, rt);
    // A message sent but never taken (the run died before committing it) starts the turn now.
    if (h.recovered || (await h.supervisor.inboxPending(agentId)) > 0) return await awaitHosted(h, json, out);
    const last = h.actor.projection.lastTurn;
    const what = last ? `its last turn ended ${last.outcome}${last.reason ? ` (${last.reason})` : ''}` : 'it has run no turn';
    out.stderr.write(`${agentId} has no open turn to resume: ${what}\n`);
    return last ? exitCodeFor(last.outcome) : EXIT.completed;
  } finally {
    await rt.close();
  }
}

/** Options of `actorloop approve` and `actorloop deny`. */
export interface AnswerOptions {
  json?: boolean;
  always?: boolean;
  reason?: string;
}

/**
 * `actorloop approve|deny <agentId> <approvalId>`: delivers the answer through the agent's inbox
 * (as a client command: only those may answer) and hosts the agent to the end of its turn, as
 * `resume` does. The answer names the plan digest it approves; the agent refuses it if the plan
 * it would run is another.
 */
export async function answerCommand(
  agentId: string,
  approvalId: string,
  decision: 'approve' | 'deny',
  opts: AnswerOptions,
  config: EffectiveConfig,
  out: Out,
): Promise<number> {
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const h = await hostExisting(agentId, json, config, out, rt);
    const approval = h.actor.projection.approvals?.[approvalId];
    if (!approval && !h.actor.projection.openTurn) {
      const last = h.actor.projection.lastTurn;
      throw new NotFoundError('cli.approval_not_found', `${agentId} has no open turn, so approval ${approvalId} has nothing to answer`, {
        hint: last ? `its last turn ended ${last.outcome}; an approval belongs to the turn that asked for it` : 'it has run no turn',
      });
    }
    if (!approval) {
      const pending = h.actor.waitingApprovals();
      throw new NotFoundError('cli.approval_not_found', `${agentId} has no approval ${approvalId} in its open turn`, {
        hint: pending.length > 0 ? `pending approvals: ${pending.join(', ')}` : `actorloop events ${agentId} shows its approval/requested events`,
      });
    }
    if (approval.state !== 'pending') {
      throw new ConfigError('cli.approval_answered', `approval ${approvalId} is already ${approval.state}`, {
        hint: 'an approval is answered once; the agent asks again if it needs to',
      });
    }
    const answer: ApprovalAnswer =
      decision === 'approve' ? { decision, always: opts.always === true } : { decision, reason: opts.reason ?? null };
    await h.supervisor.send(approvalMessage(agentId, approvalId, approval.planDigest, answer));
    await whenAnswered(h.actor, approvalId);
    return await awaitHosted(h, json, out);
  } finally {
    await rt.close();
  }
}
