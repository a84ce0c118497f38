import { environmentOf, userConfigDir } from '../config/config.js';
import { discoverSkills } from '../knowledge/skills.js';
import { findRipgrep } from '../tools/builtins/ripgrep.js';
import { findBubblewrap } from '../tools/sandbox.js';
import { randomBytes } from 'node:crypto';
import { mkdir, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Logger } from 'pino';
import { acquireEmbeddedNats, type EmbeddedNats } from '../bus/embedded.js';
import { loginOptions, natsServers } from '../bus/connection.js';
import { clusterSizeOf, replicatedVersionRisk, SAFE_REPLICATED_VERSION } from '../bus/replicas.js';
import type { NatsCredentials } from '../bus/nats-auth.js';
import { natsCredentialsOf } from './runtime.js';
import { NATS_SERVER_HINT, natsAccepts, natsServerVersion, resolveNatsServerBinary } from '../bus/nats-server.js';
import { STREAM_CONFIGS, differingKeys } from '../bus/streams.js';
import type { EffectiveConfig } from '../config/config.js';
import { openLmdbStore, type LmdbStore } from '../store/lmdb-store.js';

/** How a doctor check came out; only `failed` fails the command. */
export type CheckStatus = 'ok' | 'warning' | 'failed';

/** One line of `actorloop doctor`: what was checked, what was found, and what to do. */
export interface CheckResult {
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to do; null when the check is ok. */
  fix: string | null;
}

/** An ok result. */
export function ok(check: string, detail: string): CheckResult {
  return { check, status: 'ok', detail, fix: null };
}

/** A warning: works, but not as well as it could. */
export function warning(check: string, detail: string, fix: string): CheckResult {
  return { check, status: 'warning', detail, fix };
}

/** A failure: a command would not work like this. */
export function failed(check: string, detail: string, fix: string): CheckResult {
  return { check, status: 'failed', detail, fix };
}

/** Rejects with "<what> did not answer within <ms> ms" when `promise` takes longer: doctor never hangs. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The message of a thrown value, on one line. */
export function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const hint = (err as { hint?: unknown } | null)?.hint;
  return `${text}${typeof hint === 'string' ? `. ${hint}` : ''}`.replace(/\s+/g, ' ').trim();
}

const CONNECT_TIMEOUT_MS = 3_000;
const API_TIMEOUT_MS = 3_000;
// the embedded server waits up to 10 s for itself; a lock held by another start waits longer
const EMBEDDED_TIMEOUT_MS = 15_000;
const UNREACHABLE_FIX = 'start nats-server with JetStream there (nats-server -js), fix --nats / NATS_URL, or leave both unset to use the embedded server';

/** The nats-server, JetStream and stream checks: a URL's server, or the embedded one started and stopped here. */
export async function natsChecks(config: EffectiveConfig, logger: Logger): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  let url: string;
  let embedded: EmbeddedNats | undefined;
  if (config.natsUrl) {
    url = config.natsUrl;
    const servers = natsServers(url);
    let answering: string[];
    try {
      const answers = await Promise.all(servers.map((u) => natsAccepts(u, 2_000)));
      answering = servers.filter((_, i) => answers[i]);
    } catch (err) {
      results.push(failed('nats-server', `${url} is not a NATS URL: ${messageOf(err)}`, 'pass --nats nats://host:port (or set NATS_URL; a cluster comma-separated)'));
      return results;
    }
    if (answering.length === 0) {
      results.push(failed('nats-server', `no NATS server answers at ${url} (within 2 s)`, UNREACHABLE_FIX));
      return results;
    }
    const silent = servers.filter((u) => !answering.includes(u));
    results.push(silent.length === 0
      ? ok('nats-server', servers.length === 1 ? `a NATS server answers at ${url}` : `all ${servers.length} NATS servers answer (${url})`)
      : warning('nats-server', `${answering.length} of ${servers.length} NATS servers answer; not ${silent.join(', ')}`,
        'start the servers that do not answer, or drop them from NATS_URL'));
  } else {
    let binary: string;
    let version: string;
    try {
      binary = resolveNatsServerBinary(config.natsServerBinary ?? undefined, environmentOf(config).PATH);
      version = await within(natsServerVersion(binary), 6_000, `${config.natsServerBinary ?? 'nats-server'} --version`);
    } catch (err) {
      // the hint of a missing binary is the fix line, not part of what was found
      results.push(failed('nats-server', err instanceof Error ? err.message : String(err), NATS_SERVER_HINT));
      return results;
    }
    const old = olderThan(version, [2, 9]);
    results.push(old
      ? warning('nats-server', `${binary} is version ${version}`, 'install nats-server 2.9 or later: actorloop reads its logs with next_by_subj gets')
      : ok('nats-server', `${binary}, version ${version} (embedded: started only while a command runs)`));
    try {
      embedded = await within(acquireEmbeddedNats(config.dataDir, logger, { binary, lockTimeoutMs: 10_000 }), EMBEDDED_TIMEOUT_MS, 'the embedded nats-server');
    } catch (err) {
      results.push(failed('jetstream', `the embedded nats-server did not start: ${messageOf(err)}`,
        `see ${join(config.dataDir, 'nats', 'server.log')}, or set NATS_URL to a NATS server with JetStream`));
      return results;
    }
    url = embedded.url;
  }
  let nc: NatsConnection | undefined;
  const login: NatsCredentials = embedded ? { kind: 'user', ...embedded.auth.host } : natsCredentialsOf(config);
  try {
    results.push(await authCheck(url, embedded, login));
    results.push(...(await jetStreamChecks(url, embedded, login, config.replicas, (c) => (nc = c))));
  } finally {
    await nc?.close().catch(() => undefined);
    await embedded?.release();
  }
  return results;
}

/**
 * Who may say what on this server (design §11a): an anonymous login must be refused, and hosts
 * must not be able to publish on the person channel. The embedded server is checked for both;
 * a server given by URL has one login for everything, so only the first is checked there.
 */
async function authCheck(url: string, embedded: EmbeddedNats | undefined, login: NatsCredentials): Promise<CheckResult> {
  let anonymous: NatsConnection | undefined;
  try {
    anonymous = await connect({ servers: natsServers(url), name: 'actorloop-doctor-anonymous', reconnect: false, timeout: CONNECT_TIMEOUT_MS, noAsyncTraces: true });
  } catch {
    // refused: the server wants a login
  }
  if (anonymous) {
    await anonymous.close().catch(() => undefined);
    return embedded
      ? failed('auth', `the embedded server at ${url} accepts connections without a login`, `stop it (it was started without authorization) and run again`)
      : warning('auth', `${url} accepts connections without a login: anyone who reaches it can approve calls and start tasks`,
        'give the server users with the permissions in docs/security.md, and set nats_creds or NATS_USER / NATS_PASSWORD');
  }
  if (!embedded) {
    return login.kind === 'none'
      ? failed('auth', `${url} asks for a login and none is configured`, 'set nats_creds (a .creds file), NATS_USER and NATS_PASSWORD, or NATS_TOKEN')
      : ok('auth', `${url} refuses anonymous connections; logging in with ${login.kind === 'creds' ? `the creds file ${login.file}` : `a ${login.kind}`} (one login for hosts and clients)`);
  }
  let host: NatsConnection | undefined;
  try {
    host = await connect({ servers: natsServers(url), name: 'actorloop-doctor', reconnect: false, timeout: CONNECT_TIMEOUT_MS, noAsyncTraces: true, user: embedded.auth.host.user, pass: embedded.auth.host.pass });
    const refused = await publishRefused(host, 'inbox.doctor_probe.person');
    return refused
      ? ok('auth', `the embedded server requires its logins (${embedded.auth.host.user}, ${embedded.auth.client.user}); hosts cannot speak for a person`)
      : failed('auth', 'the host login may publish on the person channel', 'stop the embedded server and run again: its config is rewritten at each start');
  } catch (err) {
    return failed('auth', `the host login was refused: ${messageOf(err)}`, `stop the embedded server and run again; its logins are in the data dir's nats/auth.json`);
  } finally {
    await host?.close().catch(() => undefined);
  }
}

/** True when the server answers a publish on `subject` with a permissions violation. */
async function publishRefused(nc: NatsConnection, subject: string): Promise<boolean> {
  const violation = (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && /permissions violation/i.test(String(s.error?.message ?? s.error))) return true;
    }
    return false;
  })();
  nc.publish(subject, 'doctor probe');
  await nc.flush();
  return Promise.race([violation, new Promise<boolean>((r) => setTimeout(() => r(false), 1_000))]);
}

async function jetStreamChecks(
  url: string, embedded: EmbeddedNats | undefined, login: NatsCredentials, replicas: number, opened: (nc: NatsConnection) => void,
): Promise<CheckResult[]> {
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: natsServers(url), name: 'actorloop-doctor', reconnect: false, timeout: CONNECT_TIMEOUT_MS, noAsyncTraces: true, ...loginOptions(login) });
    opened(nc);
  } catch (err) {
    return [failed('jetstream', `cannot connect to ${url}: ${messageOf(err)}`, 'check the credentials and TLS the server needs, and --nats / NATS_URL')];
  }
  const server = `${embedded ? `embedded server at ${url}${embedded.owned ? '' : ' (already running)'}` : url}, nats-server ${nc.info?.version ?? '?'}`;
  let jsm: JetStreamManager;
  try {
    // checkAPI (the default) asks for the account info: it fails when JetStream is off
    jsm = await within(jetstreamManager(nc, { timeout: API_TIMEOUT_MS }), API_TIMEOUT_MS + 500, 'JetStream');
  } catch (err) {
    return [failed('jetstream', `${server} does not offer JetStream: ${messageOf(err)}`,
      'run nats-server with -js (JetStream enabled), or point --nats / NATS_URL at a server that has it')];
  }
  const results: CheckResult[] = [];
  try {
    const info = await within(jsm.getAccountInfo(), API_TIMEOUT_MS + 500, 'JetStream account info');
    results.push(ok('jetstream', `enabled on ${server} (${info.streams} streams, ${info.consumers} consumers, ${info.storage} bytes stored)`));
  } catch (err) {
    return [failed('jetstream', `${server}: cannot read the JetStream account info: ${messageOf(err)}`,
      'check that this account may use JetStream (the server config gives it jetstream: enabled)')];
  }
  const version = nc.info?.version ?? '0.0.0';
  // only a server given by URL may have been told sync_interval: the embedded one runs with the config actorloop writes
  const sync = embedded || olderThan(version, [2, 10]) ? null : await syncSetting(nc);
  results.push(durabilityCheck(version, embedded !== undefined, sync));
  results.push(replicasCheck(nc.info, replicas));
  results.push(await streamsCheck(jsm));
  return results;
}

/**
 * The `replicas` setting against the server (design §6): more copies than a lone server can hold
 * fail every command; a replicated cluster before 2.9.21 may accept a zombie's compare-and-set.
 */
export function replicasCheck(info: NatsConnection['info'], replicas: number): CheckResult {
  const size = clusterSizeOf(info);
  const version = info?.version ?? '?';
  const where = size.clustered ? `cluster ${size.name} (${size.servers} servers known)` : 'a single server';
  if (replicas > 1 && !size.clustered) {
    return failed('replicas', `replicas = ${replicas}, but the NATS server is not in a cluster (1 server)`,
      'set replicas = 1, or point NATS_URL at a JetStream cluster of at least that many servers');
  }
  if (replicas > size.servers) {
    return warning('replicas', `replicas = ${replicas} on ${where}: new streams cannot be placed until ${replicas} servers are up`,
      `set replicas to at most ${size.servers}, or start the missing servers`);
  }
  const risk = replicatedVersionRisk(info?.version, replicas);
  if (risk) return warning('replicas', risk, `upgrade nats-server to ${SAFE_REPLICATED_VERSION} or later on every node (docs/deploy.md)`);
  if (size.clustered && replicas === 1) {
    return warning('replicas', `replicas = 1 on ${where}, nats-server ${version}: each stream lives on one server, and is gone with its disk`,
      'set replicas = 3 (actorloop.toml or ACTORLOOP_REPLICAS) and run any command once to scale the streams (docs/deploy.md)');
  }
  return ok('replicas', `replicas = ${replicas} on ${where}, nats-server ${version}`);
}

/** What a server says of its fsync setting (its varz, for a login that may read it). */
export interface SyncSetting {
  always: boolean;
  /** The interval between fsyncs, in nanoseconds as the server reports it; absent: its default. */
  intervalNs?: number;
}

const DURABILITY_FIX = 'to survive power loss, run nats-server 2.10 or newer with `jetstream { sync_interval: always }` and point --nats / NATS_URL at it, '
  + 'or a replicated (R3) cluster (README: Durability contract)';

/**
 * Whether the server fsyncs every commit (design §4, README "Durability contract"): a commit
 * JetStream acknowledged survives any process kill; surviving power loss needs nats-server 2.10+
 * with `sync_interval: always` (or R3). Before 2.10 the server fsyncs every 2 minutes and cannot be
 * told otherwise; from 2.10, what it was told shows only to a login that may read its varz.
 */
export function durabilityCheck(version: string, embedded: boolean, sync: SyncSetting | null): CheckResult {
  const kill = 'a commit JetStream acknowledged survives any process kill (of the runtime or of nats-server), not a power loss';
  if (olderThan(version, [2, 10])) {
    return warning('durability', `nats-server ${version} fsyncs every 2 minutes and cannot be told otherwise: ${kill}`, DURABILITY_FIX);
  }
  if (embedded) {
    return warning('durability', `the embedded nats-server ${version} runs with its default sync_interval (fsync every 2 minutes): ${kill}`, DURABILITY_FIX);
  }
  if (sync === null) {
    return ok('durability', `nats-server ${version} can fsync every commit (sync_interval: always); this login cannot read its settings to tell whether it does`);
  }
  if (sync.always) return ok('durability', `nats-server ${version} has sync_interval: always: each commit is on disk before it is acknowledged`);
  const every = sync.intervalNs ? `${Math.round(sync.intervalNs / 1e9)} s` : '2 minutes (the default)';
  return warning('durability', `nats-server ${version} fsyncs every ${every}, not at every commit: ${kill}`, DURABILITY_FIX);
}

/** The server's fsync setting from its varz (system account logins only); null when it does not say. */
async function syncSetting(nc: NatsConnection): Promise<SyncSetting | null> {
  try {
    const reply = await nc.request('$SYS.REQ.SERVER.PING.VARZ', '', { timeout: 1_000 });
    const varz = reply.json<{ data?: { jetstream?: { config?: { sync_always?: boolean; sync_interval?: number } } } }>();
    const config = varz.data?.jetstream?.config;
    if (!config) return null;
    return { always: config.sync_always === true, ...(config.sync_interval ? { intervalNs: config.sync_interval } : {}) };
  } catch {
    // no responders or no permission: an ordinary account cannot see it
    return null;
  }
}

/** Reads (never creates or changes) the streams actorloop needs and compares their settings. */
async function streamsCheck(jsm: JetStreamManager): Promise<CheckResult> {
  const absent: string[] = [];
  const updatable: string[] = [];
  const mismatched: string[] = [];
  const fine: string[] = [];
  for (const wanted of Object.values(STREAM_CONFIGS)) {
    try {
      const info = await within(jsm.streams.info(wanted.name), API_TIMEOUT_MS + 500, `stream ${wanted.name}`);
      const diff = differingKeys(info.config, wanted);
      // storage and retention cannot be updated (streams.ts IMMUTABLE); anything else is
      const fixed = diff.filter((k) => k === 'storage' || k === 'retention');
      if (fixed.length > 0) mismatched.push(`${wanted.name} (${fixed.join(', ')})`);
      else if (diff.length > 0) updatable.push(`${wanted.name} (${diff.join(', ')})`);
      else fine.push(`${wanted.name} (${info.state.messages} messages)`);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) absent.push(wanted.name);
      else return failed('streams', `cannot read stream ${wanted.name}: ${messageOf(err)}`, 'check the server log and that this account may use JetStream');
    }
  }
  if (mismatched.length > 0) {
    return failed('streams', `${mismatched.join(', ')} differ from what actorloop needs and cannot be changed`,
      'recreate those streams (their data will be lost) or point --nats / NATS_URL at another server');
  }
  const parts = [
    fine.length > 0 ? `${fine.join(', ')} as expected` : '',
    updatable.length > 0 ? `${updatable.join(', ')} differ and will be updated` : '',
    absent.length > 0 ? `${absent.join(', ')} absent` : '',
  ].filter(Boolean);
  if (absent.length > 0 || updatable.length > 0) {
    return warning('streams', parts.join('; '), 'nothing to do: the next `actorloop run` (or demo) creates or updates them');
  }
  return ok('streams', parts.join('; '));
}

function olderThan(version: string, min: [number, number]): boolean {
  const [major = 0, minor = 0] = version.split('.').map((n) => Number.parseInt(n, 10));
  return major < min[0] || (major === min[0] && minor < min[1]);
}

/** The data dir exists or can be made, and a file can be written and removed in it. */
export async function dataDirCheck(dataDir: string): Promise<CheckResult> {
  let created = false;
  try {
    const s = await stat(dataDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (s && !s.isDirectory()) return failed('data dir', `${dataDir} is not a directory`, 'pass --data-dir <a directory> (or set ACTORLOOP_DATA_DIR)');
    if (!s) {
      await mkdir(dataDir, { recursive: true });
      created = true;
    }
  } catch (err) {
    return failed('data dir', `cannot create ${dataDir}: ${messageOf(err)}`, 'pass --data-dir <a directory you can write> (or set ACTORLOOP_DATA_DIR)');
  }
  const probe = join(dataDir, `.doctor-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await writeFile(probe, 'actorloop doctor probe\n');
    await unlink(probe);
  } catch (err) {
    await unlink(probe).catch(() => undefined);
    return failed('data dir', `${dataDir} is not writable: ${messageOf(err)}`,
      `make it writable (chown/chmod ${dataDir}) or pass --data-dir <a directory you can write>`);
  }
  return ok('data dir', `${dataDir} ${created ? 'created' : 'exists'} and is writable`);
}

/** LMDB opens under the data dir; a probe key is written, read back and deleted. */
export async function lmdbCheck(dataDir: string): Promise<CheckResult> {
  let store: LmdbStore | undefined;
  const key = ['doctor', `${process.pid}-${randomBytes(4).toString('hex')}`];
  try {
    store = openLmdbStore(dataDir);
    const value = { probe: key[1] };
    await within(store.index.put(key, value), 5_000, 'an LMDB write');
    const back = store.index.get(key) as { probe?: string } | undefined;
    await within(store.index.remove(key), 5_000, 'an LMDB delete');
    if (back?.probe !== value.probe) {
      return failed('lmdb', `${store.path}: a probe key read back as ${JSON.stringify(back)}`, `the LMDB files may be damaged: move ${store.path} aside and retry`);
    }
    return ok('lmdb', `${store.path} opens; a probe key was written, read back and deleted`);
  } catch (err) {
    return failed('lmdb', `cannot use LMDB at ${join(dataDir, 'lmdb')}: ${messageOf(err)}`,
      'check the data dir is on a local disk with free space (LMDB needs mmap), or pass another --data-dir');
  } finally {
    await store?.close().catch(() => undefined);
  }
}

/** The tool pipeline: a working bubblewrap for shell, ripgrep for search, and the policy in force. */
export async function toolingChecks(config: EffectiveConfig): Promise<CheckResult[]> {
  const pathEnv = environmentOf(config).PATH;
  const results: CheckResult[] = [];
  const bwrap = await findBubblewrap(pathEnv);
  results.push(
    bwrap
      ? ok('sandbox', `bubblewrap at ${bwrap} creates namespaces: shell runs sandboxed`)
      : warning('sandbox', 'no working bubblewrap: shell would run unsandboxed, so every shell call asks first',
        'apt-get install bubblewrap (and allow unprivileged user namespaces where a container forbids them)'),
  );
  // the workspace matters only for refusing an rg planted inside it; doctor has none
  const rg = await findRipgrep(environmentOf(config), '/nonexistent-workspace');
  results.push(rg ? ok('search', `ripgrep at ${rg}`) : warning('search', 'ripgrep not found: search uses its slower JS walk', 'apt-get install ripgrep'));
  const rules = config.policyRules.length;
  const notes = config.ignoredKeys;
  const detail = `run mode ${config.approvalMode}; ${rules} rule${rules === 1 ? '' : 's'} from ${config.configFiles.length > 0 ? config.configFiles.join(', ') : 'no config file'}`;
  results.push(notes.length === 0 ? ok('policy', detail) : warning('policy', `${detail}; ignored: ${notes.join('; ')}`,
    `trust the workspace with \`actorloop trust ${config.workspace.dir}\` if you want its file to count, or remove those keys`));
  const trusted = config.trustedWorkspaces;
  results.push(ok('trust', `workspace ${config.workspace.dir} is ${config.workspace.trusted ? 'trusted' : 'not trusted (its actorloop.toml may only tighten)'}; ` +
    `trusted workspaces: ${trusted.length > 0 ? trusted.join(', ') : 'none'}`));
  return results;
}

/**
 * The skills an agent in `workspace` would be offered (`.agents/skills` there, `skills/` in the
 * user's config dir): one line with their number and names, and a warning for each SKILL.md that
 * is skipped, with its path and why. A bad skill never fails doctor: the others still work.
 */
export async function skillsCheck(workspace: string, userDir: string | null): Promise<CheckResult[]> {
  const { skills, skipped } = await discoverSkills({ workspace, userConfigDir: userDir });
  const where = `${join(workspace, '.agents', 'skills')}${userDir === null ? '' : ` and ${join(userDir, 'skills')}`}`;
  const names = skills.map((s) => `${s.name}${s.scope === 'user' ? ' (user)' : ''}`).join(', ');
  const results = [ok('skills', skills.length === 0 ? `no skills in ${where}` : `${skills.length} skill${skills.length === 1 ? '' : 's'} in ${where}: ${names}`)];
  for (const s of skipped) {
    results.push(warning('skills', `${s.path} skipped: ${s.reason}`, 'fix it (YAML front matter with `name` as its directory and a `description`), or remove it'));
  }
  return results;
}

/** The skills check for the config's workspace and the user's config dir. */
export function configSkillsCheck(config: EffectiveConfig): Promise<CheckResult[]> {
  return skillsCheck(config.workspace.dir, userConfigDir(environmentOf(config)));
}
