// The gateway's event stream goes out a commit at a time: `commitBatches` groups a reader's
// events by stream sequence, ending a commit when the next event has another sequence or when
// the reader has to wait (the next commit is not committed yet).
import { describe, expect, test } from 'vitest';
import type { ActorEvent } from '../../src/protocol/events.js';
import type { TreeEvent } from '../../src/store/log-port.js';
import { commitBatches } from '../../src/server/event-stream.js';

const ev = (streamSeq: number, seq: number): TreeEvent => ({ actorId: 'agt_a', streamSeq, event: { seq, id: `e${seq}` } as unknown as ActorEvent });

/** A source that yields commits, each event a microtask apart, and waits a timer between commits (a live reader's wait on the bus). */
async function* source(commits: number[][], gate?: Promise<void>): AsyncGenerator<TreeEvent> {
  let seq = 0;
  for (const [i, c] of commits.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, 5));
    if (i === commits.length - 1 && gate) await gate;
    for (const streamSeq of c) yield ev(streamSeq, ++seq);
  }
}

describe('commitBatches', () => {
  test('groups events by commit, back to back or with waits between', async () => {
    const out: number[][] = [];
    for await (const b of commitBatches(source([[3, 3, 3], [7], [9, 9]]))) out.push(b.map((e) => e.streamSeq));
    expect(out).toEqual([[3, 3, 3], [7], [9, 9]]);
  });

  test('hands a commit over while the next is not there yet', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const it = commitBatches(source([[1, 1], [2]], gate))[Symbol.asyncIterator]();
    // the second commit waits on the gate: the first must arrive without it
    expect((await it.next()).value!.map((e: TreeEvent) => e.event.seq)).toEqual([1, 2]);
    open();
    expect((await it.next()).value!.map((e: TreeEvent) => e.streamSeq)).toEqual([2]);
    expect((await it.next()).done).toBe(true);
  });

  test('a consumer that stops early returns the source', async () => {
    let returned = false;
    async function* src(): AsyncGenerator<TreeEvent> {
      try {
        yield ev(1, 1);
        await new Promise((r) => setTimeout(r, 5));
        yield ev(2, 2);
      } finally {
        returned = true;
      }
    }
    for await (const b of commitBatches(src())) {
      expect(b).toHaveLength(1);
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(returned).toBe(true);
  });
});
