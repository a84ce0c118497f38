import type { EffectiveConfig } from '../../config/config.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import type { DirectoryEntry } from '../../bus/directory.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { promptFor, type ApprovalAnswer } from '../turn/approval-prompt.js';
import { approvalMessage, interruptMessage } from '../../client/messages.js';
import { followTurn } from '../turn/follow-turn.js';
import { awaitHosted, hostExisting, type Hosted } from '../turn/turn-hosting.js';
import { entryOf, foldLog, inboxPending, latestAgent, placementOf, releaseToHosts } from '../hand-off.js';
import { publishInbox } from '../../bus/inbox.js';
import { approvalById, continuationPending, pendingApprovals, type ApprovalRecord, type Projection } from '../../store/projection.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine, placeholder, type WhereConfig } from '../hints.js';
import { handOverLeftWork } from '../left-work.js';

/** Options of `actorloop resume`. */
export interface ResumeOptions {
  json?: boolean;
  /** Resume the latest agent of the workspace `cwd` (default: the current directory). */
  last?: boolean;
  cwd?: string;
  /** Host the agent here even when a host is running (refused while a host holds it). */
  inProcess?: boolean;
}

/**
 * `actorloop resume`: when a host holds the agent, follows its turn there; when nobody does but a
 * host is running, hands the agent to it (a lease left by a dead local process is released, the
 * directory says it has work) and follows. Otherwise rehydrates it here from its LMDB snapshot
 * plus log tail, closes what a crash left open, commits `recovery/continuation`, and hosts it to
 * the end of the turn. Whether there is anything to resume is decided from the log and the inbox
 * before the agent is hosted here: a hosted agent reads its inbox at once, and one let go right
 * after could leave a message it fetched unacked (or a turn it just started, released).
 */
export async function resumeCommand(agentArg: string | undefined, opts: ResumeOptions, config: EffectiveConfig, out: Out): Promise<number> {
  if ((agentArg === undefined) === (opts.last !== true)) {
    throw new ConfigError('cli.resume_which', agentArg === undefined ? 'resume needs the agent to resume' : 'an agent ID and --last name the agent twice', {
      hint: `${cliLine(config, 'resume', placeholder('<agentId>'))}, or ${cliLine(config, 'resume', '--last')} (the latest agent of this workspace)`,
    });
  }
  const rt = await openRuntime(config, createLogger(config));
  try {
    const agentId = agentArg ?? (await latestAgent(rt, opts.cwd ?? '.')).actorId;
    const json = opts.json === true;
    if (opts.inProcess !== true) {
      const code = await resumeOnHost(rt, agentId, json, out);
      if (code !== null) return code;
    } else if ((await placementOf(rt, agentId)).kind !== 'free') {
      // held by a live host or command: hosting it here is refused (saying how to follow it),
      // whether or not its log has work left
      await rt.pin(agentId);
      await rt.unpin(agentId);
    }
    const entry = await entryOf(rt, agentId);
    const logged = await foldLog(rt, entry);
    // A message sent but never taken (the run died before committing it) starts the turn now.
    if (!hasWork(logged) && (await inboxPending(rt, agentId)) === 0) return noOpenTurn(agentId, logged, out);
    const h = await hostExisting(agentId, rt, out, json);
    if (!hasWork(logged) && !(await mailStartsTurn(h, agentId))) return noOpenTurn(agentId, h.actor.projection, out);
    const code = await awaitHosted(h, entry, logged, json, out);
    await handOverLeftWork(rt, h.supervisor, entry, h.actor, out, code);
    return code;
  } finally {
    await rt.close();
  }
}

/**
 * Hosts an agent whose log holds no work but whose inbox holds mail until the mail is taken
 * (processed and acked): true once it started a turn, false when it started none (a redelivered
 * duplicate of a message the log has, an answer to nothing), so `resume` does not wait for a turn
 * that never comes.
 */
async function mailStartsTurn(h: Hosted, agentId: string): Promise<boolean> {
  const p = h.actor.projection;
  const before = p.lastTurn?.id ?? null;
  const started = (): boolean => p.openTurn !== null || (p.lastTurn?.id ?? null) !== before || h.actor.machines.isClaiming();
  for (;;) {
    // a failed actor is reported the way a hosted turn reports it
    if (started() || h.actor.failed) return true;
    if ((await h.supervisor.inboxPending(agentId)) === 0) {
      // acked: what it was going to start is staged or running by now
      await h.actor.idle();
      return started();
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Says that an agent has no turn to resume, and exits with its last turn's code. */
function noOpenTurn(agentId: string, p: Projection, out: Out): number {
  const last = p.lastTurn;
  const what = last ? `its last turn ended ${last.outcome}${last.reason ? ` (${last.reason})` : ''}` : 'it has run no turn';
  out.stderr.write(`${agentId} has no open turn to resume: ${terminalText(what)}\n`);
  return last ? exitCodeFor(last.outcome) : EXIT.completed;
}

/** True when the log holds work a host would carry on: an open turn, a goal's continuation owed, a job's notice owed, or a received message that starts one. */
function hasWork(p: Projection): boolean {
  // a turn ended saying its goal goes on, and the continuation it owes was not started yet
  if (continuationPending(p)) return true;
  // a job it started has not sent its notice: its end (and the turn the notice starts) is the agent's work
  if (Object.values(p.jobs ?? {}).some((j) => !j.notified)) return true;
  return p.openTurn !== null || Object.values(p.inbox).some((i) => i.state === 'pending' && (i.kind === 'user_message' || i.kind === 'follow_up'));
}

/** `resume` through a host: follows it there, or null when no host takes it (it is hosted here). */
async function resumeOnHost(rt: Runtime, agentId: string, json: boolean, out: Out): Promise<number | null> {
  const entry = await entryOf(rt, agentId);
  const place = await placementOf(rt, agentId);
  if (place.kind === 'other' || (place.kind === 'free' && place.hosts.length === 0)) return null;
  const p = await foldLog(rt, entry);
  if (!hasWork(p) && (await inboxPending(rt, agentId)) === 0) return noOpenTurn(agentId, p, out);
  if (place.kind === 'free') {
    await releaseToHosts(rt, entry);
    // the rest of its tree a killed command hosted goes with it, without waiting for its leases to lapse
    if (Object.keys(p.children ?? {}).length > 0 || p.parentLink || Object.values(p.jobs ?? {}).some((j) => !j.notified)) await releaseTree(rt, entry);
  }
  return followTurn({
    rt, entry, from: p, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
    prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: place.kind === 'free' },
  });
}

/** Hands the live hosts every other agent of the entry's tree that has work and that nobody live holds. */
async function releaseTree(rt: Runtime, entry: DirectoryEntry): Promise<void> {
  for (const e of await rt.bus.directory.list()) {
    if (e.rootId !== entry.rootId || e.actorId === entry.actorId || (e.status !== 'running' && e.status !== 'waiting')) continue;
    if ((await placementOf(rt, e.actorId)).kind === 'free') await releaseToHosts(rt, e);
  }
}

/** Options of `actorloop approve` and `actorloop deny`. */
export interface AnswerOptions {
  json?: boolean;
  always?: boolean;
  reason?: string;
  /** Host the agent here even when a host is running (refused while a host holds it). */
  inProcess?: boolean;
}

/**
 * `actorloop approve|deny <agentId> <approvalId>`: delivers the answer through the agent's inbox
 * (as a client command: only those may answer) and follows the turn to its end: on the host that
 * holds the agent or takes it on this mail, else hosting it here as `resume` does. The answer
 * names the plan digest it approves; the agent refuses it if the plan it would run is another.
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
    const answer: ApprovalAnswer =
      decision === 'approve' ? { decision, always: opts.always === true } : { decision, reason: opts.reason ?? null };
    if (opts.inProcess !== true) {
      const code = await answerOnHost(rt, agentId, approvalId, answer, json, out);
      if (code !== null) return code;
    }
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    let logged: ApprovalRecord | undefined;
    const h = await hostExisting(agentId, rt, out, json, (p) => { const a = approvalById(p, approvalId); logged = a && { ...a }; });
    if (logged && expiredUnanswered(logged)) {
      // the agent's own watch denies it as it is hosted (its expiry is persisted): the follower
      // waits for that denial rather than send an answer the agent can only refuse
      sayExpired(out, approvalId, logged);
      return await awaitHosted(h, entry, from, json, out, new Map([[approvalId, 'expiry']]));
    }
    const approval = approvalToAnswer(agentId, approvalId, h.actor.projection, rt.config);
    const msg = approvalMessage(agentId, approvalId, approval.planDigest, answer);
    await h.supervisor.send(msg);
    return await awaitHosted(h, entry, from, json, out, new Map([[approvalId, msg.id]]));
  } finally {
    await rt.close();
  }
}

/** `approve|deny` through a host: answers and follows there, or null when no host takes the agent. */
async function answerOnHost(rt: Runtime, agentId: string, approvalId: string, answer: ApprovalAnswer, json: boolean, out: Out): Promise<number | null> {
  const entry = await entryOf(rt, agentId);
  const place = await placementOf(rt, agentId);
  // a subagent held by another command (the `run` of its tree, hosting it in-process) reads its
  // inbox there: the answer is mail to it, as it is to a host
  if ((place.kind === 'other' && entry.parentId === null) || (place.kind === 'free' && place.hosts.length === 0)) return null;
  const p = await foldLog(rt, entry);
  const logged = approvalById(p, approvalId);
  if (logged && expiredUnanswered(logged)) {
    // a host that holds the agent has denied it at its expiry, or will; one that takes it denies it
    sayExpired(out, approvalId, logged);
    if (place.kind === 'free') await releaseToHosts(rt, entry);
    return followTurn({
      rt, entry, from: p, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
      // the expiry is on its way: the follower does not wait on it for a person
      prompt: promptFor(out, json), answered: new Map([[approvalId, 'expiry']]), hosting: { kind: 'host', handedOver: place.kind === 'free' },
    });
  }
  const approval = approvalToAnswer(agentId, approvalId, p, rt.config);
  // nobody holds it: the answer is mail, which a host claims the agent for
  if (place.kind === 'free') await releaseToHosts(rt, entry);
  const msg = approvalMessage(agentId, approvalId, approval.planDigest, answer);
  await publishInbox(await rt.bus.person(), msg, 'person');
  return followTurn({
    rt, entry, from: p, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
    prompt: promptFor(out, json), answered: new Map([[approvalId, msg.id]]), hosting: { kind: 'host', handedOver: place.kind === 'free' },
  });
}

/** True for an approval the log still has pending though its (persisted) expiry has passed. */
function expiredUnanswered(a: ApprovalRecord, nowMs = Date.now()): boolean {
  return a.state === 'pending' && nowMs >= a.expiresAt;
}

/** Says that the answer comes too late, and what happens instead. */
function sayExpired(out: Out, approvalId: string, a: ApprovalRecord): void {
  out.stderr.write(
    `approval ${approvalId} expired at ${new Date(a.expiresAt).toISOString()} before it was answered: `
      + 'the call is denied (the model is told) and the turn goes on without it\n',
  );
}

/** The pending approval `approvalId` of the agent's open turn; a clear error when there is none to answer. */
function approvalToAnswer(agentId: string, approvalId: string, p: Projection, config: WhereConfig): ApprovalRecord {
  const approval = approvalById(p, approvalId);
  if (!approval && !p.openTurn) {
    const last = p.lastTurn;
    throw new NotFoundError('cli.approval_not_found', `${agentId} has no open turn, so approval ${approvalId} has nothing to answer`, {
      hint: last ? `its last turn ended ${last.outcome}; an approval belongs to the turn that asked for it` : 'it has run no turn',
    });
  }
  if (!approval) {
    const pending = pendingApprovals(p).map((a) => a.approvalId);
    throw new NotFoundError('cli.approval_not_found', `${agentId} has no approval ${approvalId} in its open turn`, {
      hint: pending.length > 0 ? `pending approvals: ${pending.join(', ')}` : `${cliLine(config, 'events', agentId)} shows its approval/requested events`,
    });
  }
  if (approval.state !== 'pending') {
    throw new ConfigError('cli.approval_answered', `approval ${approvalId} is already ${approval.state}`, {
      hint: 'an approval is answered once; the agent asks again if it needs to',
    });
  }
  return approval;
}

/** Options of `actorloop interrupt`. */
export interface InterruptOptions {
  json?: boolean;
  /** Host the agent here to carry the interrupt out even when a host is running. */
  inProcess?: boolean;
}

/**
 * `actorloop interrupt <agent>`: sends an `interrupt` to the agent's inbox on the person channel
 * and follows its turn to the end, wherever it is hosted: on a host or in another command the
 * interrupt is mail it takes at once; when nobody runs the agent, a live host is handed it, or it
 * is rehydrated here and the interrupt is carried out by its recovery. Exit 0 once the turn ended
 * cancelled; an agent with no open turn has nothing to interrupt (exit 0, said so).
 */
export async function interruptCommand(agentId: string, opts: InterruptOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    if (!from.openTurn) {
      const last = from.lastTurn ? ` (its last turn ended ${from.lastTurn.outcome})` : '';
      out.stderr.write(`${agentId} has no open turn: nothing to interrupt${terminalText(last)}\n`);
      return EXIT.completed;
    }
    const msg = interruptMessage(agentId);
    const place = await placementOf(rt, agentId);
    const elsewhere = place.kind === 'host' || place.kind === 'other' || (place.kind === 'free' && place.hosts.length > 0 && opts.inProcess !== true);
    let code: number;
    if (elsewhere) {
      if (place.kind === 'free') await releaseToHosts(rt, entry);
      await publishInbox(await rt.bus.person(), msg, 'person');
      code = await followTurn({
        rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
        prompt: null, hosting: { kind: 'host', handedOver: place.kind === 'free' },
      });
    } else {
      // the mail first: hosted, the agent recovers its open turn and takes the interrupt in
      await publishInbox(await rt.bus.person(), msg, 'person');
      const h = await hostExisting(agentId, rt, out, json);
      code = await awaitHosted(h, entry, from, json, out);
    }
    // the turn ended as asked: the command did what it was told
    return code === EXIT.interrupted ? EXIT.completed : code;
  } finally {
    await rt.close();
  }
}
