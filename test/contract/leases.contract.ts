import { describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../src/bus/lease-port.js';
import { hasCode } from '../../src/protocol/errors.js';
import { newId } from '../../src/protocol/ids.js';

const T0 = 1_700_000_000_000;

/**
 * What every `LeaseStore` implementation must do (design §6, §7): take by create, renew and
 * take over by CAS on the revision (the epoch, which only rises), release by CAS, expiry by the
 * caller's clock. `leases()` gives the implementation under test; its TTL must be well over
 * the suite's run time (expiry is tested with the `nowMs` argument alone).
 */
export function leaseContract(name: string, leases: () => LeaseStore): void {
  describe(`lease contract: ${name}`, () => {
    const ttl = () => leases().ttlMs;

    it('takes a free lease, and refuses it to another host while it is live', async () => {
      const id = newId('agent');
      const a = await leases().take(id, 'host-a', T0);
      expect(a).toMatchObject({ actorId: id, host: 'host-a', expiresAt: T0 + ttl() });
      expect(await leases().take(id, 'host-b', T0 + 1)).toBeNull();
      expect(await leases().get(id, T0 + 1)).toEqual(a);
    });

    it('renews by CAS: a new epoch each time, and a stale lease is lost', async () => {
      const id = newId('agent');
      const first = (await leases().take(id, 'host-a', T0))!;
      const renewed = await leases().renew(first, T0 + 10);
      expect(renewed.epoch).toBeGreaterThan(first.epoch);
      expect(renewed.expiresAt).toBe(T0 + 10 + ttl());
      await expect(leases().renew(first, T0 + 20)).rejects.toSatisfy((e) => hasCode(e, 'bus.lease_lost'));
    });

    it('lets the same host take its live lease again with a higher epoch, fencing the earlier one', async () => {
      const id = newId('agent');
      const first = (await leases().take(id, 'host-a', T0))!;
      const again = (await leases().take(id, 'host-a', T0 + 1))!;
      expect(again.epoch).toBeGreaterThan(first.epoch);
      await expect(leases().renew(first, T0 + 2)).rejects.toSatisfy((e) => hasCode(e, 'bus.lease_lost'));
    });

    it('takes over an expired lease, and only one of two racers wins it', async () => {
      const id = newId('agent');
      const held = (await leases().take(id, 'host-a', T0))!;
      const later = T0 + ttl() + 1;
      expect(await leases().get(id, later)).toBeNull();
      const [b, c] = await Promise.all([leases().take(id, 'host-b', later), leases().take(id, 'host-c', later)]);
      const winners = [b, c].filter((l) => l !== null);
      expect(winners).toHaveLength(1);
      expect(winners[0]!.epoch).toBeGreaterThan(held.epoch);
      await expect(leases().renew(held, later)).rejects.toSatisfy((e) => hasCode(e, 'bus.lease_lost'));
    });

    it('takes from a holder by CAS on its revision: refused once the holder renewed', async () => {
      const id = newId('agent');
      const held = (await leases().take(id, 'host-a', T0))!;
      const renewed = await leases().renew(held, T0 + 1);
      expect(await leases().takeFrom(held, 'host-b', T0 + 2)).toBeNull();
      const taken = (await leases().takeFrom(renewed, 'host-b', T0 + 3))!;
      expect(taken.host).toBe('host-b');
      expect(taken.epoch).toBeGreaterThan(renewed.epoch);
    });

    it('releases by CAS: free at once for another host, and a stale release deletes nothing', async () => {
      const id = newId('agent');
      const a = (await leases().take(id, 'host-a', T0))!;
      await leases().release(a);
      expect(await leases().get(id, T0 + 1)).toBeNull();
      const b = (await leases().take(id, 'host-b', T0 + 1))!;
      expect(b.epoch).toBeGreaterThan(a.epoch);
      await leases().release(a);
      expect(await leases().get(id, T0 + 2)).toEqual(b);
    });

    it('lists live leases only', async () => {
      const [x, y] = [newId('agent'), newId('agent')];
      const lx = (await leases().take(x, 'host-a', T0))!;
      await leases().take(y, 'host-a', T0 - ttl());
      const listed = (await leases().list(T0 + 1)).filter((l) => l.actorId === x || l.actorId === y);
      expect(listed).toEqual([lx]);
    });

    it('refuses an actor ID that cannot be a key', async () => {
      await expect(leases().take('bad.key', 'host-a', T0)).rejects.toSatisfy((e) => hasCode(e, 'bus.invalid_lease_key'));
    });
  });
}
