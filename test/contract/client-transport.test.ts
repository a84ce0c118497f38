// The client transport contract over a real nats-server: the bus transport on a client runtime's
// own bus (its person login), the gateway transport through a real gateway (the in-process one the
// server tests use, over a real WebSocket) on another runtime of the same server.
import { createBusTransport } from '../../src/client/bus-transport.js';
import { GatewaySession } from '../../src/client/gateway-session.js';
import { createGatewayTransport } from '../../src/client/gateway-transport.js';
import { createJetStreamInboxes } from '../../src/bus/inbox.js';
import { INBOX_MAX_MSG_BYTES } from '../../src/bus/streams.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import { createJetStreamLogs } from '../../src/store/jetstream-log.js';
import type { Runtime } from '../../src/cli/runtime.js';
import { openGatewayFixture } from '../server/gateway-fixture.js';
import { clientTransportContract, type TransportSubject } from './client-transport.contract.js';

/** What both subjects share of a runtime: its logs written, its inboxes read. */
function sides(rt: Runtime): Pick<TransportSubject, 'writer' | 'inbox'> {
  const logs = createJetStreamLogs({ publisher: rt.bus.logJs, js: rt.bus.js, jsm: rt.bus.jsm });
  const inboxes = createJetStreamInboxes({ nc: rt.bus.nc, js: rt.bus.js, jsm: rt.bus.jsm, person: () => rt.bus.person() });
  return {
    writer: (rootId, actorId) => logs.writer({ rootId, actorId, position: { seq: 0, streamSeq: 0 }, epoch: 1 }),
    async inbox(actorId) {
      await inboxes.ensure(actorId);
      const inbox = await inboxes.open(actorId);
      const got: InboxMessage[] = [];
      for (;;) {
        const d = await inbox.next({ expiresMs: 1000 });
        if (!d) return got;
        got.push(d.message);
        await d.ack();
      }
    },
  };
}

clientTransportContract('bus', async () => {
  const fx = await openGatewayFixture();
  const rt = fx.rt;
  return {
    transport: createBusTransport({ reader: rt.reader, directory: rt.bus.directory, person: () => rt.bus.person(), limitBytes: INBOX_MAX_MSG_BYTES }),
    agent: async (e) => void (await rt.bus.directory.put(e)),
    ...sides(rt),
    close: () => fx.stop(),
  };
});

clientTransportContract('gateway', async () => {
  const fx = await openGatewayFixture();
  const gw = await fx.gateway();
  const session = await GatewaySession.open({ url: gw.url, token: null });
  return {
    transport: createGatewayTransport(session),
    async agent(e) {
      await fx.rt.bus.directory.put(e);
      // the gateway hosts nothing: an agent some process holds takes its mail where it is
      await fx.rt.pin(e.actorId);
    },
    ...sides(fx.rt),
    async close() {
      session.close();
      await fx.stop();
    },
  };
});
