import { InvalidArgumentError, type Command } from 'commander';
import { loadConfig, type EffectiveConfig } from '../../config/config.js';
import type { ContextBudget, ContributionRecord } from '../../protocol/context-events.js';
import type { EventOf } from '../../protocol/events.js';
import { NotFoundError } from '../../protocol/errors.js';
import { idArgument } from '../id-arguments.js';
import type { CommandKit } from '../command-kit.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { entryOf } from '../hand-off.js';
import { createLogger, openRuntime } from '../runtime.js';

/** One prepared request of an agent's log, as `actorloop context` shows it. */
export interface RequestContext {
  turn: string;
  step: number;
  seq: number;
  digest: string;
  bytes: number;
  contributions: ContributionRecord[];
  budget: ContextBudget | null;
  /** The docs, skills and memory the log recorded for that turn (paths and versions). */
  loaded: Array<{ type: string; what: string; digest: string }>;
  /** The checkpoints the request holds, with what each kept (from their `checkpoint/committed`). */
  checkpoints: Array<{ id: string; kept: string[]; tokensBefore: number; tokensAfter: number }>;
}

function stepNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < 1) throw new InvalidArgumentError(`--step takes a step number (1, 2, …) of the turn, got "${value}"`);
  return n;
}

/** Adds `actorloop context` to the program. */
export function registerContextCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  return common(program.command('context').argument('<agentId>', 'the agent', idArgument('agent')))
    .description("what a step's request was made of: each contribution in the order sent, with its source, trust, tokens and whether it was cut, and the total against the window")
    .option('--step <n>', 'the step of the agent\'s last turn (default: its last prepared request)', stepNumber)
    .option('--turn <turnId>', 'a turn other than the last one that prepared a request')
    .option('--json', 'one JSON object')
    .action(act(async (id: string, o) => contextCommand(id, o, loadConfig(flags(o)), out)));
}

/** `actorloop context <agent>`: reads the agent's log and shows one prepared request's contributions. */
export async function contextCommand(agentId: string, opts: { step?: number; turn?: string; json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const entry = await entryOf(rt, agentId);
    const requests: RequestContext[] = [];
    const loaded = new Map<string, RequestContext['loaded']>();
    const committed = new Map<string, RequestContext['checkpoints'][number]>();
    // steps that ended context_cannot_fit: no request was sent after their rejection
    const refused: Array<{ turn: string; step: number; seq: number; reason: string; message: string }> = [];
    let stepIndex = 0;
    for await (const { event } of rt.reader.read(entry.rootId, agentId, { afterSeq: 0 })) {
      if (event.type === 'step/start') stepIndex = event.data.index;
      const turn = event.turn ?? '';
      if (event.type === 'doc/loaded') (loaded.get(turn) ?? loaded.set(turn, []).get(turn)!).push({ type: event.type, what: `${event.data.path}${event.data.placement === 'after_call' ? ' (after a call)' : ''}`, digest: event.data.digest });
      if (event.type === 'skills/indexed') (loaded.get(turn) ?? loaded.set(turn, []).get(turn)!).push({ type: event.type, what: event.data.skills.map((s) => s.name).join(', ') || '(none)', digest: event.data.textRef.digest });
      if (event.type === 'skill/loaded') (loaded.get(turn) ?? loaded.set(turn, []).get(turn)!).push({ type: event.type, what: event.data.path, digest: event.data.digest });
      if (event.type === 'memory/loaded') (loaded.get(turn) ?? loaded.set(turn, []).get(turn)!).push({ type: event.type, what: `${event.data.path}${event.data.summarized ? ' (index only)' : ''}`, digest: event.data.digest });
      if (event.type === 'compaction/rejected' && event.data.endsStep) refused.push({ turn, step: stepIndex, seq: event.seq, reason: event.data.reason, message: event.data.message });
      if (event.type === 'checkpoint/committed') committed.set(event.data.id, { id: event.data.id, kept: event.data.kept, tokensBefore: event.data.tokensBefore, tokensAfter: event.data.tokensAfter });
      if (event.type === 'request/prepared') {
        const e = event as EventOf<'request/prepared'>;
        requests.push({ turn, step: stepIndex, seq: e.seq, digest: e.data.digest, bytes: e.data.bytes, contributions: e.data.contributions ?? [], budget: e.data.budget ?? null, loaded: [], checkpoints: [] });
      }
    }
    const lastOf = <T extends { seq: number }>(xs: T[]): T | undefined => xs.at(-1);
    const newest = [lastOf(requests), lastOf(refused)].filter((x) => x !== undefined).sort((a, b) => a!.seq - b!.seq).at(-1);
    const turnId = opts.turn ?? newest?.turn;
    const ofTurn = requests.filter((r) => r.turn === turnId);
    const chosen = opts.step === undefined ? ofTurn.at(-1) : ofTurn.filter((r) => r.step === opts.step).at(-1);
    // the step asked for (or the turn's last) ended refusing to send what did not fit
    const refusal = refused.filter((r) => r.turn === turnId && (opts.step === undefined || r.step === opts.step)).at(-1);
    if (refusal && (!chosen || refusal.seq > chosen.seq)) {
      if (opts.json) out.stdout.write(`${JSON.stringify({ turn: refusal.turn, step: refusal.step, seq: refusal.seq, refused: { reason: refusal.reason, message: refusal.message } })}\n`);
      else out.stdout.write(`${agentId} · turn ${refusal.turn} · step ${refusal.step} · sent no request: context_cannot_fit: ${refusal.message}\n`);
      return EXIT.completed;
    }
    if (!chosen) {
      const steps = [...new Set(ofTurn.map((r) => r.step))];
      throw new NotFoundError('context.no_request', requests.length === 0
        ? `${agentId} has prepared no request yet`
        : `${agentId} prepared no request ${opts.step !== undefined ? `at step ${opts.step} ` : ''}in turn ${turnId}`, {
        hint: steps.length > 0 ? `its steps with a request: ${steps.join(', ')}` : 'list its turns with `actorloop events`',
      });
    }
    chosen.loaded = loaded.get(chosen.turn) ?? [];
    chosen.checkpoints = chosen.contributions.filter((c) => c.source === 'checkpoint').flatMap((c) => committed.get(c.scope) ?? []);
    if (opts.json) {
      out.stdout.write(`${JSON.stringify(chosen)}\n`);
      return EXIT.completed;
    }
    out.stdout.write(describe(agentId, chosen));
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}

/** The table a person reads. */
export function describe(agentId: string, r: RequestContext): string {
  const lines = [`${agentId} · turn ${r.turn} · step ${r.step} · request ${r.digest.slice(0, 19)} · ${r.bytes} bytes`];
  if (r.contributions.length === 0) {
    lines.push('this request was prepared before contributions were recorded: only its size is known');
    return `${lines.join('\n')}\n`;
  }
  const rows = r.contributions.map((c) => [c.source, c.scope, c.trust, String(c.tokens), c.cut ? 'cut' : '']);
  const head = ['SOURCE', 'SCOPE', 'TRUST', 'TOKENS', ''];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const row = (cells: string[]) => cells.map((c, i) => (i === 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  lines.push(row(head), ...rows.map(row));
  if (r.budget) {
    const b = r.budget;
    const est = b.estimated ? ' (estimated: four characters a token, the model\'s tokenizer is not known)' : '';
    lines.push(b.window === null
      ? `total ${b.tokens} tokens${est}; no context window known, so none was checked`
      : `total ${b.tokens} tokens + ${b.reserve} kept for the answer and the next observation = ${b.tokens + b.reserve} of a ${b.window}-token window${est}${b.tokens + b.reserve > b.window ? ' — did not fit: the step ended context_overflow' : ''}`);
  }
  for (const k of r.checkpoints) {
    lines.push(`checkpoint ${k.id}: replaced ${k.tokensBefore} tokens of closed steps with ${k.tokensAfter}; kept ${k.kept.join(', ')}`);
  }
  if (r.loaded.length > 0) {
    lines.push('recorded for the turn:');
    for (const l of r.loaded) lines.push(`  ${l.type.padEnd(14)} ${l.what} ${l.digest === '' ? '(no file)' : l.digest.slice(0, 19)}`);
  }
  return `${lines.join('\n')}\n`;
}
