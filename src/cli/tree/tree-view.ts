import type { TreeAgent, TreeView } from '../../client/tree.js';
import { EXIT } from '../exit-codes.js';
import { entryOf } from '../hand-off.js';
import type { Out } from '../output.js';
import type { Runtime } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { terminalText } from '../../client/terminal-text.js';
import { isJobEnd } from '../../protocol/job-events.js';
import { cut, fitLine, terminalColumns } from '../terminal-width.js';
import { answerCommands } from '../turn/approval-prompt.js';
import { cliLine, placeholder, type WhereConfig } from '../hints.js';

/** Options of `actorloop tree`. */
export interface TreeOptions {
  follow?: boolean;
  json?: boolean;
}

/**
 * The root of the tree `agentId` belongs to: itself for a top agent, its root (said on stderr) for
 * a subagent or a job; a NotFoundError for an agent this data dir does not know.
 */
export async function treeRootOf(rt: Runtime, agentId: string, out: Out): Promise<string> {
  const entry = await entryOf(rt, agentId);
  if (entry.rootId !== agentId) out.stderr.write(`${agentId} is a ${entry.kind === 'job' ? 'job' : 'subagent'} in the tree of ${entry.rootId}; showing that tree\n`);
  return entry.rootId;
}

/** `1,234 tokens` (`~` when any part was counted by actorloop). */
function tokensText(tokens: number, estimated: boolean): string {
  return `${estimated ? '~' : ''}${tokens.toLocaleString('en-US')} tokens`;
}

function costText(usd: number | null): string {
  return usd === null ? 'cost unknown' : `$${usd.toFixed(4)}`;
}

/** What an agent is doing, in words: its status, what it waits on, its open step and running tool. */
export function doingText(a: TreeAgent): string {
  if (a.job) return jobDoingText(a.job);
  let status: string = a.status;
  if (a.waitingFor) status = `waiting for ${a.waitingFor.kind === 'approval' ? 'approval' : 'an answer to'} ${a.waitingFor.ids.join(', ')}`;
  else if (a.status === 'released') status = 'released, nothing runs it';
  const parts = [status];
  if (a.step !== null) parts.push(`step ${a.step}`);
  if (a.tool !== null) parts.push(`▸ ${a.tool}`);
  return parts.join(' · ');
}

/** What a job is doing: `job running`, `job failed (timed_out) · exit 1`, `job completed · exit 0 · notice owed`. */
function jobDoingText(j: NonNullable<TreeAgent['job']>): string {
  const parts = [`job ${j.phase}${j.reason !== null && j.reason !== 'started' && j.reason !== 'exited' ? ` (${j.reason})` : ''}`];
  if (j.exitCode !== null) parts.push(`exit ${j.exitCode}`);
  if (j.attempts > 1) parts.push(`${j.attempts} attempts`);
  if (isJobEnd(j.phase) && !j.notified) parts.push('notice owed');
  return parts.join(' · ');
}

/** The widest the name column grows: a longer name pushes its own line only (cut on a terminal). */
const NAME_COLUMN_MAX = 24;

/** An agent's name indented by its depth, as a terminal may be given it (a name is the model's choice: shown, not sent). */
function indentedName(a: TreeAgent): string {
  return terminalText(`${'  '.repeat(a.depth)}${a.name}`);
}

/**
 * One agent's line: indented by depth, its name (padded to `nameWidth`, and cut to it with
 * `cutName`), ID, what it does, its tokens and cost.
 */
export function agentLine(a: TreeAgent, nameWidth = 0, cutName = false): string {
  const name = indentedName(a);
  // a shell job spends no tokens: its line says what it does alone
  const spent = a.job && a.tokens === 0 ? '' : ` · ${tokensText(a.tokens, a.estimated)} · ${costText(a.costUsd)}`;
  return `${(cutName ? cut(name, nameWidth) : name).padEnd(nameWidth)}  ${a.actorId}  ${terminalText(doingText(a))}${spent}`;
}

/**
 * The tree's lines: one per agent, root first, each followed by its subtree, then the total;
 * the names in one column, so the IDs line up. With `columns` (a terminal's width), a name is cut
 * to its column and each line to the terminal; without, every line is whole.
 */
export function treeLines(v: TreeView, columns: number | null = null): string[] {
  const n = v.total.agents;
  const jobs = v.agents.length - n;
  const nameWidth = Math.min(NAME_COLUMN_MAX, Math.max(0, ...v.agents.map((a) => indentedName(a).length)));
  const lines = [
    ...v.agents.map((a) => agentLine(a, nameWidth, columns !== null)),
    `total: ${n} agent${n === 1 ? '' : 's'}${jobs > 0 ? ` · ${jobs} job${jobs === 1 ? '' : 's'}` : ''} · ${tokensText(v.total.tokens, v.total.estimated)} · ${costText(v.total.costUsd)}`,
  ];
  return lines.map((l) => fitLine(l, columns));
}

/**
 * How to answer what the tree's agents wait for: a line per approval or question, naming the
 * agent that waits; and for an agent let go with work open, the command that carries it on.
 */
export function answerLines(config: WhereConfig, v: TreeView): string[] {
  const lines: string[] = [];
  for (const a of v.agents) {
    if (a.status === 'released') lines.push(`resume:  ${cliLine(config, 'resume', a.actorId)}`);
    for (const id of a.waitingFor?.ids ?? []) {
      lines.push(a.waitingFor!.kind === 'approval'
        ? `approve: ${answerCommands(config, a.actorId, id).approve}`
        : `answer:  ${cliLine(config, 'answer', a.actorId, id, placeholder(answerForm(a.waitingFor!.options?.[id] ?? [])))}`);
    }
  }
  return lines;
}

/** How a question is answered: an option is offered only when it has some. */
function answerForm(options: string[]): string {
  return options.length > 0 ? `"<text>" | --option <${options.join('|')}>` : '"<text>"';
}

/** What of an agent a line per change reports: not every attempt's tokens. */
function changeKey(a: TreeAgent): string {
  return `${a.parentId}\u0000${doingText(a)}`;
}

/**
 * Draws each view of a followed tree until it is settled or the person stops (`tree --follow`,
 * locally or through the gateway): redrawn in place on a terminal, else a line per change.
 */
export async function drawTreeViews(
  views: (signal: AbortSignal) => AsyncIterable<{ view: TreeView }>, opts: Pick<TreeOptions, 'json'>, out: Out,
): Promise<number> {
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const offStop = onStop(() => stop.abort());
  const redraw = out.stdout.isTTY === true && !opts.json;
  let drawn = 0;
  let shown = '';
  const keys = new Map<string, string>();
  const draw = (view: TreeView, first: boolean): void => {
    if (opts.json) {
      out.stdout.write(`${JSON.stringify(view)}\n`);
      return;
    }
    const lines = treeLines(view);
    if (redraw) {
      // a line wider than the terminal wraps, and the next redraw would move up too few rows
      const fitted = treeLines(view, terminalColumns(out));
      out.stdout.write(`${drawn > 0 ? `\x1b[${drawn}F\x1b[J` : ''}${fitted.join('\n')}\n`);
      drawn = fitted.length;
      shown = lines.join('\n');
      return;
    }
    if (first) {
      out.stdout.write(`${lines.join('\n')}\n`);
      return;
    }
    for (const a of view.agents) if (keys.get(a.actorId) !== changeKey(a)) out.stdout.write(`${agentLine(a).trimStart()}\n`);
    if (view.settled) out.stdout.write(`${lines.at(-1)}\n`);
  };
  try {
    let first = true;
    for await (const { view } of views(stop.signal)) {
      // on a terminal every figure is kept current; a line per change reports what an agent does
      const changed = redraw
        ? treeLines(view).join('\n') !== shown
        : first || view.settled || view.agents.some((a) => keys.get(a.actorId) !== changeKey(a));
      if (changed) {
        draw(view, first);
        for (const a of view.agents) keys.set(a.actorId, changeKey(a));
      }
      first = false;
      if (view.settled) break;
    }
  } finally {
    process.off('SIGINT', onSigint);
    offStop();
    stop.abort();
  }
  const signal = stopReceived();
  return signal === null ? EXIT.completed : exitCodeForSignal(signal);
}
