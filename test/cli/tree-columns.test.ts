// The lines of `tree` in columns: the names in one column so the IDs line up whatever the names'
// lengths; on a terminal every line cut to its width with an ellipsis (a name cut to its column),
// in a pipe every line whole.
import { describe, expect, test } from 'vitest';
import type { TreeAgent, TreeView } from '../../src/client/tree.js';
import { treeLines } from '../../src/cli/tree/tree-view.js';

const ROOT = 'agt_01TREEROOT0000000000000000';
const CHILD = 'agt_01TREECHILD000000000000000';
const GRAND = 'agt_01TREEGRAND000000000000000';

function agent(actorId: string, name: string, depth: number, over: Partial<TreeAgent> = {}): TreeAgent {
  return {
    actorId, name, parentId: null, depth, status: 'running', waitingFor: null, step: 1, tool: null, tokens: 44, estimated: false, costUsd: null, children: [], ...over,
  };
}

const view = (agents: TreeAgent[]): TreeView => ({
  rootId: ROOT, agents, total: { agents: agents.length, tokens: 44 * agents.length, estimated: false, costUsd: null }, settled: false,
});

describe('tree lines', () => {
  test('the IDs line up under names of any length', () => {
    const lines = treeLines(view([agent(ROOT, 'main', 0), agent(CHILD, 'investigator', 1), agent(GRAND, 'reader', 2)]));
    expect(lines).toEqual([
      `main            ${ROOT}  running · step 1 · 44 tokens · cost unknown`,
      `  investigator  ${CHILD}  running · step 1 · 44 tokens · cost unknown`,
      `    reader      ${GRAND}  running · step 1 · 44 tokens · cost unknown`,
      'total: 3 agents · 132 tokens · cost unknown',
    ]);
    expect(new Set(lines.slice(0, 3).map((l) => l.indexOf('agt_'))).size).toBe(1);
  });

  test('on a terminal each line is cut to its width and a long name to its column; in a pipe nothing is cut', () => {
    const long = 'a-subagent-whose-name-the-model-made-very-long';
    const waiting = agent(CHILD, long, 1, { status: 'waiting', waitingFor: { kind: 'approval', ids: ['apr_01J00000000000000000000000', 'apr_01J00000000000000000000001'] } });
    const v = view([agent(ROOT, 'main', 0), waiting]);
    const onTerminal = treeLines(v, 80);
    for (const l of onTerminal) expect(l.length).toBeLessThan(80);
    expect(onTerminal[1]).toMatch(/^ {2}a-subagent-whose-name…  agt_01TREEC/);
    expect(onTerminal[1]!.endsWith('…')).toBe(true);
    expect(new Set(onTerminal.slice(0, 2).map((l) => l.indexOf('agt_'))).size).toBe(1);
    const piped = treeLines(v);
    expect(piped[1]).toBe(`  ${long}  ${CHILD}  waiting for approval apr_01J00000000000000000000000, apr_01J00000000000000000000001 · step 1 · 44 tokens · cost unknown`);
    expect(piped[0]!.startsWith(`main${' '.repeat(22)}${ROOT}`)).toBe(true);
  });
});
