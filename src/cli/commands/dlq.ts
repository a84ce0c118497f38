import type { Command } from 'commander';
import { openBus, type Bus } from '../../bus/connection.js';
import { listDeadLetters, redriveDeadLetter, type DeadLetter } from '../../bus/dead-letters.js';
import { loadConfig, type EffectiveConfig } from '../../config/config.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';
import { busOptions, createLogger } from '../runtime.js';
import { cliLine } from '../hints.js';
import { idArgument } from '../id-arguments.js';
import type { CommandKit } from '../command-kit.js';

/** Adds `actorloop dlq list` and `actorloop dlq redrive <messageId>` to the program. */
export function registerDlqCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  const dlq = program
    .command('dlq')
    .description('inbox messages given up on after max_deliver deliveries (dead letters): list them, send them again');

  common(dlq.command('list'))
    .description('list dead letters not yet redriven, oldest first')
    .option('--all', 'also those already redriven')
    .option('--actor <agentId>', "only this agent's", idArgument('agent'))
    .option('--json', 'NDJSON, one dead letter per line (its bytes base64 in `data`)')
    .action(act(async (o) => dlqListCommand(o, loadConfig(flags(o)), out)));

  common(dlq.command('redrive').argument('<messageId>', 'the ID `dlq list` shows'))
    .description("send a dead letter again to its agent's inbox: a host running the agent takes it at once, else `actorloop resume <agentId>` does")
    .option('--json', 'one JSON object')
    .action(act(async (id: string, o) => dlqRedriveCommand(id, o, loadConfig(flags(o)), out)));

  return dlq;
}

// Only the bus: listing and redriving touch neither LMDB nor the tools.
async function withBus<T>(config: EffectiveConfig, fn: (bus: Bus) => Promise<T>): Promise<T> {
  const logger = createLogger(config);
  const bus = await openBus(busOptions(config, logger, 'actorloop', 'client'));
  try {
    return await fn(bus);
  } finally {
    await bus.close();
  }
}

/** A dead letter as one JSON object: its bytes base64, and as text when they are UTF-8. */
export function deadLetterJson(l: DeadLetter): Record<string, unknown> {
  return {
    id: l.id,
    actorId: l.actorId,
    deliveries: l.deliveries,
    error: l.error,
    at: l.at,
    state: l.redriven ? 'redriven' : 'dead',
    redriven: l.redriven,
    source: l.source,
    dlqSeq: l.seq,
    inboxSeq: l.inboxSeq,
    data: Buffer.from(l.data).toString('base64'),
  };
}

/** `actorloop dlq list`: dead letters, oldest first; exit 0 with or without any. */
export async function dlqListCommand(
  opts: { all?: boolean; actor?: string; json?: boolean }, config: EffectiveConfig, out: Out,
): Promise<number> {
  return withBus(config, async (bus) => {
    const letters = await listDeadLetters(bus, {
      includeRedriven: opts.all === true,
      ...(opts.actor !== undefined ? { actorId: opts.actor } : {}),
    });
    if (opts.json) {
      for (const l of letters) out.stdout.write(`${JSON.stringify(deadLetterJson(l))}\n`);
      return EXIT.completed;
    }
    if (letters.length === 0) {
      out.stdout.write(`no dead letters${opts.all ? '' : ' waiting (`--all` shows redriven ones too)'}\n`);
      return EXIT.completed;
    }
    for (const l of letters) {
      const state = l.redriven ? `  redriven ${l.redriven.at.slice(0, 19).replace('T', ' ')}` : '';
      out.stdout.write(
        `${l.id}  ${l.actorId}  ${l.deliveries} deliveries  ${l.at.slice(0, 19).replace('T', ' ')}  ${l.error.code}: ${terminalText(clip(l.error.message))}${state}\n`,
      );
    }
    return EXIT.completed;
  });
}

/** `actorloop dlq redrive <messageId>`: sends it again and marks it redriven; exit 3 for an unknown ID. */
export async function dlqRedriveCommand(id: string, opts: { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  return withBus(config, async (bus) => {
    const r = await redriveDeadLetter(bus, id);
    if (opts.json) {
      out.stdout.write(`${JSON.stringify({ id: r.letter.id, actorId: r.letter.actorId, inboxSeq: r.inboxSeq, duplicate: r.duplicate })}\n`);
      return EXIT.completed;
    }
    out.stdout.write(`${r.letter.id} sent again to the inbox of ${r.letter.actorId}\n`);
    out.stderr.write(`a host running ${r.letter.actorId} takes it at once; if none does: ${cliLine(config, 'resume', r.letter.actorId)}\n`);
    return EXIT.completed;
  });
}

function clip(text: string, max = 80): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
