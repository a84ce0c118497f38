import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { holdResources, inTree, leaseResources } from '../../src/actors/effects/resource-holds.js';
import { createMemoryResourceLeases } from '../../src/bus/memory-resource-leases.js';
import { emptyProjection } from '../../src/store/projection.js';

const logger = pino({ level: 'silent' });
const x = (resource: string) => ({ resource, mode: 'exclusive' as const });
const opts = (signal = new AbortController().signal) => ({ signal, nowMs: () => Date.now(), logger });

describe('resource holds', () => {
  it('lease only the write-mode paths and the workspace-scoped process, in one order', () => {
    expect(leaseResources([
      { key: 'path:/w/b.txt', mode: 'write' },
      { key: 'path:/w/a.txt', mode: 'read' },
      { key: 'process', mode: 'write' },
      { key: 'plan', mode: 'write' },
      { key: 'path:/w/a.txt', mode: 'write' },
    ], '/w')).toEqual([
      { resource: 'path:/w/a.txt', mode: 'exclusive' },
      { resource: 'path:/w/b.txt', mode: 'exclusive' },
      { resource: 'process:/w', mode: 'exclusive' },
    ]);
    // file writes hold their workspace shared
    expect(leaseResources([{ key: 'path:/w/a.txt', mode: 'write' }], '/w')).toEqual([
      { resource: 'path:/w/a.txt', mode: 'exclusive' },
      { resource: 'process:/w', mode: 'shared' },
    ]);
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
    const first = await holdResources(store, [x('path:/w/a')], 'agt_a/call_1', opts());
    let second = false;
    const waiting = holdResources(store, [x('path:/w/a')], 'agt_b/call_2', opts()).then((h) => {
      second = true;
      return h;
    });
    // the second polls the held lease; give it a few looks
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 20));
    expect(second).toBe(false);
    first.release();
    const h = await waiting;
    expect(await store.holdersOf('path:/w/a', Date.now())).toEqual(['agt_b/call_2']);
    h.release();
    await new Promise((r) => setTimeout(r, 0));
    expect(await store.holdersOf('path:/w/a', Date.now())).toEqual([]);
  });

  it('stop waiting on an abort, and hold nothing of what they took', async () => {
    const store = createMemoryResourceLeases();
    const other = await holdResources(store, [x('path:/w/b')], 'agt_a/call_1', opts());
    const ac = new AbortController();
    const waiting = holdResources(store, [x('path:/w/a'), x('path:/w/b')], 'agt_b/call_2', opts(ac.signal));
    await new Promise((r) => setTimeout(r, 30));
    expect(await store.holdersOf('path:/w/a', Date.now())).toEqual(['agt_b/call_2']);
    ac.abort(new Error('interrupted'));
    await expect(waiting).rejects.toThrow('interrupted');
    await new Promise((r) => setTimeout(r, 0));
    expect(await store.holdersOf('path:/w/a', Date.now())).toEqual([]);
    other.release();
  });

  it('get a resource whose holder crashed once its lease lapses', async () => {
    const store = createMemoryResourceLeases({ ttlMs: 100 });
    // taken and never renewed nor released: its process died
    await store.take('path:/w/a', 'agt_dead/call_1', 'exclusive', Date.now());
    const h = await holdResources(store, [x('path:/w/a')], 'agt_b/call_2', opts());
    expect(await store.holdersOf('path:/w/a', Date.now())).toEqual(['agt_b/call_2']);
    h.release();
  });

  it('let a process wait for file writes in its workspace, and file writes go on together', async () => {
    const store = createMemoryResourceLeases();
    const a = await holdResources(store, leaseResources([{ key: 'path:/w/a', mode: 'write' }], '/w'), 'agt_a/call_1', opts());
    const b = await holdResources(store, leaseResources([{ key: 'path:/w/b', mode: 'write' }], '/w'), 'agt_b/call_2', opts());
    let shell = false;
    const waiting = holdResources(store, leaseResources([{ key: 'process', mode: 'write' }], '/w'), 'agt_c/call_3', opts()).then((h) => {
      shell = true;
      return h;
    });
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 20));
    expect(shell).toBe(false);
    a.release();
    b.release();
    (await waiting).release();
    expect(shell).toBe(true);
  });
});
