import { describe, expect, it } from 'vitest';
import type { ActorDirectory, DirectoryEntry } from '../../src/bus/directory.js';
import { hasCode } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';

const entry = (over: Partial<DirectoryEntry> = {}): DirectoryEntry => {
  const actorId = over.actorId ?? newId('agent');
  return {
    actorId, kind: 'agent', parentId: null, rootId: actorId, status: 'running', title: 't', workspace: '/w',
    createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z', labels: {}, ...over,
  };
};

/**
 * What every `ActorDirectory` implementation must do (design §6): validated entries, the last put
 * of a key wins with a rising revision, and a listing of one entry per actor.
 */
export function directoryContract(name: string, directory: () => ActorDirectory): void {
  describe(`directory contract: ${name}`, () => {
    it('gets what was put, the last put of an actor winning, with rising revisions', async () => {
      const e = entry();
      const r1 = await directory().put(e);
      const r2 = await directory().put({ ...e, status: 'completed' });
      expect(r2).toBeGreaterThan(r1);
      expect(await directory().get(e.actorId)).toEqual({ ...e, status: 'completed' });
      expect(await directory().get(newId('agent'))).toBeUndefined();
    });

    it('lists one entry per actor, as last put', async () => {
      const a = entry();
      const b = entry({ parentId: a.actorId, rootId: a.actorId, kind: 'subagent' });
      await directory().put(a);
      await directory().put(b);
      await directory().put({ ...a, title: 'renamed' });
      const listed = (await directory().list()).filter((x) => x.actorId === a.actorId || x.actorId === b.actorId);
      expect(listed.sort((x, y) => x.actorId.localeCompare(y.actorId))).toEqual(
        [{ ...a, title: 'renamed' }, b].sort((x, y) => x.actorId.localeCompare(y.actorId)));
    });

    it('refuses an invalid entry and keeps what was there', async () => {
      const e = entry();
      await directory().put(e);
      await expect(directory().put({ ...e, status: 'bogus' as never })).rejects.toSatisfy((err) => hasCode(err, 'bus.invalid_entry'));
      expect(await directory().get(e.actorId)).toEqual(e);
    });
  });
}
