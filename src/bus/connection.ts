import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { createLivePublisher, createLogPublisher, type LivePublisher, type LogPublisher } from './log-publisher.js';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { createActorDirectory, type ActorDirectory } from './directory.js';
import { acquireEmbeddedNats, type EmbeddedNats } from './embedded.js';
import { ensureStreams } from './streams.js';

/** Options of `openBus`. */
export interface OpenBusOptions {
  /** A NATS server with JetStream; when unset, an embedded nats-server is used (design §6). */
  natsUrl?: string | null;
  /** Data dir of the embedded server. */
  dataDir: string;
  logger: Logger;
  /** Connection name shown by the server. */
  name?: string;
  /** nats-server binary for the embedded server. */
  binary?: string;
}

/** An open bus: the connection, JetStream handles, the actor directory. */
export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  /** The acked publish the log writers use: `js.publish` without nats.js's per-request overhead. */
  logJs: LogPublisher;
  jsm: JetStreamManager;
  url: string;
  /** True when the server is an embedded one (started here or reused). */
  embedded: boolean;
  directory: ActorDirectory;
  /** Core NATS messages for live watchers (model deltas), sent along with the next log commit. */
  live: LivePublisher;
  /** Drains the connection and releases the embedded server when this process started it. */
  close(): Promise<void>;
}

const UNREACHABLE_HINT = 'start nats-server with JetStream (nats-server -js) or check NATS_URL';

/** Connects to `natsUrl` or an embedded server, ensures streams and buckets, and opens the directory. */
export async function openBus(opts: OpenBusOptions): Promise<Bus> {
  const logger = opts.logger.child({ component: 'bus' });
  let embedded: EmbeddedNats | undefined;
  let url: string;
  if (opts.natsUrl) {
    url = opts.natsUrl;
  } else {
    embedded = await acquireEmbeddedNats(opts.dataDir, logger, opts.binary ? { binary: opts.binary } : {});
    url = embedded.url;
  }
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: url,
      name: opts.name ?? 'actorloop',
      // A server restart (even kill -9) must not end a long-running host: reconnect forever,
      // quickly. Subscriptions are restored by the client; commits in flight are retried by the
      // log writer with the same Nats-Msg-Id, so nothing is lost or doubled.
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // A server that vanished without closing the socket (a host or network failure) is found
      // by missed pings: after ~2 intervals instead of the default 2-minute one.
      pingInterval: 10_000,
      maxPingOut: 2,
      timeout: 5_000,
      // Without this every request and publish builds two Error objects with stack traces for
      // errors that almost never happen: ~7% of the CPU of a busy host. Errors keep their message.
      noAsyncTraces: true,
    });
  } catch (err) {
    await embedded?.release();
    throw new BusError('bus.unreachable', `cannot connect to NATS at ${url}: ${(err as Error).message}`,
      { cause: err, retryable: true, hint: UNREACHABLE_HINT });
  }
  void watchStatus(nc, logger);
  try {
    const jsm = await jetstreamManager(nc).catch((err: unknown) => {
      throw new BusError('bus.jetstream_disabled', `NATS at ${url} does not offer JetStream`,
        { cause: err, hint: 'run nats-server with -js, or point NATS_URL at a server with JetStream enabled' });
    });
    const js = jetstream(nc);
    const { actors } = await ensureStreams(jsm, logger);
    const directory = createActorDirectory(actors, js, logger);
    let closing: Promise<void> | undefined;
    const live = createLivePublisher(nc);
    logger.debug({ url, embedded: embedded !== undefined }, 'bus open');
    return {
      nc, js, logJs: createLogPublisher(nc, js, live), live, jsm, url, embedded: embedded !== undefined, directory,
      close() {
        closing ??= (async () => {
          live.flush();
          if (!nc.isClosed()) await nc.drain().catch((err: unknown) => logger.warn({ err }, 'drain failed'));
          await embedded?.release();
        })();
        return closing;
      },
    };
  } catch (err) {
    await nc.close().catch(() => {});
    await embedded?.release();
    throw err;
  }
}

async function watchStatus(nc: NatsConnection, logger: Logger): Promise<void> {
  try {
    for await (const s of nc.status()) {
      // No line per reconnect attempt: a long outage would flood the log four times a second.
      if (s.type === 'disconnect') logger.warn({ server: s.server }, 'NATS disconnected; reconnecting (commits wait, no effect starts)');
      else if (s.type === 'reconnect') logger.info({ server: s.server }, 'NATS reconnected');
      else if (s.type === 'staleConnection') logger.warn('NATS server stopped answering pings; reconnecting');
      else if (s.type === 'error') logger.error({ err: s.error }, 'NATS error');
    }
  } catch {
    // the status iterator ends with the connection
  }
}
