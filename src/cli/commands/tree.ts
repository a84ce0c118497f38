import type { EffectiveConfig } from '../../config/config.js';
import { readTreeView, watchTree } from '../../client/tree.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime, type Runtime } from '../runtime.js';
import { answerLines, drawTreeViews, treeLines, treeRootOf, type TreeOptions } from '../tree/tree-view.js';
import { terminalColumns } from '../terminal-width.js';

/**
 * `actorloop tree <rootId> [--follow] [--json]`: the agents of a tree from their logs. With
 * `--follow` it goes on until the tree is settled (no agent runs, starts, recovers or waits): on a
 * terminal the tree is redrawn in place, else each change is one line (`--json`: one snapshot).
 */
export async function treeCommand(agentId: string, opts: TreeOptions, config: EffectiveConfig, out: Out): Promise<number> {
  // reading logs: a client login is all it needs
  const rt = await openRuntime(config, createLogger(config), { role: 'client' });
  try {
    const rootId = await treeRootOf(rt, agentId, out);
    if (!opts.follow) {
      const view = await readTreeView({ reader: rt.reader, rootId });
      // the commands that answer are never cut: a person copies them
      out.stdout.write(opts.json ? `${JSON.stringify(view)}\n` : `${[...treeLines(view, terminalColumns(out)), ...answerLines(config, view)].join('\n')}\n`);
      return EXIT.completed;
    }
    return await followTreeView(rt, rootId, opts, out);
  } finally {
    await rt.close();
  }
}

async function followTreeView(rt: Runtime, rootId: string, opts: TreeOptions, out: Out): Promise<number> {
  return drawTreeViews((signal) => watchTree({ reader: rt.reader, rootId, signal }), opts, out);
}
