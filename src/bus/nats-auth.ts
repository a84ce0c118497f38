import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { BusError } from '../protocol/errors.js';
import { BLOB_STREAM, BLOB_SUBJECTS, faultSubject, inboxSubject } from './subjects.js';

/**
 * Who is on the bus (design §11a). Hosts run actors: they write logs, leases and live deltas, and
 * may speak on the actors' inbox channel. Clients are people's commands (the CLI, later the
 * gateway): they read everything and speak on the person channel of any inbox, where approvals,
 * answers, interrupts and the privileged fields of a task must come from, but cannot write a log.
 */
export type NatsRole = 'host' | 'client';

/** A user and password of the embedded server's authorization block. */
export const NatsUserSchema = z.object({ user: z.string().min(1), pass: z.string().min(16) });
/** One role's login. */
export type NatsUser = z.infer<typeof NatsUserSchema>;

/** Contents of `<dataDir>/nats/auth.json` (owner-only): one login per role, generated once. */
export const EmbeddedAuthSchema = z.object({ v: z.literal(1), host: NatsUserSchema, client: NatsUserSchema });
/** The embedded server's logins. */
export type EmbeddedAuth = z.infer<typeof EmbeddedAuthSchema>;

/** How a connection authenticates: a login of the embedded server, or what the config names. */
export type NatsCredentials =
  | { kind: 'none' }
  | { kind: 'user'; user: string; pass: string }
  | { kind: 'token'; token: string }
  /** A `.creds` file (JWT and NKey seed), as `nsc` writes it. */
  | { kind: 'creds'; file: string };

// The wildcard for "any actor's inbox" on one channel.
const PERSON_INBOXES = inboxSubject('*', 'person');
const ACTOR_INBOXES = inboxSubject('*', 'actor');
// Every host's fault orders.
const FAULT_ORDERS = faultSubject('>');
// The JetStream API calls that would read, change or remove the blob bucket's stream, or make a
// consumer on it (a consumer delivers its messages): a client may make none of them. Getting its
// info (sizes, subjects) reads no blob.
const BLOB_API = [
  `$JS.API.STREAM.MSG.GET.${BLOB_STREAM}`, `$JS.API.DIRECT.GET.${BLOB_STREAM}`, `$JS.API.DIRECT.GET.${BLOB_STREAM}.>`,
  `$JS.API.STREAM.MSG.DELETE.${BLOB_STREAM}`, `$JS.API.STREAM.PURGE.${BLOB_STREAM}`, `$JS.API.STREAM.DELETE.${BLOB_STREAM}`,
  `$JS.API.STREAM.CREATE.${BLOB_STREAM}`, `$JS.API.STREAM.UPDATE.${BLOB_STREAM}`,
  `$JS.API.STREAM.SNAPSHOT.${BLOB_STREAM}`, `$JS.API.STREAM.RESTORE.${BLOB_STREAM}`,
  `$JS.API.CONSUMER.CREATE.${BLOB_STREAM}`, `$JS.API.CONSUMER.CREATE.${BLOB_STREAM}.>`, `$JS.API.CONSUMER.DURABLE.CREATE.${BLOB_STREAM}.>`,
  `$JS.API.CONSUMER.MSG.NEXT.${BLOB_STREAM}.>`, `$JS.API.CONSUMER.*.${BLOB_STREAM}.>`,
];

/**
 * Subject permissions of each role. Hosts are denied the person channel explicitly, so a bug or
 * a later feature that forwards an agent's words can never make them a person's. Clients are
 * denied the logs, leases, live deltas and inspection reports: the log is written by the incarnation
 * that holds the lease, nothing a client says becomes a fact without a host committing it, and no
 * client may say what a host's machine did. Clients may neither read nor write the blob bucket
 * (sensitive answers' payloads, artifacts): hosts read and write it for the agents, and a client
 * shows what the events themselves hold.
 */
export const ROLE_PERMISSIONS: Record<NatsRole, { publish: { allow: string[]; deny: string[] }; subscribe: { allow: string[]; deny: string[] } }> = {
  host: {
    publish: {
      // BLOB_SUBJECTS: the blob bucket's chunks and metadata
      allow: ['log.>', 'live.>', 'inspect.>', ACTOR_INBOXES, 'dlq.>', 'claim.>', '$JS.API.>', '$JS.ACK.>', '$JS.FC.>', '$KV.>', BLOB_SUBJECTS, '_INBOX.>'],
      // FAULT_ORDERS: a host takes fault orders (replying on _INBOX), it never gives one
      deny: [PERSON_INBOXES, FAULT_ORDERS],
    },
    subscribe: { allow: ['>'], deny: [] },
  },
  client: {
    publish: {
      // ACTOR_INBOXES: an operator redrives a dead letter onto the channel it first came in on
      // FAULT_ORDERS: the gateway orders a host to kill itself (`fault.kill`, only with --allow-faults on both)
      // watch.>: a watcher asks hosts for an actor's live inspection (`inspect.>`, which only a host reports)
      allow: [PERSON_INBOXES, ACTOR_INBOXES, FAULT_ORDERS, 'claim.>', 'watch.>', 'dlq.>', '$JS.API.>', '$JS.ACK.>', '$JS.FC.>', '$KV.actors.>', '_INBOX.>'],
      deny: ['log.>', 'live.>', 'inspect.>', '$KV.leases.>', '$KV.hosts.>', '$O.>', ...BLOB_API],
    },
    subscribe: { allow: ['>'], deny: [BLOB_SUBJECTS] },
  },
};

/** Where the embedded server's logins and config live under a data dir. */
export function authPaths(natsDir: string) {
  return { authFile: join(natsDir, 'auth.json'), configFile: join(natsDir, 'server.conf') };
}

/**
 * The embedded server's logins: read from `auth.json`, or generated (random passwords) and
 * written owner-only on first use. The directory is made owner-only too: it also holds the
 * server's config and store.
 */
export async function ensureEmbeddedAuth(natsDir: string): Promise<EmbeddedAuth> {
  await mkdir(natsDir, { recursive: true, mode: 0o700 });
  await chmod(natsDir, 0o700);
  const { authFile } = authPaths(natsDir);
  const existing = await readEmbeddedAuth(natsDir);
  if (existing) return existing;
  const auth: EmbeddedAuth = {
    v: 1,
    host: { user: 'actorloop-host', pass: randomBytes(24).toString('base64url') },
    client: { user: 'actorloop-client', pass: randomBytes(24).toString('base64url') },
  };
  // Written aside (0600, so never readable by others), then linked into place: a link fails if
  // the file exists, so of two processes starting at once the first one's logins are everyone's.
  const tmp = `${authFile}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, JSON.stringify(auth), { mode: 0o600 });
  try {
    await link(tmp, authFile);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(tmp).catch(() => {});
  }
  const winner = await readEmbeddedAuth(natsDir);
  if (!winner) throw new BusError('bus.auth_unreadable', `${authFile} vanished while it was written`, { retryable: true });
  return winner;
}

/** The embedded server's logins, or undefined when none were generated yet. */
export async function readEmbeddedAuth(natsDir: string): Promise<EmbeddedAuth | undefined> {
  let text: string;
  try {
    text = await readFile(authPaths(natsDir).authFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new BusError('bus.auth_unreadable', `cannot read the embedded server's logins: ${(err as Error).message}`,
      { cause: err, hint: `check the permissions of ${authPaths(natsDir).authFile} (it belongs to the user who runs actorloop)` });
  }
  const parsed = EmbeddedAuthSchema.safeParse(safeJson(text));
  if (!parsed.success) {
    throw new BusError('bus.auth_invalid', `${authPaths(natsDir).authFile} is not a valid logins file`,
      { hint: 'stop every actorloop process of this data dir, remove the file and run again (new logins are generated)' });
  }
  return parsed.data;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The nats-server config (authorization only; the rest is on its command line) for these logins. */
export function serverConfigText(auth: EmbeddedAuth): string {
  const user = (role: NatsRole): string => {
    const p = ROLE_PERMISSIONS[role];
    const list = (xs: string[]) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
    return `    { user: ${JSON.stringify(auth[role].user)}, password: ${JSON.stringify(auth[role].pass)}, permissions: {\n` +
      `        publish: { allow: ${list(p.publish.allow)}, deny: ${list(p.publish.deny)} }\n` +
      `        subscribe: { allow: ${list(p.subscribe.allow)}, deny: ${list(p.subscribe.deny)} }\n` +
      `    } }`;
  };
  return `# Written by actorloop at each start of the embedded server; edits are overwritten.\n` +
    `authorization {\n  users: [\n${user('host')}\n${user('client')}\n  ]\n}\n`;
}

/** Writes the embedded server's config file (owner-only) and returns its path. */
export async function writeServerConfig(natsDir: string, auth: EmbeddedAuth): Promise<string> {
  const { configFile } = authPaths(natsDir);
  const tmp = `${configFile}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, serverConfigText(auth), { mode: 0o600 });
  await rename(tmp, configFile);
  return configFile;
}
