import { describe, expect, it } from 'vitest';
import { TREE_FAULT_POINTS } from '../../src/actors/faults/faults.js';
import { CHAOS_POINTS, occurrences, parsePoints } from '../../src/cli/chaos/plan.js';
import { childViolations } from '../../src/cli/chaos/tree.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { LogBuilder } from '../actors/log-builder.js';

const ROOT = 'agt_root';
const CHILD = 'agt_child';
const USAGE = { inputTokens: 10, outputTokens: 2, estimated: false };

/** A child's log: its task taken, a turn that ended owing a notice, and (when `notified`) the notice sent. */
function child(opts: { ended?: boolean; notified?: boolean } = {}): ActorEvent[] {
  const b = new LogBuilder();
  b.push('inbox/received', { messageId: 'msg_task', kind: 'subagent_task', from: ROOT, content: '{}', request: null });
  b.startTurn('msg_task');
  if (opts.ended === false) return b.events;
  const turn = b.turn!;
  b.push('turn/end', { outcome: 'failed', reason: 'x', answer: null, steps: 0, toolCalls: 0, usage: USAGE, noticeOwed: true }, { turn });
  if (opts.notified !== false) b.push('subagent/notified', { parentId: ROOT, messageId: 'msg_notice', turn, outcome: 'failed' });
  return b.events;
}

/** The root's log, holding the child's notice when `received`. */
function root(received: boolean): ActorEvent[] {
  const b = new LogBuilder().receive('msg_1');
  if (received) b.push('inbox/received', { messageId: 'msg_notice', kind: 'subagent_completed', from: CHILD, content: '{}', request: null });
  return b.events;
}

/** The tree checks' own findings (the crafted logs are not whole runs: verify's other checks are not the point). */
const treeCodes = (logs: Map<string, ActorEvent[]>): string[] => childViolations(logs, ROOT).filter((v) => v.code.startsWith('chaos.')).map((v) => v.code);

describe('chaos over a tree', () => {
  it('a child whose notice reached its parent leaves nothing to say', () => {
    expect(treeCodes(new Map([[ROOT, root(true)], [CHILD, child()]]))).toEqual([]);
  });

  it('a notice the child sent and its parent\'s log lacks is lost', () => {
    expect(treeCodes(new Map([[ROOT, root(false)], [CHILD, child()]]))).toEqual(['chaos.notice_lost']);
  });

  it('a child that still owes its notice, or whose turn is open, when the root\'s turn has ended', () => {
    expect(treeCodes(new Map([[ROOT, root(false)], [CHILD, child({ notified: false })]]))).toEqual(['chaos.notice_owed']);
    expect(treeCodes(new Map([[ROOT, root(false)], [CHILD, child({ ended: false })]]))).toEqual(['chaos.child_turn_open']);
  });

  it('the points only a tree reaches are in `all` for a tree\'s script alone, and may be named for any', () => {
    expect(parsePoints('all')).toEqual([...CHAOS_POINTS]);
    expect(parsePoints('all', true)).toEqual([...CHAOS_POINTS, ...TREE_FAULT_POINTS]);
    expect(parsePoints('before:notice-ack,after:tool/start')).toEqual(['after:tool/start', 'before:notice-ack']);
  });

  it('before:notice-ack is reached once per notice or report a parent takes in', () => {
    const log = [...root(true), ...child()];
    expect(occurrences('before:notice-ack', log)).toBe(1);
    expect(occurrences('before:inbox-ack', log)).toBe(3);
  });
});
