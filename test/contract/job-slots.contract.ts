import { describe, expect, it } from 'vitest';
import type { JobSlotStore } from '../../src/jobs/job-slot-port.js';
import { newId } from '../../src/protocol/ids.js';

const T0 = 1_700_000_000_000;

/**
 * What every `JobSlotStore` must do (design §6a, `max_running_jobs` per tree): at most `max` jobs
 * of a tree hold a place, however many take at once and from however many hosts (`stores()` gives
 * the stores of the hosts taking: two on the KV one); a job taking again keeps its one place (and
 * moves to the host that took it), and a release is idempotent.
 */
export function jobSlotContract(name: string, stores: () => JobSlotStore[]): void {
  describe(`job slot contract: ${name}`, () => {
    const tree = () => newId('agent');

    it('of twelve jobs taking places at once from every host, exactly max get one; the refused are told who holds them', async () => {
      const t = tree();
      const all = stores();
      const jobs = Array.from({ length: 12 }, () => newId('job'));
      const takes = await Promise.all(jobs.map((j, i) => all[i % all.length]!.take(t, j, `host_${i % all.length}`, 4, T0)));
      expect(takes.filter((r) => r.taken)).toHaveLength(4);
      const refused = takes.find((r) => !r.taken);
      const held = jobs.filter((_, i) => takes[i]!.taken).sort();
      expect(refused && !refused.taken ? Object.keys(refused.holders).sort() : []).toEqual(held);
      expect(Object.keys(await all[0]!.holders(t)).sort()).toEqual(held);
      // another tree has places of its own
      expect(await all[0]!.take(tree(), jobs[0]!, 'host_0', 1, T0)).toEqual({ taken: true });
    });

    it('a job taking again keeps its one place, on the host that took it last; a release frees it once', async () => {
      const t = tree();
      const [a, b] = [newId('job'), newId('job')];
      const s = stores()[0]!;
      expect(await s.take(t, a, 'host_1', 1, T0)).toEqual({ taken: true });
      expect(await s.take(t, a, 'host_1', 1, T0 + 1)).toEqual({ taken: true });
      // its next holder after host_1 died
      expect(await s.take(t, a, 'host_2', 1, T0 + 2)).toEqual({ taken: true });
      expect(await s.holders(t)).toEqual({ [a]: { hostId: 'host_2', atMs: T0 } });
      expect(await s.take(t, b, 'host_1', 1, T0 + 3)).toEqual({ taken: false, holders: { [a]: { hostId: 'host_2', atMs: T0 } } });
      await s.release(t, a);
      await s.release(t, a);
      expect(await s.holders(t)).toEqual({});
      expect(await s.take(t, b, 'host_1', 1, T0 + 4)).toEqual({ taken: true });
    });
  });
}
