import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { createLivePublisher, createLogPublisher, type LivePublisher, type LogPublisher } from './log-publisher.js';
import { credsAuthenticator, type ConnectionOptions, type NatsConnection } from '@nats-io/nats-core';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { createActorDirectory, type ActorDirectory } from './directory.js';
import { acquireEmbeddedNats, embeddedPaths, pidAlive, readEmbeddedState, type AcquireEmbeddedOptions, type EmbeddedNats } from './embedded.js';
import { readEmbeddedAuth, type EmbeddedAuth, type NatsCredentials, type NatsRole } from './nats-auth.js';
import { DEFAULT_REPLICAS, replicatedVersionRisk, warnOnce, type ReplicaPlan } from './replicas.js';
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
  /** The PATH that binary is looked up on (`StartNatsServerOptions.pathEnv`). */
  pathEnv?: string;
  /**
   * Who this process is on the bus (design §11a): `host` runs actors, `client` is a person's
   * command (default `host`). A host bus opens a second, client connection on first use of `person()`, unless
   * `person: false` (a host process, which never speaks for a person).
   */
  role?: NatsRole;
  /** Whether a host bus may open a client connection for `person()` (default true). */
  person?: boolean;
  /** How to log in to a server given by `natsUrl` (the embedded server's logins are its own). */
  credentials?: NatsCredentials;
  /** Copies of the streams and buckets this bus creates, and whether existing ones are scaled (default one, none scaled). */
  replicas?: ReplicaPlan;
}

/** An open bus: the connection, JetStream handles, the actor directory. */
export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  /** The acked publish the log writers use: `js.publish` without nats.js's per-request overhead. */
  logJs: LogPublisher;
  jsm: JetStreamManager;
  /** What the bus connected to: a URL, or a cluster's URLs comma-separated. */
  url: string;
  /**
   * Copies a stream or bucket made on this bus gets (the `replicas` setting): whoever creates one
   * later (the blob bucket) makes it with as many as the rest.
   */
  replicas: number;
  /** The whole setting: `replicas` and whether an existing stream with fewer copies is scaled (`scaleStream`). */
  replicaPlan: ReplicaPlan;
  /** The risk of this server's version with these replicas (`replicatedVersionRisk`), or null. */
  versionRisk: string | null;
  /** True when the server is an embedded one (started here or reused). */
  embedded: boolean;
  directory: ActorDirectory;
  /** Who this connection is on the bus. */
  role: NatsRole;
  /** The login of a role on this server, for a child process this one starts (a host of its own data dir). */
  loginFor(role: NatsRole): NatsCredentials;
  /** True when the server asked for a login (the embedded server always does). */
  authenticated: boolean;
  /**
   * JetStream of the client login, for what a person says (inbox messages on the person channel):
   * this bus's own for a client bus, a second connection for a host bus that may speak for one.
   */
  person(): Promise<JetStreamClient>;
  /** Core NATS messages for live watchers (model deltas), sent along with the next log commit. */
  live: LivePublisher;
  /** Drains the connection and releases the embedded server (stopped when no other process uses it). */
  close(): Promise<void>;
}

/** What the embedded server is started with, of `openBus`'s options. */
function serverOptions(opts: OpenBusOptions): AcquireEmbeddedOptions {
  return { ...(opts.binary ? { binary: opts.binary } : {}), ...(opts.pathEnv !== undefined ? { pathEnv: opts.pathEnv } : {}) };
}

const UNREACHABLE_HINT = 'start nats-server with JetStream (nats-server -js) or check NATS_URL';

/**
 * The servers of a NATS URL setting: one URL, or several comma-separated (a cluster's; the client
 * connects to one and fails over to the others). Blanks around commas are dropped.
 */
export function natsServers(url: string): string[] {
  return url.split(',').map((u) => u.trim()).filter((u) => u !== '');
}

/** Connects to `natsUrl` or an embedded server, ensures streams and buckets, and opens the directory. */
export async function openBus(opts: OpenBusOptions): Promise<Bus> {
  const logger = opts.logger.child({ component: 'bus' });
  let embedded: EmbeddedNats | undefined;
  let url: string;
  // a URL that is this data dir's own embedded server (a child a command started, given --nats)
  // logs in with the data dir's logins, like a command that found the server by itself
  let local: EmbeddedAuth | undefined;
  if (opts.natsUrl) {
    url = opts.natsUrl;
    local = await localLogins(opts.dataDir, url);
  } else {
    embedded = await acquireEmbeddedNats(opts.dataDir, logger, serverOptions(opts));
    url = embedded.url;
  }
  const loginOf = (role: NatsRole): NatsCredentials => {
    const own = embedded?.auth ?? local;
    return own ? { kind: 'user', ...own[role] } : (opts.credentials ?? { kind: 'none' });
  };
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: natsServers(url),
      name: opts.name ?? 'actorloop',
      ...loginOptions(loginOf(opts.role ?? 'host')),
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
      // errors that almost never happen, a cost a busy host pays on every call. Errors keep their message.
      noAsyncTraces: true,
    });
  } catch (err) {
    await embedded?.release();
    if (isAuthError(err)) {
      throw new BusError('bus.auth_failed', `NATS at ${url} refused the login: ${(err as Error).message}`, {
        cause: err,
        hint: embedded
          ? `the embedded server's logins are in ${opts.dataDir}/nats/auth.json; stop the server and run again if that file was replaced`
          : 'set nats_creds (a .creds file), NATS_USER and NATS_PASSWORD, or NATS_TOKEN to a login this server accepts',
      });
    }
    throw new BusError('bus.unreachable', `cannot connect to NATS at ${url}: ${(err as Error).message}`,
      { cause: err, retryable: true, hint: UNREACHABLE_HINT });
  }
  void watchStatus(nc, logger);
  // The embedded server is every user's to keep alive: if it dies under a command, the command
  // starts it again on the same store and port, and the connection's reconnect loop finds it there.
  if (embedded) void keepEmbeddedAlive(nc, () => embedded!, (e) => { embedded = e; }, opts, logger);
  let personJs: Promise<{ js: JetStreamClient; nc: NatsConnection | null }> | undefined;
  try {
    const jsm = await jetstreamManager(nc).catch((err: unknown) => {
      throw new BusError('bus.jetstream_disabled', `NATS at ${url} does not offer JetStream`,
        { cause: err, hint: 'run nats-server with -js, or point NATS_URL at a server with JetStream enabled' });
    });
    const js = jetstream(nc);
    const plan = opts.replicas ?? DEFAULT_REPLICAS;
    const { actors } = await ensureStreams(jsm, logger, { replicas: plan, ...(nc.info ? { serverInfo: nc.info } : {}) });
    const directory = createActorDirectory(actors, js, logger);
    const versionRisk = replicatedVersionRisk(nc.info?.version, plan.replicas);
    // one line, once per data dir and cluster: the first command says it, `doctor` every time
    if (versionRisk) await warnOnce(opts.dataDir, `replicated-${nc.info?.cluster ?? 'server'}-${nc.info?.version ?? ''}`, versionRisk, logger);
    let closing: Promise<void> | undefined;
    const live = createLivePublisher(nc);
    logger.debug({ url, embedded: embedded !== undefined }, 'bus open');
    return {
      nc, js, logJs: createLogPublisher(nc, js, live), live, jsm, url, replicas: plan.replicas, replicaPlan: plan, versionRisk,
      embedded: embedded !== undefined, directory,
      role: opts.role ?? 'host',
      loginFor: loginOf,
      authenticated: nc.info?.auth_required === true,
      async person() {
        if (opts.role === 'client') return js;
        if (opts.person === false) {
          throw new BusError('bus.not_a_client', 'this process runs as a host and does not speak for a person',
            { hint: 'send what a person says with a client command (actorloop approve, deny, run) or a client bus' });
        }
        personJs ??= (async () => {
          const login = loginOf('client');
          // a server given by URL has one login for both roles: one connection
          if (!embedded && !local) return { js, nc: null };
          const pnc = await connect({ servers: natsServers(url), name: `${opts.name ?? 'actorloop'}-client`, ...loginOptions(login),
            reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 5_000, noAsyncTraces: true });
          return { js: jetstream(pnc), nc: pnc };
        })();
        return (await personJs).js;
      },
      close() {
        closing ??= (async () => {
          live.flush();
          const p = personJs ? await personJs.catch(() => undefined) : undefined;
          if (p?.nc && !p.nc.isClosed()) await p.nc.drain().catch((err: unknown) => logger.warn({ err }, 'drain failed'));
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

/** The logins of the data dir's embedded server when `url` is that server, else undefined. */
async function localLogins(dataDir: string, url: string): Promise<EmbeddedAuth | undefined> {
  const paths = embeddedPaths(dataDir);
  const state = await readEmbeddedState(paths.stateFile);
  if (!state || state.auth !== true || state.url !== url) return undefined;
  return readEmbeddedAuth(paths.dir).catch(() => undefined);
}

/** Connection options for a login. */
export function loginOptions(c: NatsCredentials): Partial<ConnectionOptions> {
  switch (c.kind) {
    case 'none':
      return {};
    case 'user':
      return { user: c.user, pass: c.pass };
    case 'token':
      return { token: c.token };
    case 'creds': {
      let bytes: Uint8Array;
      try {
        bytes = readFileSync(c.file);
      } catch (err) {
        throw new BusError('bus.creds_unreadable', `cannot read the NATS credentials file ${c.file}: ${(err as Error).message}`,
          { cause: err, hint: 'check nats_creds (or NATS_CREDS): it names a .creds file as nsc writes it' });
      }
      return { authenticator: credsAuthenticator(bytes) };
    }
  }
}

function isAuthError(err: unknown): boolean {
  const text = `${(err as Error)?.message ?? ''} ${(err as { cause?: Error })?.cause?.message ?? ''}`;
  return /authorization|authentication|auth/i.test(text) && !/timeout/i.test(text);
}

/**
 * Restarts the embedded server when it dies under this process (not when it merely disconnects):
 * on the same store and port, under the start lock, so one process restarts it and the others
 * reuse it. The connection reconnects by itself once it answers.
 */
async function keepEmbeddedAlive(
  nc: NatsConnection, current: () => EmbeddedNats, replace: (e: EmbeddedNats) => void, opts: OpenBusOptions, logger: Logger,
): Promise<void> {
  let restarting = false;
  try {
    for await (const s of nc.status()) {
      if ((s.type !== 'disconnect' && s.type !== 'reconnecting') || restarting) continue;
      const was = current();
      if (pidAlive(was.pid)) continue;
      restarting = true;
      try {
        const port = Number(new URL(was.url).port);
        const next = await acquireEmbeddedNats(opts.dataDir, logger, { port, ...serverOptions(opts) });
        replace(next);
        // the dead server's acquisition is given back: this process counts as one user of the new one
        await was.release();
        logger.warn({ pid: next.pid, url: next.url }, next.owned ? 'the embedded nats-server died; started it again on the same store' : 'the embedded nats-server died; another process started it again');
      } catch (err) {
        logger.error({ err }, 'the embedded nats-server died and could not be started again; retrying');
      } finally {
        restarting = false;
      }
    }
  } catch {
    // the status iterator ends with the connection
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
