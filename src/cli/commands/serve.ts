import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EffectiveConfig } from '../../config/config.js';
import { machineDefinitions } from '../../client/machine-definitions.js';
import { followInspection } from '../../bus/inspection.js';
import { ConfigError } from '../../protocol/errors.js';
import { checkBind, checkListenAddress, startGateway } from '../../server/gateway.js';
import { createNatsJobOutputSource } from '../../server/job-output.js';
import { isLoopback } from '../../server/access.js';
import { ensureGatewayToken } from '../../server/gateway-token.js';
import { readToken } from '../token-file.js';
import { EXIT } from '../exit-codes.js';
import { gatewayCommands } from '../gateway-runtime.js';
import type { Out } from '../output.js';
import { createLogger, openRuntime } from '../runtime.js';
import { whenAskedToStop } from '../stop-signals.js';

/** Options of `actorloop serve`. */
export interface ServeOptions {
  port?: number;
  host?: string;
  tokenFile?: string;
  /** Answer any local connection without the token (loopback only, with a warning). */
  noAuth?: boolean;
  /** Let `turn.submit` ask for a looser run mode than the config's. */
  allowLooserPolicy?: boolean;
  allowFaults?: boolean;
  corsOrigin?: string[];
}

/** The gateway's default port. */
export const DEFAULT_GATEWAY_PORT = 7420;

/** Where the built page is: `dist/web` of this package, when `npm run build` made it. */
function pageDir(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const dir of [join(here, '..', '..', 'web'), join(here, '..', '..', '..', 'dist', 'web')]) {
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return undefined;
}

/**
 * The token the gateway takes, and where it is kept: `--token-file`'s, else the data dir's
 * (generated on first start); null with `--no-auth`, which only loopback may have.
 */
function gatewayToken(opts: ServeOptions, host: string, config: EffectiveConfig): { token: string; file: string } | null {
  if (opts.noAuth === true) {
    if (opts.tokenFile !== undefined) {
      throw new ConfigError('gateway.no_auth_token', '--no-auth and --token-file do not go together', { hint: 'leave one out' });
    }
    if (!isLoopback(host)) {
      throw new ConfigError('gateway.token_required', `--no-auth on ${host} (not a loopback address) would let anyone who reaches it run tasks as you`, {
        hint: 'leave --no-auth out (every request then needs the token), or bind 127.0.0.1',
      });
    }
    return null;
  }
  if (opts.tokenFile !== undefined) return { token: readToken(opts.tokenFile), file: opts.tokenFile };
  return ensureGatewayToken(config.dataDir);
}

/**
 * `actorloop serve`: the gateway (design §11) over the same bus as every command. It hosts no
 * agent: it reads logs and speaks for people on the person channel, handing work to running
 * hosts. Every request needs its token (the data dir's, generated on first start, or
 * `--token-file`'s), also on loopback: another user of the machine must not run tasks as its
 * owner. SIGTERM, SIGHUP or Ctrl-C close every stream and socket and exit 0.
 */
export async function serveCommand(opts: ServeOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? DEFAULT_GATEWAY_PORT;
  checkListenAddress(host, port);
  const auth = gatewayToken(opts, host, config);
  const token = auth?.token ?? null;
  checkBind(host, token);
  const logger = createLogger(config);
  // checked before the runtime opens: a refused start leaves nothing behind
  const rt = await openRuntime(config, logger, { role: 'client' });
  try {
    const dir = pageDir();
    const gateway = await startGateway({
      host,
      port,
      token,
      corsOrigins: opts.corsOrigin ?? [],
      allowFaults: opts.allowFaults === true,
      reader: rt.reader,
      directory: rt.bus.directory,
      redact: (text) => rt.tooling.redactor.redact(text).text,
      liveness: { leases: rt.leases, hosts: rt.hosts },
      machines: machineDefinitions().machines,
      commands: gatewayCommands(rt, { allowLooserPolicy: opts.allowLooserPolicy === true }),
      // the client login may ask for inspection (`watch.>`) and hear it, never report it
      inspection: { follow: (target, signal, onReport) => followInspection(rt.bus.nc, target, { signal, onReport, logger }) },
      // a running job's output as its host publishes it (live only, redacted by the host)
      jobOutput: createNatsJobOutputSource(rt.bus.nc),
      logger,
      ...(dir ? { pageDir: dir } : {}),
    });
    const { stopped, dispose: stopListening } = whenAskedToStop();
    try {
      out.stdout.write(`${gateway.url}/\n`);
      const extras = [opts.allowFaults ? 'fault orders allowed' : null, opts.allowLooserPolicy ? 'looser run modes allowed' : null].filter(Boolean);
      const guarded = auth ? ` (every request needs the token in ${auth.file})` : '';
      out.stderr.write(`gateway: serving ${gateway.url}/${guarded}${extras.map((e) => `, ${e}`).join('')}; SIGTERM or Ctrl-C stops it\n`);
      if (auth) out.stderr.write(`gateway: open the page at ${gateway.url}/?token=${encodeURIComponent(auth.token)}\n`);
      else out.stderr.write('gateway: warning: --no-auth: any user of this machine can use this gateway and run tasks as you\n');
      const signal = await stopped;
      out.stderr.write(`gateway: ${signal}, closing\n`);
      await gateway.close();
      return EXIT.completed;
    } finally {
      stopListening();
    }
  } finally {
    await rt.close();
  }
}
