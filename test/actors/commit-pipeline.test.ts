import { describe, expect, it } from 'vitest';
import { ActorloopError } from '../../src/protocol/errors.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { CommitPipeline } from '../../src/actors/actor/commit-pipeline.js';
import { createMemoryLogs } from '../../src/store/memory-log.js';
import { emptyProjection } from '../../src/store/projection.js';

function pipeline() {
  const logs = createMemoryLogs();
  const actorId = 'agent_p';
  const log = logs.writer({ rootId: actorId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 });
  const projection = emptyProjection(actorId);
  const staged: ActorEvent[] = [];
  const commits: ActorEvent[][] = [];
  const p = new CommitPipeline({
    actorId, log, projection, nowMs: () => 0,
    staged: (e) => void staged.push(e),
    committed: (events) => void commits.push(events),
    refusal: () => new ActorloopError('actor.stopped', 'stopped'),
  });
  return { p, staged, commits, projection };
}

const note = (messageId: string) => ({ type: 'inbox/cancelled', data: { messageId, reason: 'test' } }) as const;

describe('the commit pipeline', () => {
  it('stamps each event once: the log commits the staged objects themselves', async () => {
    const { p, staged, commits } = pipeline();
    const e = p.stage(note('m1'));
    const waited = p.whenCommitted(e.seq);
    await p.flush();
    await waited;
    expect(commits[0]![0]).toBe(staged[0]);
    expect(e.id).not.toBe('');
  });

  it('inserts recovery/continuation after what recovery closed, renumbering what follows in place', async () => {
    const { p, staged, commits, projection } = pipeline();
    p.stage({ type: 'recovery/started', data: { fromSeq: 0, reason: 'test' } });
    p.beginRecovery(undefined);
    p.stage(note('m1'));
    p.noteRecovered('m1 closed');
    const after = p.stage(note('m2'));
    await p.flush();
    expect(commits[0]!.map((e) => [e.type, e.seq])).toEqual([
      ['recovery/started', 1], ['inbox/cancelled', 2], ['recovery/continuation', 3], ['inbox/cancelled', 4],
    ]);
    expect(commits[0]![3]).toBe(staged[2]);
    expect(after.seq).toBe(4);
    expect(projection.seq).toBe(4);
    expect(p.stage(note('m3')).seq).toBe(5);
  });

  it('once halted it drops launches, refuses to stage, and rejects the waiters of what it refused', async () => {
    const { p } = pipeline();
    const e = p.stage(note('m1'));
    const waited = p.whenCommitted(e.seq);
    let dropped = false;
    p.afterCommit(e.seq, { run: () => {}, drop: () => (dropped = true) });
    p.halt();
    expect(dropped).toBe(true);
    expect(() => p.stage(note('m2'))).toThrow('stopped');
    await expect(waited).rejects.toThrow('stopped');
  });

  it('holds a commit until the write it names is done, and keeps later commits behind it', async () => {
    const { p, commits } = pipeline();
    let written!: () => void;
    p.hold(new Promise<void>((resolve) => (written = resolve)));
    p.stage(note('m1'));
    const first = p.flush();
    // a later commit, with nothing held of its own, still goes after the held one
    p.stage(note('m2'));
    const second = p.flush();
    await new Promise((r) => setTimeout(r, 20));
    expect(commits).toEqual([]);
    written();
    await Promise.all([first, second]);
    expect(commits.map((c) => c.map((e) => e.seq))).toEqual([[1], [2]]);
    // once both are in, a commit goes straight to the log again
    p.stage(note('m3'));
    await p.flush();
    expect(commits).toHaveLength(3);
  });

  it('never commits what names a write that failed, nor anything after it', async () => {
    const { p, commits } = pipeline();
    p.hold(Promise.reject(new ActorloopError('store.blob_unwritten', 'blob not written')));
    p.stage(note('m1'));
    await expect(p.flush()).rejects.toThrow('blob not written');
    p.stage(note('m2'));
    await expect(p.flush()).rejects.toThrow('blob not written');
    expect(commits).toEqual([]);
  });
});
