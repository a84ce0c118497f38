import { describe, expect, it } from 'vitest';
import type { ResourceLeaseStore } from '../../src/bus/resource-lease-port.js';
import { newId } from '../../src/protocol/ids.js';

const T0 = 1_700_000_000_000;

/**
 * What every `ResourceLeaseStore` must do (design §6b, §8): one holder per resource, taken by
 * CAS, renewed and released by CAS on the revision, lapsed by the caller's clock, and any
 * resource key (paths with every character) usable. `leases()` gives the implementation under
 * test; its TTL must be well over the suite's run time (expiry is tested with `nowMs` alone).
 */
export function resourceLeaseContract(name: string, leases: () => ResourceLeaseStore): void {
  describe(`resource lease contract: ${name}`, () => {
    const resource = (): string => `path:/work/ws ${newId('call')}/src/ü.ts`;

    it('gives a free resource to one holder and refuses it to another while it is live', async () => {
      const r = resource();
      const a = await leases().take(r, 'agt_a/call_1', T0);
      expect(a).toMatchObject({ resource: r, holder: 'agt_a/call_1', expiresAt: T0 + leases().ttlMs });
      expect(await leases().take(r, 'agt_b/call_2', T0 + 1)).toBeNull();
      expect(await leases().holderOf(r, T0 + 1)).toBe('agt_a/call_1');
      // another resource is another lease
      expect(await leases().take(`${r}x`, 'agt_b/call_2', T0 + 1)).not.toBeNull();
    });

    it('lets its holder take it again (a call run again after a crash) with a new revision', async () => {
      const r = resource();
      const first = (await leases().take(r, 'agt_a/call_1', T0))!;
      const again = (await leases().take(r, 'agt_a/call_1', T0 + 5))!;
      expect(again.revision).toBeGreaterThan(first.revision);
      // the earlier lease is stale now: its renewal is lost
      expect(await leases().renew(first, T0 + 6)).toBeNull();
    });

    it('frees a released resource at once, and a stale release deletes nobody else\'s lease', async () => {
      const r = resource();
      const a = (await leases().take(r, 'agt_a/call_1', T0))!;
      await leases().release(a);
      expect(await leases().holderOf(r, T0 + 1)).toBeNull();
      const b = (await leases().take(r, 'agt_b/call_2', T0 + 1))!;
      expect(b).not.toBeNull();
      await leases().release(a);
      expect(await leases().holderOf(r, T0 + 2)).toBe('agt_b/call_2');
    });

    it('renews by CAS, and a lapsed lease goes to another holder whose take fences the first', async () => {
      const r = resource();
      const a = (await leases().take(r, 'agt_a/call_1', T0))!;
      const renewed = (await leases().renew(a, T0 + 10))!;
      expect(renewed.revision).toBeGreaterThan(a.revision);
      expect(renewed.expiresAt).toBe(T0 + 10 + leases().ttlMs);
      expect(await leases().renew(a, T0 + 11)).toBeNull();
      const lapsed = T0 + 10 + leases().ttlMs;
      expect(await leases().holderOf(r, lapsed)).toBeNull();
      const b = (await leases().take(r, 'agt_b/call_2', lapsed))!;
      expect(b.holder).toBe('agt_b/call_2');
      expect(await leases().renew(renewed, lapsed + 1)).toBeNull();
    });

    it('lets exactly one of many racing holders take a free resource', async () => {
      const r = resource();
      const got = await Promise.all(Array.from({ length: 8 }, (_, i) => leases().take(r, `agt_${i}/call`, T0)));
      expect(got.filter((l) => l !== null)).toHaveLength(1);
    });
  });
}
