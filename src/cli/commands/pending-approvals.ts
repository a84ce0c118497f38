import type { Command } from 'commander';
import { loadConfig, type EffectiveConfig } from '../../config/config.js';
import { pendingApprovals } from '../../store/projection.js';
import { EXIT } from '../exit-codes.js';
import { entryOf, foldLog } from '../hand-off.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime } from '../runtime.js';
import { answerCommands, describeApproval } from '../turn/approval-prompt.js';
import type { CommandKit } from '../command-kit.js';
import { idArgument } from '../id-arguments.js';

/** Adds `actorloop approvals <agentId>` to the program. */
export function registerApprovalsCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  return common(program.command('approvals').argument('<agentId>', 'the agent', idArgument('agent')))
    .description("list an agent's pending approvals: what each would allow (a diff, the patch, the command), and how to answer it")
    .option('--json', 'NDJSON, one pending approval per line (with its preview and the commands that answer it)')
    .action(act(async (id: string, o) => approvalsCommand(id, o, loadConfig(flags(o)), out)));
}

/**
 * `actorloop approvals <agentId>`: the approvals the agent's log holds pending, soonest expiry
 * first, each described as the approval prompt describes it, with the commands that answer it.
 * It reads the log only (a client login): it answers nothing and hosts nothing.
 */
export async function approvalsCommand(agentId: string, opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const p = await foldLog(rt, await entryOf(rt, agentId));
    const pending = pendingApprovals(p);
    const now = Date.now();
    if (opts.json) {
      for (const a of pending) {
        out.stdout.write(`${JSON.stringify({ agentId, ...a, expiresAtIso: new Date(a.expiresAt).toISOString(), ...answerCommands(config, agentId, a.approvalId) })}\n`);
      }
      return EXIT.completed;
    }
    if (pending.length === 0) {
      out.stdout.write(`${agentId} has no pending approvals\n`);
      return EXIT.completed;
    }
    const blocks = pending.map(({ approvalId, ...a }) => {
      const c = answerCommands(config, agentId, approvalId);
      return [...describeApproval(approvalId, a, now), `approve: ${c.approve}`, `deny:    ${c.deny}`].join('\n');
    });
    out.stdout.write(`${blocks.join('\n\n')}\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}
