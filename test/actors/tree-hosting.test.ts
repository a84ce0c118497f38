import { describe, expect, it } from 'vitest';
import { createMemoryDirectory } from '../../src/bus/memory-directory.js';
import { createMemoryTreeSlots } from '../../src/bus/memory-tree-slots.js';
import type { ActorStatus } from '../../src/bus/directory.js';
import { TreeHosting, type TreeHost } from '../../src/actors/tree/tree-hosting.js';
import { DEFAULT_SUBAGENT_LIMITS } from '../../src/protocol/subagents.js';

const NOW = 1_700_000_000_000;

/** Tree hosting over a memory directory and slot store; nothing is hosted (only the places are used). */
function hosting() {
  const directory = createMemoryDirectory();
  const slots = createMemoryTreeSlots();
  const host: TreeHost = { hosts: () => false, handOver: () => null, isStopped: false, create: async () => undefined, hydrate: async () => undefined };
  const tree = new TreeHosting(host, {
    directory, slots, clock: { nowMs: () => NOW }, limits: DEFAULT_SUBAGENT_LIMITS,
    // a place is all this test takes: no inbox or log is reached
    inbox: {} as never, reader: {} as never,
  });
  const entry = (actorId: string, status: ActorStatus) => directory.put({
    actorId, kind: 'subagent', parentId: 'agt_P', rootId: 'agt_R', status, title: actorId, workspace: '/ws',
    createdAt: new Date(NOW).toISOString(), updatedAt: new Date(NOW).toISOString(), labels: {},
  });
  return { port: tree.port, slots, entry };
}

describe('places of a tree whose release was lost', () => {
  it('a full tree gives back the place of a child the directory says is over, a minute after it was taken, and takes it', async () => {
    const { port, slots, entry } = hosting();
    await entry('agt_DONE', 'completed');
    await slots.take('agt_R', 'agt_DONE', 'msg_a', 1, NOW - 30_000);
    // half a minute: its follow-up's mail may still be on its way
    expect(await port.takeSlot('agt_R', 'agt_NEW', 'msg_b', 1)).toEqual({ taken: false, running: 1 });
    await slots.release('agt_R', 'agt_DONE', null);
    await slots.take('agt_R', 'agt_DONE', 'msg_a', 1, NOW - 61_000);
    expect(await port.takeSlot('agt_R', 'agt_NEW', 'msg_b', 1)).toEqual({ taken: true });
  });

  it('keeps a running child\'s place however old, and one the directory does not know for ten minutes', async () => {
    const { port, slots, entry } = hosting();
    await entry('agt_RUN', 'running');
    await slots.take('agt_R', 'agt_RUN', 'msg_a', 2, NOW - 3_600_000);
    await slots.take('agt_R', 'agt_UNBORN', 'msg_u', 2, NOW - 300_000);
    expect(await port.takeSlot('agt_R', 'agt_NEW', 'msg_b', 2)).toEqual({ taken: false, running: 2 });
    await slots.release('agt_R', 'agt_UNBORN', null);
    await slots.take('agt_R', 'agt_UNBORN', 'msg_u', 2, NOW - 601_000);
    expect(await port.takeSlot('agt_R', 'agt_NEW', 'msg_b', 2)).toEqual({ taken: true });
    expect(await port.takeSlot('agt_R', 'agt_OTHER', 'msg_c', 2)).toEqual({ taken: false, running: 2 });
  });
});
