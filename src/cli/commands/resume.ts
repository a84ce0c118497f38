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
    const { actor, recovered } = await supervisor.hydrate(agentId, ({ projection: p }) =>
      printer.seed(p.openStep?.index ?? p.openTurn?.steps ?? 0, p.usage.inputTokens + p.usage.outputTokens),
    );
    if (!recovered) {
      const last = actor.projection.lastTurn;
      const what = last ? `its last turn ended ${last.outcome}${last.reason ? ` (${last.reason})` : ''}` : 'it has run no turn';
      out.stderr.write(`${agentId} has no open turn to resume: ${what}\n`);
      return last ? exitCodeFor(last.outcome) : EXIT.completed;
    }
    return await awaitTurn({ actor, ended: actor.whenTurnEnds(), directory: rt.bus.directory, printer, out, json });
  } finally {
    await rt.close();
  }
}
