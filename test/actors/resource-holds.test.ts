import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { holdResources, inTree, leaseResources } from '../../src/actors/resource-holds.js';
import { createMemoryResourceLeases } from '../../src/bus/memory-resource-leases.js';
import { emptyProjection } from '../../src/store/projection.js';

const logger = pino({ level: 'silent' });
const opts = (signal = new AbortController().signal) => ({ signal, nowMs: () => Date.now(), logger });

describe('resource holds', () => {
  it('lease only the write-mode paths and the workspace-scoped process, in one order', () => {
    expect(leaseResources([
      { key: 'path:/w/b.txt', mode: 'write' },
      { key: 'path:/w/a.txt', mode: 'read' },
      { key: 'process', mode: 'write' },
      { key: 'plan', mode: 'write' },
      { key: 'path:/w/a.txt', mode: 'write' },
    ], '/w')).toEqual(['path:/w/a.txt', 'path:/w/b.txt', 'process:/w']);
  });

  it('are taken only by agents of a tree', () => {
    const p = emptyProjection('agt_x');
    expect(inTree(p)).toBe(false);
    p.children = {};
    expect(inTree(p)).toBe(false);
    p.children = { agt_c: { requestId: 'msg_r', name: 'c', mode: 'background', callId: 'call_1', state: 'spawned', notices: 0 } };
    expect(inTree(p)).toBe(true);
  });

  it('make a second call wait until the first lets go', async () => {
    const store = createMemoryResourceLeases();
    const first = await holdResources(store, ['path:/w/a'], 'agt_a/call_1', opts());
    let second = false;
    const waiting = holdResources(store, ['path:/w/a'], 'agt_b/call_2', opts()).then((h) => {
      second = true;
      return h;
    });
    // the second polls the held lease; give it a few looks
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 20));
    expect(second).toBe(false);
    first.release();
    const h = await waiting;
    expect(await store.holderOf('path:/w/a', Date.now())).toBe('agt_b/call_2');
    h.release();
    await new Promise((r) => setTimeout(r, 0));
    expect(await store.holderOf('path:/w/a', Date.now())).toBeNull();
  });

  it('stop waiting on an abort, and hold nothing of what they took', async () => {
    const store = createMemoryResourceLeases();
    const other = await holdResources(store, ['path:/w/b'], 'agt_a/call_1', opts());
    const ac = new AbortController();
    const waiting = holdResources(store, ['path:/w/a', 'path:/w/b'], 'agt_b/call_2', opts(ac.signal));
    await new Promise((r) => setTimeout(r, 30));
    expect(await store.holderOf('path:/w/a', Date.now())).toBe('agt_b/call_2');
    ac.abort(new Error('interrupted'));
    await expect(waiting).rejects.toThrow('interrupted');
    await new Promise((r) => setTimeout(r, 0));
    expect(await store.holderOf('path:/w/a', Date.now())).toBeNull();
    other.release();
  });

  it('get a resource whose holder crashed once its lease lapses', async () => {
    const store = createMemoryResourceLeases({ ttlMs: 100 });
    // taken and never renewed nor released: its process died
    await store.take('path:/w/a', 'agt_dead/call_1', Date.now());
    const h = await holdResources(store, ['path:/w/a'], 'agt_b/call_2', opts());
    expect(await store.holderOf('path:/w/a', Date.now())).toBe('agt_b/call_2');
    h.release();
  });
});
