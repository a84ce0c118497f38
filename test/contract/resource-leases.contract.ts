import { describe, expect, it } from 'vitest';
import type { ResourceLeaseStore } from '../../src/bus/resource-lease-port.js';
import { newId } from '../../src/protocol/ids.js';

const T0 = 1_700_000_000_000;

/**
 * What every `ResourceLeaseStore` must do (design §6b, §8): an exclusive holder alone, shared
 * holders together but never beside an exclusive one, a holder's own lease taken again, renewal
 * and release by holder, lapse by the caller's clock, and any resource key (paths with every
 * character) usable. `leases()` gives the implementation under test; its TTL must be well over
 * the suite's run time (expiry is tested with `nowMs` alone).
 */
export function resourceLeaseContract(name: string, leases: () => ResourceLeaseStore): void {
  describe(`resource lease contract: ${name}`, () => {
    const resource = (): string => `path:/work/ws ${newId('call')}/src/ü.ts`;

    it('gives a free resource to one exclusive holder and refuses it to any other while it is live', async () => {
      const r = resource();
      const a = await leases().take(r, 'agt_a/call_1', 'exclusive', T0);
      expect(a).toEqual({ resource: r, holder: 'agt_a/call_1', mode: 'exclusive', expiresAt: T0 + leases().ttlMs });
      expect(await leases().take(r, 'agt_b/call_2', 'exclusive', T0 + 1)).toBeNull();
      expect(await leases().take(r, 'agt_b/call_2', 'shared', T0 + 1)).toBeNull();
      expect(await leases().holdersOf(r, T0 + 1)).toEqual(['agt_a/call_1']);
      // another resource is another lease
      expect(await leases().take(`${r}x`, 'agt_b/call_2', 'exclusive', T0 + 1)).not.toBeNull();
    });

    it('lets shared holders in together, and an exclusive one only once they all let go', async () => {
      const r = resource();
      const a = (await leases().take(r, 'agt_a/call_1', 'shared', T0))!;
      const b = (await leases().take(r, 'agt_b/call_2', 'shared', T0))!;
      expect(a).not.toBeNull();
      expect(b).not.toBeNull();
      expect(await leases().holdersOf(r, T0)).toEqual(['agt_a/call_1', 'agt_b/call_2']);
      expect(await leases().take(r, 'agt_c/call_3', 'exclusive', T0)).toBeNull();
      await leases().release(a);
      expect(await leases().take(r, 'agt_c/call_3', 'exclusive', T0)).toBeNull();
      await leases().release(b);
      expect(await leases().take(r, 'agt_c/call_3', 'exclusive', T0)).not.toBeNull();
    });

    it('lets its holder take it again (a call run again after a crash)', async () => {
      const r = resource();
      await leases().take(r, 'agt_a/call_1', 'exclusive', T0);
      const again = (await leases().take(r, 'agt_a/call_1', 'exclusive', T0 + 5))!;
      expect(again.expiresAt).toBe(T0 + 5 + leases().ttlMs);
      expect(await leases().holdersOf(r, T0 + 6)).toEqual(['agt_a/call_1']);
    });

    it('frees a released resource at once, and a second release takes nobody else\'s lease', async () => {
      const r = resource();
      const a = (await leases().take(r, 'agt_a/call_1', 'exclusive', T0))!;
      await leases().release(a);
      expect(await leases().holdersOf(r, T0 + 1)).toEqual([]);
      expect(await leases().take(r, 'agt_b/call_2', 'exclusive', T0 + 1)).not.toBeNull();
      await leases().release(a);
      expect(await leases().holdersOf(r, T0 + 2)).toEqual(['agt_b/call_2']);
    });

    it('renews its holder\'s lease; a lapsed one goes to another holder, and its renewal is then lost', async () => {
      const r = resource();
      const a = (await leases().take(r, 'agt_a/call_1', 'exclusive', T0))!;
      const renewed = (await leases().renew(a, T0 + 10))!;
      expect(renewed.expiresAt).toBe(T0 + 10 + leases().ttlMs);
      const lapsed = T0 + 10 + leases().ttlMs;
      expect(await leases().holdersOf(r, lapsed)).toEqual([]);
      expect((await leases().take(r, 'agt_b/call_2', 'exclusive', lapsed))!.holder).toBe('agt_b/call_2');
      expect(await leases().renew(renewed, lapsed + 1)).toBeNull();
      expect(await leases().holdersOf(r, lapsed + 1)).toEqual(['agt_b/call_2']);
    });

    it('lets exactly one of many racing exclusive holders take a free resource, and every shared one', async () => {
      const r = resource();
      const got = await Promise.all(Array.from({ length: 8 }, (_, i) => leases().take(r, `agt_${i}/call`, 'exclusive', T0)));
      expect(got.filter((l) => l !== null)).toHaveLength(1);
      const s = resource();
      const shared = await Promise.all(Array.from({ length: 8 }, (_, i) => leases().take(s, `agt_${i}/call`, 'shared', T0)));
      expect(shared.filter((l) => l !== null)).toHaveLength(8);
      expect(await leases().holdersOf(s, T0)).toHaveLength(8);
    });
  });
}
