import { hostname } from 'node:os';
import { localHolder } from '../../actors/hosting/lease-keeper.js';
import type { EffectiveConfig } from '../../config/config.js';
import { Host } from '../../actors/hosting/host.js';
import { faultOrderTaker } from '../../actors/faults/fault-order-taker.js';
import { listenForFaultOrders } from '../../bus/fault-order-channel.js';
import { EXIT } from '../exit-codes.js';
import { eventLine, type Out } from '../output.js';
import { createLogger, openRuntime } from '../runtime.js';
import { whenAskedToStop } from '../stop-signals.js';

/** Options of `actorloop host`. */
export interface HostCommandOptions {
  name?: string;
  leaseTtl?: number;
  json?: boolean;
  /** Take fault orders (`fault.kill` of a gateway with `--allow-faults`): kill this process at a point, or now. */
  allowFaults?: boolean;
}

/**
 * `actorloop host`: a long-running host. It claims a lease for every agent that needs a host
 * (mail in its inbox, or a lease that lapsed with its holder), runs it, renews its leases,
 * announces itself in the `hosts` bucket (so `run` and `resume` hand it their work), and on
 * SIGTERM, SIGHUP or Ctrl-C drains (running tools reach a recordable end, leases are released) and
 * exits 0: a drain is how a host is meant to stop.
 */
export async function hostCommand(opts: HostCommandOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const logger = createLogger(config);
  // a host runs agents and never speaks for a person: no client login
  const name = opts.name ?? localHolder();
  const rt = await openRuntime(config, logger, { person: false, hostName: name, ...(opts.leaseTtl ? { leaseTtlMs: opts.leaseTtl } : {}) });
  try {
    let host: Host | undefined;
    const supervisor = rt.supervisor({
      onCommit: (id, events) => {
        if (opts.json) for (const e of events) out.stdout.write(eventLine(e));
        host?.committed(id, events);
      },
      beforeReceive: async (id, message) => host?.mailArrives(id, message.kind),
    });
    const identity = { name, hostname: hostname(), pid: process.pid, startedAt: new Date().toISOString(), leaseTtlMs: rt.leases.ttlMs };
    host = new Host({
      name, supervisor, leases: rt.leases, directory: rt.bus.directory, logger, presence: { store: rt.hosts, identity },
    });
    // SIGTERM and SIGHUP reach it through main's catch (also when they came during the start)
    const { stopped, dispose: stopListening } = whenAskedToStop();
    try {
      await host.start();
      // listened for without --allow-faults too: the giver then hears a refusal, not silence
      const hosted = host;
      const orders = listenForFaultOrders(rt.bus.nc, name, faultOrderTaker({
        hostId: name, allowFaults: opts.allowFaults === true, holds: (id) => hosted.actors().includes(id), faults: rt.faults, logger,
      }), logger);
      out.stderr.write(`host ${name}: hosting agents (lease TTL ${Math.round(rt.leases.ttlMs / 1000)} s)${opts.allowFaults ? ', fault orders allowed' : ''}; SIGTERM, SIGHUP or Ctrl-C drains and exits\n`);
      const signal = await stopped;
      orders.close();
      out.stderr.write(`host ${name}: ${signal}, draining ${host.actors().length} agent(s)\n`);
      await host.drain();
      return EXIT.completed;
    } finally {
      stopListening();
    }
  } finally {
    await rt.close();
  }
}
