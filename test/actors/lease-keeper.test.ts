// The leases a command holds for the agents it hosts in-process (`run`, `resume`): a renewal
// another holder won is lost, and so is one neither written nor read back (an election, a dead
// node): the command stops the agent there rather than write on a lease it may not hold.
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { createMemoryLeaseStore } from '../../src/bus/memory-leases.js';
import { LeaseKeeper } from '../../src/actors/hosting/lease-keeper.js';
import { BusError } from '../../src/protocol/errors.js';
import { until } from '../helpers/processes.js';

function keeperOn(leases: ReturnType<typeof createMemoryLeaseStore>) {
  const lost: Array<{ actorId: string; code: string | undefined }> = [];
  const keeper = new LeaseKeeper(leases, 'cmd:1', pino({ level: 'silent' }), (actorId, err) => lost.push({ actorId, code: (err as BusError).code }));
  return { keeper, lost };
}

test('a renewal neither written nor read back stops the agent, as a lost one does; one that failed otherwise is tried again', async () => {
  const leases = createMemoryLeaseStore({ ttlMs: 600 });
  const { keeper, lost } = keeperOn(leases);
  const renew = leases.renew.bind(leases);
  const failures: string[] = ['bus.lease_failed', 'bus.lease_unknown'];
  leases.renew = async (lease, nowMs) => {
    const code = failures.shift();
    if (code) throw new BusError(code, `renewal of ${lease.actorId}: ${code}`);
    return renew(lease, nowMs);
  };
  expect(await keeper.take('agt_a')).not.toBeNull();
  // the first failure is retried at the next pass; the unanswered one stops it
  await until('the agent let go', () => lost.length > 0, 5_000);
  expect(lost).toEqual([{ actorId: 'agt_a', code: 'bus.lease_unknown' }]);
  expect(failures).toEqual([]);
  await keeper.releaseAll();
});

test('a renewal another holder won stops the agent', async () => {
  const leases = createMemoryLeaseStore({ ttlMs: 600 });
  const { keeper, lost } = keeperOn(leases);
  leases.renew = async (lease) => {
    throw new BusError('bus.lease_lost', `the lease of ${lease.actorId} was lost`);
  };
  expect(await keeper.take('agt_b')).not.toBeNull();
  await until('the agent let go', () => lost.length > 0, 5_000);
  expect(lost).toEqual([{ actorId: 'agt_b', code: 'bus.lease_lost' }]);
  await keeper.releaseAll();
});
