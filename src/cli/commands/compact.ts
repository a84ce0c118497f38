import type { EffectiveConfig } from '../../config/config.js';
import { compactMessage } from '../../client/messages.js';
import { EXIT } from '../exit-codes.js';
import { entryOf, foldLog } from '../hand-off.js';
import type { Out } from '../output.js';
import { compactFate, sendAsPerson } from '../person-messages.js';
import { createLogger, openRuntime } from '../runtime.js';

/**
 * `actorloop compact <agent>`: asks the agent for a checkpoint at its next step boundary (a
 * `compact` message on the person channel), whether or not its request fits. Prints the message
 * ID and returns once the inbox has it; whoever runs the agent acts on it.
 */
export async function compactCommand(agentId: string, opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config));
  try {
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    const msg = compactMessage(agentId);
    await sendAsPerson(rt, msg);
    if (opts.json === true) out.stdout.write(`${JSON.stringify({ messageId: msg.id, agentId, turnOpen: from.openTurn !== null })}\n`);
    else (out.quiet ? out.stderr : out.stdout).write(`${msg.id} compact\n`);
    out.stderr.write(`${compactFate(agentId, from.openTurn !== null)}\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}
