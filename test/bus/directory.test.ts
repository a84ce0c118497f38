import { describe, expect, it } from 'vitest';
import { openActorDirectory, statusAfter, type DirectoryEntry } from '../../src/bus/directory.js';
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

  it('ends a listing while an entry changes under it (a host writes statuses as it lists)', async () => {
    const entries = Array.from({ length: 3 }, () => entry());
    for (const e of entries) await t.bus.directory.put(e);
    for (let i = 0; i < 30; i++) {
      const changed = entries[i % entries.length]!;
      const listing = t.bus.directory.list();
      // the same key written again while the listing's consumer delivers
      const put = t.bus.directory.put({ ...changed, status: i % 2 === 0 ? 'running' : 'idle' });
      const listed = await Promise.race([
        listing,
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000)),
      ]);
      await put;
      expect(listed, `listing ${i} never ended`).not.toBeNull();
      // every actor once, whichever of its values the listing saw
      const ids = listed!.map((e) => e.actorId).filter((id) => entries.some((e) => e.actorId === id));
      expect(ids.sort()).toEqual(entries.map((e) => e.actorId).sort());
    }
  }, 60_000);

  it('refuses an invalid entry', async () => {
    await expect(t.bus.directory.put({ ...entry(), status: 'bogus' as never })).rejects.toMatchObject({ code: 'bus.invalid_entry' });
  });
});

describe('statusAfter', () => {
  it('keeps an agent whose turn ended owing its goal a continuation running, so a host takes it on', () => {
    const end = (extra: Record<string, unknown>) => ({ type: 'turn/end', data: { outcome: 'completed', ...extra } });
    expect(statusAfter(end({}))).toBe('completed');
    expect(statusAfter(end({ goalContinues: true }))).toBe('running');
  });
});
