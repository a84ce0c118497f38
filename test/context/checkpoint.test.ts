import { describe, expect, it } from 'vitest';
import { applyCheckpoint, checkpointText, compactionRange, enoughGain, missingPins, pinnedLines, PINNED_LINES_MAX, type PinnedFacts } from '../../src/context/checkpoint.js';
import type { HistoryItem } from '../../src/protocol/history.js';

function turn(steps: number): HistoryItem[] {
  const h: HistoryItem[] = [{ role: 'user', content: 'fix the slug bug' }];
  for (let i = 0; i < steps; i++) {
    h.push({ role: 'assistant', content: null, toolCalls: [{ id: `a${i}`, name: 'read_file', arguments: '{}' }, { id: `b${i}`, name: 'list_dir', arguments: '{}' }] });
    h.push({ role: 'tool', callId: `a${i}`, name: 'read_file', content: `file ${i}` }, { role: 'tool', callId: `b${i}`, name: 'list_dir', content: `dir ${i}` });
  }
  return h;
}

const PINS: PinnedFacts = {
  task: 'fix the slug bug',
  goal: { objective: 'all tests pass', phase: 'active', revision: 2 },
  corrections: ['use the helper in util.js, not a regex'],
  filesChanged: [{ path: 'src/slug.js', digest: 'sha256:abc' }],
  verifications: [{ command: 'npm test', ok: true }],
  plan: '[x] read\n[>] fix',
  openApprovals: ['apr_1'],
  openQuestions: [],
  outcomeUnknown: [{ callId: 'call_9', tool: 'shell', reason: 'killed mid-call' }],
  running: [{ id: 'agt_CHILD', name: 'log-reader' }],
  permissions: { approvalMode: 'auto-edit', readOnly: false, tools: ['read_file', 'shell'] },
};

describe('compaction core', () => {
  it('picks whole closed steps after the task and before the newest kept, never splitting a call from its result', () => {
    const h = turn(5);
    expect(compactionRange(h, 2)).toEqual({ from: 1, to: 10 });
    const r = compactionRange(h, 0)!;
    expect(r).toEqual({ from: 1, to: h.length });
    for (const x of [r.from, r.to]) expect(h[x]?.role ?? 'end').not.toBe('tool');
    expect(compactionRange(h, 5)).toBeNull();
    expect(compactionRange([{ role: 'user', content: 'x' }], 0)).toBeNull();
  });

  it('keeps every required item on a line of its own, and a candidate missing one is named', () => {
    const text = checkpointText('read the files; the bug is in slugify', PINS, { from: 1, to: 10 });
    expect(missingPins(text, PINS)).toEqual([]);
    for (const { line } of pinnedLines(PINS)) expect(text).toContain(line);
    const lossy = text.split('\n').filter((l) => !l.startsWith('Outcome unknown') && !l.startsWith('User, later')).join('\n');
    expect(missingPins(lossy, PINS)).toEqual(['correction 1', 'unknown call_9']);
  });

  it('replaces the range with the checkpoint, the task first and the tail verbatim, and compacts an earlier checkpoint again', () => {
    const h = turn(6);
    const c = applyCheckpoint(h, compactionRange(h, 2)!, 'summary one', PINS);
    expect(c.history[0]).toBe(h[0]);
    expect(c.history[1]).toEqual({ role: 'user', content: c.text });
    expect(c.history.slice(2)).toEqual(h.slice(-6));
    expect(c.kept).toContain('task');
    expect(c.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const again = compactionRange([...c.history, ...turn(3).slice(1)], 2)!;
    expect(again.from).toBe(1);
  });

  it('commits only what saves the minimum', () => {
    expect(enoughGain(10_000, 2_000, 1_000)).toBe(true);
    expect(enoughGain(10_000, 9_500, 1_000)).toBe(false);
  });
});

describe('a checkpoint of a long session', () => {
  it('keeps the newest hundred files, corrections and verifications by name and counts the older ones on one line each', () => {
    const pins: PinnedFacts = {
      task: 'fix it', goal: null, corrections: Array.from({ length: 130 }, (_, i) => `note ${i}`),
      filesChanged: Array.from({ length: 1_000 }, (_, i) => ({ path: `src/f${i}.ts`, digest: null })),
      verifications: [], plan: null, openApprovals: [], openQuestions: [], outcomeUnknown: [], running: [],
      permissions: { approvalMode: 'auto-edit', readOnly: false, tools: ['read_file'] },
    };
    const c = applyCheckpoint([{ role: 'user', content: 'fix it' }, { role: 'assistant', content: 'x', toolCalls: [] }], { from: 1, to: 2 }, 'summary', pins);
    const lines = c.text.split('\n');
    expect(lines.filter((l) => l.startsWith('Changed: src/'))).toHaveLength(PINNED_LINES_MAX);
    expect(lines).toContain('Changed: 900 more files (named in the log\'s checkpoint/committed)');
    expect(lines).toContain('Changed: src/f999.ts');
    expect(lines).not.toContain('Changed: src/f0.ts');
    expect(lines).toContain('User, earlier: 30 more messages (in the log)');
    expect(lines).toContain('User, later: note 129');
    expect(missingPins(c.text, pins)).toEqual([]);
  });
});
