// The answer lines `tree` prints under a tree that waits on a person: `--option` is offered only
// for a question that has options; a free-text question is answered with text.
import { describe, expect, test } from 'vitest';
import type { TreeAgent, TreeView } from '../../src/client/tree.js';
import { answerLines } from '../../src/cli/tree/tree-view.js';
import type { WhereConfig } from '../../src/cli/hints.js';

const where: WhereConfig = { sources: { data_dir: 'default' }, dataDir: '/home/me/.local/share/actorloop', natsUrl: null };

function waiting(actorId: string, waitingFor: TreeAgent['waitingFor']): TreeAgent {
  return { actorId, name: actorId, parentId: null, depth: 0, status: 'waiting', waitingFor, step: 1, tool: null, tokens: 0, estimated: false } as unknown as TreeAgent;
}

describe('tree answer lines', () => {
  test('a free-text question gets a text answer only; one with options names them', () => {
    const view = {
      agents: [
        waiting('agt_a', { kind: 'question', ids: ['q_free'], options: { q_free: [] } }),
        waiting('agt_b', { kind: 'question', ids: ['q_pick'], options: { q_pick: ['yes', 'no'] } }),
      ],
    } as unknown as TreeView;
    expect(answerLines(where, view)).toEqual([
      'answer:  actorloop answer agt_a q_free "<text>"',
      'answer:  actorloop answer agt_b q_pick "<text>" | --option <yes|no>',
    ]);
  });
});
