import type { AgentActor, TurnEnded } from '../../actors/agent-actor.js';
import type { ActorDirectory, ActorStatus } from '../../bus/directory.js';
import type { TurnOutcome } from '../../protocol/events.js';
import { exitCodeFor, EXIT } from '../exit-codes.js';
import type { Out, RunPrinter } from '../output.js';

const STATUS: Record<TurnOutcome, ActorStatus> = {
  completed: 'completed',
  failed: 'failed',
  stopped: 'stopped',
  cancelled: 'stopped',
};

/** Records an actor's status in the directory (a cache of its log, for `runs`). */
export async function setStatus(directory: ActorDirectory, actorId: string, status: ActorStatus): Promise<void> {
  const entry = await directory.get(actorId);
  if (entry) await directory.put({ ...entry, status, updatedAt: new Date().toISOString() });
}

/**
 * Waits for the turn `ended` resolves, with Ctrl-C wired to an interrupt (a second Ctrl-C
 * leaves at once: the log keeps what was committed, and `resume` carries on). Prints the
 * outcome and returns the exit code.
 */
export async function awaitTurn(opts: {
  actor: AgentActor;
  ended: Promise<TurnEnded>;
  directory: ActorDirectory;
  printer: RunPrinter;
  out: Out;
  json: boolean;
}): Promise<number> {
  const { actor, out } = opts;
  let interrupts = 0;
  const onSigint = (): void => {
    interrupts += 1;
    if (interrupts > 1) process.exit(EXIT.interrupted);
    out.stderr.write('\ninterrupting the turn (Ctrl-C again to leave now)\n');
    actor.abort('interrupted');
  };
  process.on('SIGINT', onSigint);
  try {
    const ended = await opts.ended;
    await setStatus(opts.directory, actor.actorId, STATUS[ended.outcome]);
    opts.printer.endLine();
    if (!opts.json) {
      const p = actor.projection;
      const usage = p.usage;
      const tokens = `${(usage.inputTokens + usage.outputTokens).toLocaleString('en-US')} tokens${usage.estimated ? ' (estimated)' : ''}`;
      if (ended.answer) out.stdout.write(`\n${ended.answer}\n\n`);
      const cost = ended.costUsd === null ? 'cost unknown' : `$${ended.costUsd.toFixed(4)}`;
      out.stdout.write(`${ended.outcome}${ended.reason ? ` (${ended.reason})` : ''} · ${tokens} · ${cost}\n`);
    }
    return exitCodeFor(ended.outcome);
  } finally {
    process.off('SIGINT', onSigint);
  }
}
