// Fault orders over a real nats-server: a giver hears null when nobody listens on the host's
// subject, the host's answer otherwise (its name may hold characters a subject may not); a body
// that is not an order is refused; what the taker does after answering runs once the answer is out.
import { describe, expect, test } from 'vitest';
import { listenForFaultOrders, sendFaultOrder } from '../../src/bus/fault-order-channel.js';
import type { FaultOrder } from '../../src/protocol/fault-orders.js';
import { faultSubject } from '../../src/bus/subjects.js';
import { hostKey } from '../../src/bus/hosts.js';
import { useTestBus } from '../helpers/test-bus.js';

const ORDER: FaultOrder = { actorId: 'agt_01J00000000000000000000000', point: 'after:tool/start', nth: 2, orderId: 'o1' };

describe('fault orders on the bus', () => {
  const t = useTestBus();

  test('nobody listening on the host\'s subject: null', async () => {
    expect(await sendFaultOrder(t.bus.nc, 'no-such-host', ORDER)).toBeNull();
  });

  test('the host named (dots and a colon in its name) gets the order and its answer comes back; then runs after it is out', async () => {
    const name = 'box.example.org:4242';
    const taken: FaultOrder[] = [];
    let thenRan = 0;
    const listener = listenForFaultOrders(t.bus.nc, name, (order) => {
      taken.push(order);
      return { reply: { armed: true, hostId: name, pid: 7, point: order.point }, then: () => void (thenRan += 1) };
    });
    try {
      await t.bus.nc.flush();
      const reply = await sendFaultOrder(t.bus.nc, name, ORDER);
      expect(reply).toEqual({ armed: true, hostId: name, pid: 7, point: 'after:tool/start' });
      expect(taken).toEqual([ORDER]);
      await expect.poll(() => thenRan).toBe(1);
      // another host's orders are not this one's
      expect(await sendFaultOrder(t.bus.nc, 'box', ORDER)).toBeNull();
    } finally {
      listener.close();
    }
  });

  test('a body that is not a fault order is refused without reaching the taker', async () => {
    const name = 'strict-host';
    let calls = 0;
    const listener = listenForFaultOrders(t.bus.nc, name, () => {
      calls += 1;
      return { reply: { armed: true, hostId: name, pid: 1, point: 'now' } };
    });
    try {
      await t.bus.nc.flush();
      const msg = await t.bus.nc.request(faultSubject(hostKey(name)), JSON.stringify({ actorId: 'agt_x', point: 'tool.before_start', orderId: 'o2' }), { timeout: 5_000 });
      expect(msg.json()).toMatchObject({ armed: false, hostId: name, code: 'host.fault_order_invalid', message: expect.stringContaining('not a fault point; one of: after:turn/start') });
      expect(calls).toBe(0);
    } finally {
      listener.close();
    }
  });
});
