import type { Logger } from 'pino';
import type { FaultOrderOutcome } from '../../bus/fault-order-channel.js';
import type { FaultOrder } from '../../protocol/fault-orders.js';
import { FAULT_NOW } from '../../protocol/fault-points.js';
import type { ArmableFaultInjector } from './faults.js';

/** What a host's fault order taker needs. */
export interface FaultOrderTakerOptions {
  /** This host's name (its leases' holder): the `hostId` of every reply. */
  hostId: string;
  /** The host was started with `--allow-faults`; without it every order is refused. */
  allowFaults: boolean;
  /** True while this host holds the actor's lease: an order for an actor it does not run is refused. */
  holds(actorId: string): boolean;
  faults: ArmableFaultInjector;
  logger: Logger;
}

/**
 * Decides a host's answer to each fault order: refused without `--allow-faults` or for an actor
 * it does not hold; else armed in the injector (a point: it fires, records and SIGKILLs there as
 * a configured `--fault` does), or for `now` a kill right after the reply is on the wire, whose
 * record names the point `now`.
 */
export function faultOrderTaker(o: FaultOrderTakerOptions): (order: FaultOrder) => FaultOrderOutcome {
  const base = { hostId: o.hostId, pid: process.pid };
  return (order) => {
    if (!o.allowFaults) {
      o.logger.warn({ order }, 'fault order refused: this host was started without --allow-faults');
      return {
        reply: { ...base, armed: false, code: 'host.faults_disabled', message: `host ${o.hostId} takes no fault orders: start it with \`actorloop host --allow-faults\`` },
      };
    }
    if (!o.holds(order.actorId)) {
      return { reply: { ...base, armed: false, code: 'host.not_holding', message: `host ${o.hostId} does not hold ${order.actorId} now` } };
    }
    o.logger.warn({ order }, 'fault order armed');
    const reply = { ...base, armed: true as const, point: order.point };
    if (order.point === FAULT_NOW) return { reply, then: () => o.faults.killNow(order.actorId, FAULT_NOW) };
    o.faults.arm({ point: order.point, actorId: order.actorId, nth: order.nth ?? 1, action: 'kill' });
    return { reply };
  };
}
