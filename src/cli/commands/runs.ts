import { homedir } from 'node:os';
import type { DirectoryEntry } from '../../bus/directory.js';
import type { ActorEvent } from '../../protocol/events.js';
import { agentStatus, runStatus, waitsOnChildren, type TreeStatus } from '../../client/status.js';
import { environmentOf, type EffectiveConfig } from '../../config/config.js';
import { emptyProjection, foldEvent, type Projection } from '../../store/projection.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine, placeholder } from '../hints.js';
import { nothingRunsIt } from '../left-work.js';

/** Rows `runs` shows unless `--limit` says otherwise (`--json` lists every agent). */
export const RUNS_DEFAULT_LIMIT = 20;

/** One agent as `runs` lists it: its directory entry with what its log says. */
export interface RunRow extends Omit<DirectoryEntry, 'status'> {
  /** From the log, not the directory's cache of it. */
  status: TreeStatus;
  turns: number;
  /** The task of its last turn (the first message that turn took); null before any. */
  lastTask: string | null;
  /** Subagents of its tree (its children, theirs, and on down): directory entries under its root. */
  children: number;
}

/** Options of `actorloop runs`. */
export interface RunsOptions {
  json?: boolean;
  limit?: number;
}

/**
 * The top agents of this data dir (subagents are counted in their root's `children`), newest first, each folded from its log: status, turns, the last
 * task. Only the `limit` newest logs are read (a data dir of many agents lists fast).
 */
export async function listRuns(rt: Runtime, limit: number | null): Promise<{ rows: RunRow[]; total: number }> {
  // a job is no run, nor a subagent: its owner's run lists it (`actorloop jobs`), and its log folds
  // to no turn, which would read as a child that never started
  const all = (await rt.bus.directory.list()).filter((e) => e.kind !== 'job' && e.kind !== 'workflow');
  const children = new Map<string, number>();
  // a subagent's entry names its tree's root: the whole tree counts, not the root's own children
  for (const e of all) if (e.parentId !== null) children.set(e.rootId, (children.get(e.rootId) ?? 0) + 1);
  const tops = all.filter((e) => e.parentId === null).sort((a, b) => b.updatedAt.localeCompare(a.updatedAt) || b.createdAt.localeCompare(a.createdAt));
  const shown = limit === null ? tops : tops.slice(0, limit);
  const rows = await Promise.all(shown.map(async (e): Promise<RunRow> => {
    // the status the log gives, not the directory's cache of it: a library run, a command that
    // left, a host that died may each have left the cache behind
    const p = emptyProjection(e.actorId);
    let lastTask: string | null = null;
    let claimed: readonly string[] = [];
    let lastType: ActorEvent['type'] | null = null;
    for await (const { event } of rt.reader.read(e.rootId, e.actorId, { afterSeq: 0 })) {
      foldEvent(p, event);
      lastType = event.type;
      if (event.type === 'turn/start') claimed = event.data.messageIds;
      else if (event.type === 'user/message' && claimed.includes(event.data.messageId)) {
        lastTask = event.data.content;
        claimed = [];
      }
    }
    // a task handed over and not taken yet is the task it is about to run
    lastTask ??= e.title;
    const tree = all.filter((c) => c.rootId === e.actorId && c.actorId !== e.actorId);
    return { ...e, status: await runStatusOf(rt, agentStatus(p, lastType), p, tree), turns: p.turns + (p.openTurn ? 1 : 0), lastTask, children: children.get(e.actorId) ?? 0 };
  }));
  return { rows, total: tops.length };
}

/**
 * A run's status (`runStatus`, the rule the gateway's runs list shares): the children's logs are
 * read only when the root waits on them.
 */
async function runStatusOf(rt: Runtime, status: TreeStatus, root: Projection, tree: DirectoryEntry[]): Promise<TreeStatus> {
  if (!waitsOnChildren(status, root)) return status;
  const children: TreeStatus[] = [];
  for (const c of tree) {
    const p = emptyProjection(c.actorId);
    let lastType: ActorEvent['type'] | null = null;
    for await (const { event } of rt.reader.read(c.rootId, c.actorId, { afterSeq: 0 })) {
      foldEvent(p, event);
      lastType = event.type;
    }
    children.push(agentStatus(p, lastType));
  }
  return runStatus(status, root, children);
}

/** A path for people: the home directory as `~`. */
function tildePath(path: string, home: string): string {
  return home !== '' && (path === home || path.startsWith(`${home}/`)) ? `~${path.slice(home.length)}` : path;
}

/** A text cut to `max` characters on one line, its first line only. */
function firstLine(text: string, max: number): string {
  const line = text.split('\n').find((l) => l.trim() !== '')?.trim() ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * `actorloop runs [--limit N]`: the agents of this data dir, newest first, under a header: ID,
 * status (from the log), turns, children, when it last changed, workspace, the last task's first
 * line. `--json`: one agent a line, every agent unless `--limit`.
 */
export async function runsCommand(opts: RunsOptions, config: EffectiveConfig, out: Out): Promise<number> {
  // reading logs: a client login is all it needs
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const limit = opts.limit ?? (opts.json ? null : RUNS_DEFAULT_LIMIT);
    const { rows, total } = await listRuns(rt, limit === 0 ? null : limit);
    if (opts.json) {
      for (const r of rows) out.stdout.write(`${JSON.stringify(r)}\n`);
      return EXIT.completed;
    }
    if (rows.length === 0) {
      out.stdout.write(`no runs yet: start one with \`${cliLine(config, 'run', placeholder('"<task>" --model scripted:<file.json>'))}\` or \`${cliLine(config, 'demo')}\`\n`);
      return EXIT.completed;
    }
    const home = environmentOf(config).HOME ?? homedir();
    const withChildren = rows.some((r) => r.children > 0);
    const table = rows.map((r) => [
      r.actorId,
      r.status,
      String(r.turns),
      ...(withChildren ? [String(r.children)] : []),
      r.updatedAt.slice(0, 19).replace('T', ' '),
      terminalText(tildePath(r.workspace, home)),
      terminalText(firstLine(r.lastTask ?? '', 60)),
    ]);
    const header = ['AGENT', 'STATUS', 'TURNS', ...(withChildren ? ['CHILDREN'] : []), 'UPDATED', 'WORKSPACE', 'LAST TASK'];
    const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
    const line = (cells: string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
    out.stdout.write(`${[line(header), ...table.map(line)].join('\n')}\n`);
    if (total > rows.length) out.stderr.write(`${rows.length} of ${total} agents shown; --limit ${total} shows them all\n`);
    // work let go reads as not running, with the command that carries it on
    for (const r of rows) if (r.status === 'released') out.stderr.write(`${r.actorId}: let go with work open; ${nothingRunsIt(config, r.actorId)}\n`);
    return EXIT.completed;
  } finally {
    await rt.close();
  }
}
