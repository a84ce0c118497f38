import type { TurnEnded } from '../../actors/agent-actor.js';
import type { EffectiveConfig } from '../../config/config.js';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import { RunPrinter, type Out } from '../output.js';
import { createLogger, openRuntime } from '../runtime.js';
import { awaitTurn } from './host-turn.js';

/**
 * `actorloop resume`: rehydrates an agent from its LMDB snapshot plus log tail, closes what a
 * crash left open, commits `recovery/continuation`, and hosts it to the end of the turn.
 */
export async function resumeCommand(agentId: string, opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const logger = createLogger(config);
  const rt = await openRuntime(config, logger);
  try {
    const json = opts.json === true;
    const printer = new RunPrinter(out, json);
    const supervisor = rt.supervisor({ onCommit: (_id, events) => printer.commit(events) });
    let ended!: Promise<TurnEnded>;
    const { actor, recovered } = await supervisor.hydrate(agentId, (a) => {
      const p = a.projection;
      printer.seed(p.openStep?.index ?? p.openTurn?.steps ?? 0, p.usage.inputTokens + p.usage.outputTokens);
      // before recovery starts: a short rest of a turn can end while the inbox is being set up
      ended = a.whenTurnEnds();
    });
    // A message sent but never taken (the run died before committing it) starts the turn now.
    if (!recovered && (await supervisor.inboxPending(agentId)) > 0) {
      return await awaitTurn({ actor, ended, directory: rt.bus.directory, printer, out, json });
    }
    if (!recovered) {
      const last = actor.projection.lastTurn;
      const what = last ? `its last turn ended ${last.outcome}${last.reason ? ` (${last.reason})` : ''}` : 'it has run no turn';
      out.stderr.write(`${agentId} has no open turn to resume: ${what}\n`);
      return last ? exitCodeFor(last.outcome) : EXIT.completed;
    }
    return await awaitTurn({ actor, ended, directory: rt.bus.directory, printer, out, json });
  } finally {
    await rt.close();
  }
}
