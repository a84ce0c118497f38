import { followTree } from '../../client/follower.js';
import { ROOT_NAME } from '../../client/tree.js';
import { ConfigError } from '../../protocol/errors.js';
import { EXIT } from '../exit-codes.js';
import { EventDescriber, eventLine, type Out } from '../output.js';
import type { Runtime } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { terminalText } from '../../client/terminal-text.js';
import { cut, fitLine, terminalColumns } from '../terminal-width.js';
import { treeRootOf } from './tree-view.js';

/** Names are padded to this many characters at least, so the events line up in a small tree. */
const NAME_WIDTH = 8;
/** The widest the name column is: a longer name pushes its own line only (cut on a terminal). */
const NAME_WIDTH_MAX = 24;

/** Options of `actorloop events <rootId> --tree`. */
export interface TreeEventsOptions {
  after?: number;
  follow?: boolean;
  json?: boolean;
}

/**
 * `actorloop events <rootId> --tree`: every log of the tree merged in stream order (the order they
 * were committed), each line led by its agent's name (`main`, then the spawn names); `--json`
 * prints the events as they are, each naming its actor in `actor`. `--follow` goes on live until
 * Ctrl-C. A subagent's ID shows its root's tree.
 */
export async function treeEventsCommand(rt: Runtime, agentId: string, opts: TreeEventsOptions, out: Out): Promise<number> {
  if (opts.after !== undefined) {
    throw new ConfigError('cli.tree_after', '--after counts one agent\'s events, and --tree merges many', {
      hint: `drop --tree to read one agent's log after a seq, or --after to read the whole tree`,
    });
  }
  const rootId = await treeRootOf(rt, agentId, out);
  const names = new Map<string, string>([[rootId, ROOT_NAME]]);
  // each agent's incarnations are its own: one describer each
  const describers = new Map<string, EventDescriber>();
  // the column is as wide as the names of the tree so far, from the directory (a child's entry
  // holds its spawn name): fixed before the first line, so every line of it lines up
  // (a job's entry holds its name as its title)
  const known = opts.json ? [] : (await rt.bus.directory.list()).filter((e) => e.rootId === rootId).map((e) => (e.kind === 'job' ? e.title : (e.labels.name ?? '')));
  const width = Math.min(NAME_WIDTH_MAX, Math.max(NAME_WIDTH, ...known.map((n) => terminalText(n).length)));
  const columns = terminalColumns(out);
  const print = (actorId: string, e: Parameters<EventDescriber['describe']>[0]): void => {
    if (e.type === 'subagent/spawn_requested') names.set(e.data.childId, e.data.name);
    // a job's log names it in its first event
    else if (e.type === 'job/created') names.set(actorId, e.data.name);
    if (opts.json) {
      out.stdout.write(eventLine(e));
      return;
    }
    let d = describers.get(actorId);
    if (!d) describers.set(actorId, (d = new EventDescriber()));
    // a child is spawned before its log begins: its name is known by its first event
    const name = terminalText(names.get(actorId) ?? actorId);
    out.stdout.write(`${fitLine(`${(columns === null ? name : cut(name, width)).padEnd(width)}  ${d.describe(e)}`, columns)}\n`);
  };
  if (!opts.follow) {
    for await (const { actorId, event } of followTree({ reader: rt.reader, rootId })) print(actorId, event);
    return EXIT.completed;
  }
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const offStop = onStop(() => stop.abort());
  try {
    for await (const { actorId, event } of followTree({ reader: rt.reader, rootId, signal: stop.signal })) print(actorId, event);
  } finally {
    process.off('SIGINT', onSigint);
    offStop();
  }
  const signal = stopReceived();
  return signal === null ? EXIT.completed : exitCodeForSignal(signal);
}
