import type { AgentActor, TurnEnded } from '../../actors/agent-actor.js';
import { STATUS_AFTER_TURN, type ActorDirectory, type ActorStatus } from '../../bus/directory.js';
import type { TurnOutcome } from '../../protocol/events.js';
import type { InboxMessage } from '../../protocol/inbox.js';
import type { Projection } from '../../store/projection.js';
import { exitCodeFor, EXIT } from '../exit-codes.js';
import type { Out, RunPrinter } from '../output.js';
import { terminalText } from '../terminal-text.js';
import { exitCodeForSignal, whenStopped, type StopSignal } from '../stop-signals.js';
import { approvalMessage, describeApproval, type Prompt } from './approvals.js';

const STATUS: Record<TurnOutcome, ActorStatus> = STATUS_AFTER_TURN;

/** Records an actor's status in the directory (a cache of its log, for `runs`). */
export async function setStatus(directory: ActorDirectory, actorId: string, status: ActorStatus): Promise<void> {
  const entry = await directory.get(actorId);
  if (entry) await directory.put({ ...entry, status, updatedAt: new Date().toISOString() });
}

/** Where a turn's end (or its wait for a person) is printed, and its directory status kept. */
export interface TurnOutput {
  directory: ActorDirectory;
  printer: RunPrinter;
  out: Out;
  json: boolean;
}

/** The agent whose turn is printed: its ID and its state as the log has it. */
export interface TurnSubject {
  actorId: string;
  projection: Projection;
}

/** What `awaitTurn` needs to host a turn to its end. */
export interface AwaitTurnOptions extends TurnOutput {
  actor: AgentActor;
  ended: Promise<TurnEnded>;
  /** Delivers an answer to the agent's inbox (approvals answered inline). */
  send(msg: InboxMessage): Promise<void>;
  /** Asks a person on a TTY; absent: approvals make the command exit 4 for `actorloop approve`. */
  prompt?: Prompt | null;
}

/**
 * Waits for the turn `ended` resolves, with Ctrl-C wired to an interrupt (a second Ctrl-C
 * leaves at once: the log keeps what was committed, and `resume` carries on). SIGTERM or SIGHUP
 * returns 128 + the signal without cancelling anything: the caller's close releases the agent
 * (`actor/released`, the turn left open) and `resume` carries it on. When the turn can
 * go no further without a person's approval it asks inline on a TTY, or prints the pending
 * approval IDs and returns exit 4 (`actorloop approve` / `deny` continue it). Prints the outcome
 * and returns the exit code.
 */
export async function awaitTurn(opts: AwaitTurnOptions): Promise<number> {
  const { actor, out } = opts;
  let interrupts = 0;
  const onSigint = (): void => {
    interrupts += 1;
    if (interrupts > 1) process.exit(EXIT.interrupted);
    out.stderr.write('\ninterrupting the turn (Ctrl-C again to leave now)\n');
    actor.abort('interrupted');
  };
  process.on('SIGINT', onSigint);
  const stop = whenStopped();
  const stopped = stop.stopped.then((signal) => ({ stopped: signal }));
  try {
    for (;;) {
      const next = await Promise.race([
        opts.ended.then((ended) => ({ ended, waiting: null })),
        actor.whenAwaitingApproval().then((waiting) => ({ ended: null, waiting })),
        stopped,
      ]);
      if ('stopped' in next) return leaveResumable(opts, actor.actorId, next.stopped);
      if (next.ended) return await printTurnEnd(opts, actor, next.ended);
      opts.printer.endLine();
      const waiting = next.waiting!;
      if (!opts.prompt) return await printWaiting(opts, actor, waiting);
      for (const approvalId of waiting) {
        const approval = actor.projection.approvals?.[approvalId];
        if (!approval || approval.state !== 'pending') continue;
        const answer = await Promise.race([opts.prompt(describeApproval(approvalId, approval)), stopped]);
        if ('stopped' in answer) return leaveResumable(opts, actor.actorId, answer.stopped);
        await opts.send(approvalMessage(actor.actorId, approvalId, approval.planDigest, answer));
        await whenAnswered(actor, approvalId);
      }
    }
  } finally {
    process.off('SIGINT', onSigint);
    stop.dispose();
  }
}

/** A stop signal came: says the turn stays open and how to carry it on, and returns 128 + the signal. */
function leaveResumable(o: TurnOutput, actorId: string, signal: StopSignal): number {
  o.printer.endLine();
  o.out.stderr.write(`\n${signal}: stopping; the turn stays open (\`actorloop resume ${actorId}\` carries it on)\n`);
  return exitCodeForSignal(signal);
}

/** Records the outcome in the directory, prints the answer and the outcome line, and returns the exit code. */
export async function printTurnEnd(o: TurnOutput, agent: TurnSubject, ended: TurnEnded): Promise<number> {
  const { out } = o;
  await setStatus(o.directory, agent.actorId, STATUS[ended.outcome]);
  o.printer.endLine();
  if (!o.json) {
    const usage = agent.projection.usage;
    const tokens = `${(usage.inputTokens + usage.outputTokens).toLocaleString('en-US')} tokens${usage.estimated ? ' (estimated)' : ''}`;
    if (ended.answer) out.stdout.write(`\n${terminalText(ended.answer, 'block')}\n\n`);
    const cost = ended.costUsd === null ? 'cost unknown' : `$${ended.costUsd.toFixed(4)}`;
    out.stdout.write(`${ended.outcome}${ended.reason ? ` (${terminalText(ended.reason)})` : ''} · ${tokens} · ${cost}\n`);
  }
  return exitCodeFor(ended.outcome);
}

/** No one to ask here: say what waits and how to answer it, and return exit 4. */
export async function printWaiting(o: TurnOutput, agent: TurnSubject, waiting: string[]): Promise<number> {
  await setStatus(o.directory, agent.actorId, 'waiting');
  const lines: string[] = [];
  for (const approvalId of waiting) {
    const approval = agent.projection.approvals?.[approvalId];
    if (!approval) continue;
    lines.push(`waiting for approval ${approvalId}`, ...describeApproval(approvalId, approval).map((l) => `  ${l}`));
  }
  const first = waiting[0]!;
  lines.push(
    `approve: actorloop approve ${agent.actorId} ${first}`,
    `deny:    actorloop deny ${agent.actorId} ${first} [--reason "<why>"]`,
  );
  o.out.stderr.write(`${lines.join('\n')}\n`);
  return EXIT.stopped;
}

/**
 * Resolves once the actor took an answer to `approvalId` in (or refused it, or stopped): the
 * answer travels through the inbox, and until it lands the approval still looks pending.
 */
export async function whenAnswered(actor: AgentActor, approvalId: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  const inbox = () => Object.values(actor.projection.inbox);
  const refusedBefore = inbox().filter((i) => i.state === 'cancelled').length;
  while (actor.projection.approvals?.[approvalId]?.state === 'pending' && !actor.failed && Date.now() < until) {
    if (inbox().filter((i) => i.state === 'cancelled').length > refusedBefore) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}
