import { describe, expect, it } from 'vitest';
import type { TreeSlotStore } from '../../src/bus/tree-slot-port.js';
import { newId } from '../../src/protocol/ids.js';

const T0 = 1_700_000_000_000;

/**
 * What every `TreeSlotStore` must do (design §6b, `max_children_per_tree`): at most `max`
 * children of a tree hold a place, however many take at once and from however many connections
 * (`stores()` gives the stores of the hosts taking: two on the KV one); a token taken again is
 * taken once, a child's second token takes no second place, and a release is idempotent.
 */
export function treeSlotContract(name: string, stores: () => TreeSlotStore[]): void {
  describe(`tree slot contract: ${name}`, () => {
    const root = () => newId('agent');

    it('of twelve children taking places at once from every host, exactly max get one; the refused are told who holds them', async () => {
      const r = root();
      const all = stores();
      const children = Array.from({ length: 12 }, () => newId('agent'));
      const takes = await Promise.all(children.map((c, i) => all[i % all.length]!.take(r, c, `msg_${i}`, 4, T0)));
      expect(takes.filter((t) => t.taken)).toHaveLength(4);
      const refused = takes.find((t) => !t.taken);
      expect(refused && !refused.taken ? Object.keys(refused.holders).sort() : []).toEqual(children.filter((_, i) => takes[i]!.taken).sort());
      // another tree has places of its own
      expect(await all[0]!.take(root(), children[0]!, 'msg_x', 1, T0)).toEqual({ taken: true });
    });

    it('takes a token again once (a spawn retried after a crash), and a second token of the same child without a second place', async () => {
      const r = root();
      const [a, b] = [newId('agent'), newId('agent')];
      const s = stores()[0]!;
      expect(await s.take(r, a, 'msg_spawn', 1, T0)).toEqual({ taken: true });
      expect(await s.take(r, a, 'msg_spawn', 1, T0 + 1)).toEqual({ taken: true });
      expect(await s.take(r, a, 'msg_follow', 1, T0 + 2)).toEqual({ taken: true });
      expect(await s.take(r, b, 'msg_other', 1, T0 + 3)).toMatchObject({ taken: false });
      // giving back one token keeps the place while the other is held
      await s.release(r, a, ['msg_spawn']);
      expect(await s.take(r, b, 'msg_other', 1, T0 + 4)).toMatchObject({ taken: false });
      await s.release(r, a, ['msg_follow']);
      await s.release(r, a, ['msg_follow']);
      expect(await s.take(r, b, 'msg_other', 1, T0 + 5)).toEqual({ taken: true });
      // null gives back every token
      await s.release(r, b, null);
      expect(await s.take(r, a, 'msg_again', 1, T0 + 6)).toEqual({ taken: true });
    });
  });
}
