import { describe, expect, it } from 'vitest';
import { hasCode } from '../../src/protocol/errors.js';
import { draft, type EventDraft } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import type { ActorLogs, StoredEvent, TreeEvent } from '../../src/store/log-port.js';

const say = (content: string): EventDraft => draft('user/message', { messageId: newId('message'), content });
const fresh = () => ({ seq: 0, streamSeq: 0 });

async function collect<T extends StoredEvent>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of it) out.push(e);
  return out;
}

const contents = (events: StoredEvent[]) => events.map((s) => (s.event.data as { content: string }).content);

/**
 * What every `ActorLogs` implementation must do (design §4): gapless seqs, fencing by the last
 * stream sequence (a zombie incarnation stops), a seq committed once, reads from a seq, to a fixed
 * end, and live; and reads of a whole tree (every actor under one root) in stream order from a
 * stream-seq cursor, to the end and live. `logs()` gives the implementation under test, opened before the suite runs.
 */
export function logContract(name: string, logs: () => ActorLogs): void {
  describe(`log contract: ${name}`, () => {
    const root = newId('agent');
    const writer = (actorId: string, position = fresh(), epoch = 1) => logs().writer({ rootId: root, actorId, position, epoch });

    it('commits drafts as one commit with gapless seqs, and reads them back in order', async () => {
      const actorId = newId('agent');
      const w = writer(actorId, fresh(), 4);
      const first = await w.commit([say('a'), say('b')]);
      const second = await w.commit([say('c')]);
      expect([...first, ...second].map((e) => [e.seq, e.epoch, e.actor])).toEqual([[1, 4, actorId], [2, 4, actorId], [3, 4, actorId]]);
      const read = await collect(logs().reader.read(root, actorId));
      expect(contents(read)).toEqual(['a', 'b', 'c']);
      // one commit is one stream sequence: the first two share it
      expect(read[0]!.streamSeq).toBe(read[1]!.streamSeq);
      expect(read[2]!.streamSeq).toBeGreaterThan(read[1]!.streamSeq);
      expect(w.position()).toEqual({ seq: 3, streamSeq: read[2]!.streamSeq });
      expect(await logs().reader.end(root, actorId)).toEqual(w.position());
      expect(await w.commit([])).toEqual([]);
    });

    it('reads from a seq, from a stream seq hint, and to a fixed end', async () => {
      const actorId = newId('agent');
      const w = writer(actorId);
      for (const c of ['a', 'b', 'c', 'd']) await w.commit([say(c)]);
      expect(contents(await collect(logs().reader.read(root, actorId, { afterSeq: 2 })))).toEqual(['c', 'd']);
      const all = await collect(logs().reader.read(root, actorId));
      expect(contents(await collect(logs().reader.read(root, actorId, { afterSeq: 2, fromStreamSeq: all[2]!.streamSeq })))).toEqual(['c', 'd']);
      const end = await logs().reader.end(root, actorId);
      await w.commit([say('e')]);
      expect(contents(await collect(logs().reader.read(root, actorId, { end })))).toEqual(['a', 'b', 'c', 'd']);
      expect(await collect(logs().reader.read(root, newId('agent')))).toEqual([]);
      expect(await logs().reader.end(root, newId('agent'))).toEqual({ seq: 0, streamSeq: 0 });
    });

    it('keeps actors apart, with stream seqs rising over all of them', async () => {
      const [x, y] = [newId('agent'), newId('agent')];
      const wx = writer(x);
      const wy = writer(y);
      await wx.commit([say('x1')]);
      await wy.commit([say('y1')]);
      await wx.commit([say('x2')]);
      const rx = await collect(logs().reader.read(root, x));
      const ry = await collect(logs().reader.read(root, y));
      expect(contents(rx)).toEqual(['x1', 'x2']);
      expect(ry.map((s) => s.event.seq)).toEqual([1]);
      expect(rx[0]!.streamSeq < ry[0]!.streamSeq && ry[0]!.streamSeq < rx[1]!.streamSeq).toBe(true);
    });

    it('refuses a writer whose expected sequence is stale, and that zombie refuses every later commit', async () => {
      const actorId = newId('agent');
      const old = writer(actorId, fresh(), 1);
      await old.commit([say('a')]);
      // a new incarnation starts from the end it read, and commits
      const next = writer(actorId, await logs().reader.end(root, actorId), 2);
      await next.commit([say('b')]);
      // the old one still thinks it is at seq 1: refused, and stopped for good
      await expect(old.commit([say('zombie')])).rejects.toSatisfy((e) => hasCode(e, 'store.fenced'));
      await expect(old.commit([say('again')])).rejects.toSatisfy((e) => hasCode(e, 'store.fenced'));
      await next.commit([say('c')]);
      expect(contents(await collect(logs().reader.read(root, actorId)))).toEqual(['a', 'b', 'c']);
    });

    it('stores a seq once: a second writer of the same seq (the same message ID) is refused', async () => {
      const actorId = newId('agent');
      const a = writer(actorId, fresh(), 1);
      const b = writer(actorId, fresh(), 1);
      await a.commit([say('a')]);
      await expect(b.commit([say('b')])).rejects.toSatisfy((e) => hasCode(e, 'store.fenced'));
      const read = await collect(logs().reader.read(root, actorId));
      expect(read.map((s) => [s.event.seq, (s.event.data as { content: string }).content])).toEqual([[1, 'a']]);
    });

    it('refuses an invalid event and stores nothing of its commit', async () => {
      const actorId = newId('agent');
      const w = writer(actorId);
      await expect(w.commit([say('ok'), { type: 'user/message', data: { nope: 1 } } as unknown as EventDraft]))
        .rejects.toSatisfy((e) => hasCode(e, 'store.invalid_event'));
      expect(w.position()).toEqual(fresh());
      await w.commit([say('after')]);
      expect((await collect(logs().reader.read(root, actorId))).map((s) => s.event.seq)).toEqual([1]);
    });

    it('follows live: what is there, then each commit as it lands, until aborted', async () => {
      const actorId = newId('agent');
      const w = writer(actorId);
      await w.commit([say('a')]);
      await w.commit([say('b')]);
      const stop = new AbortController();
      const seen: string[] = [];
      const following = (async () => {
        for await (const s of logs().reader.follow(root, actorId, { afterSeq: 1, signal: stop.signal })) {
          seen.push((s.event.data as { content: string }).content);
          if (seen.length === 3) stop.abort();
        }
      })();
      await w.commit([say('c')]);
      await w.commit([say('d')]);
      await following;
      expect(seen).toEqual(['b', 'c', 'd']);
    });

    /** Two actors under a fresh root and one under another, committing in turn: a, x1, b, y1, c. */
    async function twoTrees() {
      const [rootA, rootB] = [newId('agent'), newId('agent')];
      const [a, child, other] = [newId('agent'), newId('agent'), newId('agent')];
      const wa = logs().writer({ rootId: rootA, actorId: a, position: fresh(), epoch: 1 });
      const wc = logs().writer({ rootId: rootA, actorId: child, position: fresh(), epoch: 1 });
      const wo = logs().writer({ rootId: rootB, actorId: other, position: fresh(), epoch: 1 });
      await wa.commit([say('a1'), say('a2')]);
      await wo.commit([say('x1')]);
      await wc.commit([say('c1')]);
      await wo.commit([say('y1')]);
      await wa.commit([say('a3')]);
      return { rootA, rootB, a, child, other, wa, wc, wo };
    }

    const placed = (events: TreeEvent[]) => events.map((s) => [s.actorId, (s.event.data as { content: string }).content]);

    it('reads a tree: only its actors, in stream order across them, each event with its actor', async () => {
      const { rootA, rootB, a, child, other } = await twoTrees();
      const tree = await collect(logs().reader.readTree(rootA));
      expect(placed(tree)).toEqual([[a, 'a1'], [a, 'a2'], [child, 'c1'], [a, 'a3']]);
      expect(tree.every((s) => s.event.actor === s.actorId)).toBe(true);
      // stream order: the sequences never fall, and a commit's events share one
      expect(tree.map((s) => s.streamSeq)).toEqual([...tree.map((s) => s.streamSeq)].sort((x, y) => x - y));
      expect(tree[0]!.streamSeq).toBe(tree[1]!.streamSeq);
      // the same events, with the same sequences, as each actor's own read
      const own = await collect(logs().reader.read(rootA, child));
      expect(tree.filter((s) => s.actorId === child).map((s) => [s.event.id, s.streamSeq])).toEqual(own.map((s) => [s.event.id, s.streamSeq]));
      expect(placed(await collect(logs().reader.readTree(rootB)))).toEqual([[other, 'x1'], [other, 'y1']]);
      expect(await collect(logs().reader.readTree(newId('agent')))).toEqual([]);
    });

    it('reads a tree from a stream-seq cursor, to the end as of the call', async () => {
      const { rootA, a, child, wc } = await twoTrees();
      const tree = await collect(logs().reader.readTree(rootA));
      // a cursor resumes after a whole commit: a1 and a2 share the first
      expect(placed(await collect(logs().reader.readTree(rootA, { afterStreamSeq: tree[0]!.streamSeq })))).toEqual([[child, 'c1'], [a, 'a3']]);
      expect(await collect(logs().reader.readTree(rootA, { afterStreamSeq: tree.at(-1)!.streamSeq }))).toEqual([]);
      const reading = logs().reader.readTree(rootA, { afterStreamSeq: tree[2]!.streamSeq })[Symbol.asyncIterator]();
      const first = await reading.next();
      await wc.commit([say('c2')]);
      const rest: TreeEvent[] = [];
      for (let r = await reading.next(); !r.done; r = await reading.next()) rest.push(r.value);
      expect(placed([first.value as TreeEvent, ...rest])).toEqual([[a, 'a3']]); // c2 landed after the read began
      expect(placed(await collect(logs().reader.readTree(rootA, { afterStreamSeq: tree.at(-1)!.streamSeq })))).toEqual([[child, 'c2']]);
    });

    it('follows a tree: what is there after the cursor, then each commit of any of its actors, until aborted', async () => {
      const { rootA, a, child, wa, wc, wo } = await twoTrees();
      const tree = await collect(logs().reader.readTree(rootA));
      const stop = new AbortController();
      const seen: TreeEvent[] = [];
      const following = (async () => {
        for await (const s of logs().reader.followTree(rootA, { afterStreamSeq: tree[0]!.streamSeq, signal: stop.signal })) {
          seen.push(s);
          if (seen.length === 5) stop.abort();
        }
      })();
      await wo.commit([say('x2')]); // another root's: never seen
      await wc.commit([say('c2')]);
      await wa.commit([say('a4'), say('a5')]);
      await following;
      expect(placed(seen)).toEqual([[child, 'c1'], [a, 'a3'], [child, 'c2'], [a, 'a4'], [a, 'a5']]);
      expect(seen.map((s) => s.streamSeq)).toEqual([...seen.map((s) => s.streamSeq)].sort((x, y) => x - y));
    });

    it('ends a tree follow on abort while it waits for a commit, and on a signal aborted before it starts', async () => {
      const { rootA } = await twoTrees();
      const stop = new AbortController();
      const seen: TreeEvent[] = [];
      const following = (async () => {
        for await (const s of logs().reader.followTree(rootA, { signal: stop.signal })) seen.push(s);
      })();
      setTimeout(() => stop.abort(), 100);
      await following;
      expect(seen.length).toBe(4);
      expect(await collect(logs().reader.followTree(rootA, { signal: stop.signal }))).toEqual([]);
    });
  });
}
