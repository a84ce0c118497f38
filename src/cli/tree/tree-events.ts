import { followTree } from '../../client/follower.js';
import { ROOT_NAME } from '../../client/tree.js';
import { ConfigError } from '../../protocol/errors.js';
import { EXIT } from '../exit-codes.js';
import { EventDescriber, eventLine, type Out } from '../output.js';
import type { Runtime } from '../runtime.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { terminalText } from '../terminal-text.js';
import { treeRootOf } from './tree-view.js';

/** Names are padded to this many characters at least, so the events line up in a small tree. */
const NAME_WIDTH = 8;

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
  let width = NAME_WIDTH;
  const print = (actorId: string, e: Parameters<EventDescriber['describe']>[0]): void => {
    if (e.type === 'subagent/spawn_requested') names.set(e.data.childId, e.data.name);
    if (opts.json) {
      out.stdout.write(eventLine(e));
      return;
    }
    let d = describers.get(actorId);
    if (!d) describers.set(actorId, (d = new EventDescriber()));
    // a child is spawned before its log begins: its name is known by its first event
    const name = terminalText(names.get(actorId) ?? actorId);
    width = Math.max(width, name.length);
    out.stdout.write(`${name.padEnd(width)}  ${d.describe(e)}\n`);
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
