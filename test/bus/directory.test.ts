import { describe, expect, it } from 'vitest';
import { openActorDirectory, type DirectoryEntry } from '../../src/bus/directory.js';
import { newId } from '../../src/protocol/ids.js';
import { useTestBus } from '../helpers/test-bus.js';

function entry(over: Partial<DirectoryEntry> = {}): DirectoryEntry {
  const actorId = over.actorId ?? newId('agent');
  return {
    actorId, kind: 'agent', parentId: null, rootId: actorId, status: 'idle', title: 'an agent',
    workspace: '/tmp/ws', createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z',
    labels: { team: 'a' }, ...over,
  };
}

describe('ActorDirectory', () => {
  const t = useTestBus();

  it('lists nothing when empty', async () => {
    expect(await t.bus.directory.list()).toEqual([]);
  });

  it('puts, gets and lists entries (last value per actor)', async () => {
    const root = entry();
    const child = entry({ kind: 'subagent', parentId: root.actorId, rootId: root.actorId });
    await t.bus.directory.put(root);
    await t.bus.directory.put(child);
    await t.bus.directory.put({ ...root, status: 'running', updatedAt: '2025-01-01T00:00:01.000Z' });

    expect(await t.bus.directory.get(root.actorId)).toEqual({ ...root, status: 'running', updatedAt: '2025-01-01T00:00:01.000Z' });
    expect(await t.bus.directory.get(newId('agent'))).toBeUndefined();
    const all = await t.bus.directory.list();
    expect(all.map((e) => e.actorId).sort()).toEqual([root.actorId, child.actorId].sort());
    expect(all.find((e) => e.actorId === root.actorId)?.status).toBe('running');

    const reopened = await openActorDirectory(t.bus.js);
    expect(await reopened.get(child.actorId)).toEqual(child);
  });

  it('refuses an invalid entry', async () => {
    await expect(t.bus.directory.put({ ...entry(), status: 'bogus' as never })).rejects.toMatchObject({ code: 'bus.invalid_entry' });
  });
});
