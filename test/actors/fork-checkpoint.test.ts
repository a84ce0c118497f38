import { describe, expect, it } from 'vitest';
import { FORK_TRANSCRIPT_CHARS, forkTranscript } from '../../src/actors/tree/child-task.js';
import type { HistoryItem } from '../../src/protocol/history.js';

// A forked child reads its parent's history from the parent's latest checkpoint: the task and the
// checkpoint whole, then the steps after it within the transcript's bound.

const checkpoint = ['Checkpoint: items 1-40 of this conversation were compacted into this summary.', "Task (the user's words): find the bug", 'Changed: src/a.ts (sha256:abc)', 'Summary of the compacted steps:', 'read forty files'].join('\n');

function history(tailItems: number, big: number): HistoryItem[] {
  const items: HistoryItem[] = [{ role: 'user', content: 'find the bug' }, { role: 'user', content: checkpoint }];
  for (let i = 0; i < tailItems; i++) {
    items.push({ role: 'assistant', content: null, toolCalls: [{ id: `c${i}`, name: 'read_file', arguments: `{"path":"f${i}"}` }] });
    items.push({ role: 'tool', callId: `c${i}`, name: 'read_file', content: `step ${i} ${'x'.repeat(big)}` });
  }
  return items;
}

describe('a fork from a checkpoint', () => {
  it('keeps the task and the checkpoint whole however long the steps after it are, and the newest steps within the bound', () => {
    const text = forkTranscript(history(30, 8_000), 1);
    expect(text).toContain('from its latest checkpoint');
    expect(text).toContain('user: find the bug');
    expect(text).toContain(checkpoint);
    expect(text).toContain('step 29 ');
    expect(text).not.toContain('step 0 ');
    expect(text.length).toBeLessThan(FORK_TRANSCRIPT_CHARS + checkpoint.length + 1_000);
  });

  it('without a checkpoint, cuts the oldest part as before (the task may go)', () => {
    const text = forkTranscript(history(30, 8_000));
    expect(text).not.toContain('from its latest checkpoint');
    expect(text).toContain('[… earlier history left out]');
    expect(text).not.toContain('user: find the bug');
  });
});
