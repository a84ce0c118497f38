import { mkdir, open, readFile, rename, unlink, link, writeFile, stat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { natsAccepts, startNatsServer } from './nats-server.js';
import { ensureEmbeddedAuth, writeServerConfig, type EmbeddedAuth } from './nats-auth.js';
import { joinUsers, leaveUsers, otherUsers, usersDir } from './embedded-users.js';

/**
 * An embedded nats-server this process uses, started by it (`owned`) or reused. It is owned by
 * no command: every command that uses it counts as a user, and the last one to release it stops
 * it, so stopping one command (a `serve`) never takes the bus from under another (a `host`).
 */
export interface EmbeddedNats {
  url: string;
  /** The server's process. */
  pid: number;
  /** The logins of its users (host, client): the server runs with authorization. */
  auth: EmbeddedAuth;
  /** True when this process started the server (it stops it only as the last user, like any other). */
  owned: boolean;
  /** Stops using the server: stops it (and removes the state file) when no other live process uses it. */
  release(): Promise<void>;
}

/** Contents of `<dataDir>/nats/server.json`: which server serves this data dir. */
export const EmbeddedStateSchema = z.object({
  pid: z.number().int().positive(),
  /** The process that started the server (the last of its users stops it); absent in files of older versions. */
  ownerPid: z.number().int().positive().optional(),
  url: z.string(),
  startedAt: z.string(),
  /** The server requires the logins of `auth.json`; absent in files of versions that ran it open. */
  auth: z.literal(true).optional(),
});
/** The state file of a running embedded server. */
export type EmbeddedState = z.infer<typeof EmbeddedStateSchema>;

/** Options of `acquireEmbeddedNats` beyond the data dir and logger. */
export interface AcquireEmbeddedOptions {
  binary?: string;
  /** The PATH the binary is looked up on (`StartNatsServerOptions.pathEnv`). */
  pathEnv?: string;
  /** How long to wait for another process that is starting (or stopping) the server. */
  lockTimeoutMs?: number;
  /** Start on this port (a restart after the server died, so clients reconnect to the same URL). */
  port?: number;
}

/** Paths used under a data dir by the embedded server. */
export function embeddedPaths(dataDir: string) {
  const dir = join(dataDir, 'nats');
  return {
    dir,
    storeDir: join(dir, 'jetstream'),
    stateFile: join(dir, 'server.json'),
    lockFile: join(dir, 'server.lock'),
    logFile: join(dir, 'server.log'),
    usersDir: usersDir(dir),
  };
}

/** A server found or started under the start lock, with how to stop it when it is this process's child. */
interface Found {
  url: string;
  pid: number;
  owned: boolean;
  stopChild?: () => Promise<void>;
}

/**
 * Reuses the embedded nats-server of `dataDir` while it lives, or starts one (design §6), and
 * counts this process as one of its users. Starts, reuses and the last user's stop are serialized
 * across processes by an exclusive lock file, so a server is never stopped under a command that
 * has just found it.
 */
export async function acquireEmbeddedNats(
  dataDir: string, logger: Logger = pino({ level: 'silent' }), opts: AcquireEmbeddedOptions = {},
): Promise<EmbeddedNats> {
  const paths = embeddedPaths(dataDir);
  const lockTimeoutMs = opts.lockTimeoutMs ?? 20_000;
  await mkdir(paths.dir, { recursive: true, mode: 0o700 });
  const auth = await ensureEmbeddedAuth(paths.dir);
  // a user before it looks: a last user stopping the server under the lock sees this one
  joinUsers(paths.usersDir);
  let found: Found;
  try {
    found = await withStartLock(paths.lockFile, lockTimeoutMs, async (): Promise<Found> => {
      const reused = await tryReuse(paths.stateFile, logger);
      if (reused) return reused;
      // the config is written at every start: it holds the logins' permissions of this version
      const configFile = await writeServerConfig(paths.dir, auth);
      const handle = await startNatsServer({
        storeDir: paths.storeDir, logFile: paths.logFile, logger, configFile,
        ...(opts.binary ? { binary: opts.binary } : {}), ...(opts.pathEnv !== undefined ? { pathEnv: opts.pathEnv } : {}),
        ...(opts.port ? { port: opts.port } : {}),
      });
      const state: EmbeddedState = {
        pid: handle.pid, ownerPid: process.pid, url: handle.url, startedAt: new Date().toISOString(), auth: true,
      };
      // write then rename: a reader never sees half a file
      const tmp = `${paths.stateFile}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(state));
      await rename(tmp, paths.stateFile);
      return { url: handle.url, pid: handle.pid, owned: true, stopChild: () => handle.stop() };
    });
  } catch (err) {
    leaveUsers(paths.usersDir);
    throw err;
  }
  let released: Promise<void> | undefined;
  return {
    url: found.url,
    pid: found.pid,
    auth,
    owned: found.owned,
    release() {
      released ??= leave(paths, found, lockTimeoutMs, logger);
      return released;
    },
  };
}

/**
 * Takes this process off the server's users and, when no other live process uses it, stops it,
 * under the start lock. A server still used by another command is left running: it outlives
 * every command that uses it. Never throws: a server that cannot be stopped now is left for the
 * next last user.
 */
async function leave(paths: ReturnType<typeof embeddedPaths>, found: Found, lockTimeoutMs: number, logger: Logger): Promise<void> {
  if (!leaveUsers(paths.usersDir)) return;
  try {
    await withStartLock(paths.lockFile, lockTimeoutMs, async () => {
      const others = otherUsers(paths.usersDir);
      if (others.length > 0) {
        logger.debug({ pid: found.pid, users: others }, 'the embedded nats-server is still used; leaving it running');
        return;
      }
      const state = await readEmbeddedState(paths.stateFile);
      // a server restarted since (by this process or another) is the one to stop now
      const pid = state?.pid ?? found.pid;
      // stop before removing the file: removing first would let another process start a second
      // server on the same store while this one still runs
      if (found.stopChild && pid === found.pid) await found.stopChild();
      else await stopPid(pid);
      await removeStateIf(paths.stateFile, pid);
    });
  } catch (err) {
    logger.warn({ err, pid: found.pid }, 'could not stop the embedded nats-server; the next command to leave it stops it');
  }
}

/** Reads the state file; undefined when absent or unreadable. */
export async function readEmbeddedState(stateFile: string): Promise<EmbeddedState | undefined> {
  try {
    return EmbeddedStateSchema.parse(JSON.parse(await readFile(stateFile, 'utf8')));
  } catch {
    return undefined;
  }
}

async function tryReuse(stateFile: string, logger: Logger): Promise<Found | undefined> {
  const state = await readEmbeddedState(stateFile);
  if (!state || !pidAlive(state.pid)) return undefined;
  if (state.auth !== true && isNatsServerPid(state.pid)) {
    // an older actorloop started it without authorization: anyone on this machine could approve
    throw new BusError('bus.embedded_open',
      `the embedded nats-server (pid ${state.pid}) was started by an older actorloop without authentication`,
      { hint: `stop it (kill ${state.pid}) and run again: it restarts on the same store with logins` });
  }
  if (await natsAccepts(state.url, 2_000)) {
    logger.debug({ pid: state.pid, url: state.url }, 'reusing embedded nats-server');
    return { url: state.url, pid: state.pid, owned: false };
  }
  if (isNatsServerPid(state.pid)) {
    // a live but silent server still holds the store: starting a second one on it would corrupt it
    throw new BusError('bus.embedded_stuck',
      `the embedded nats-server (pid ${state.pid}) is running but does not answer on ${state.url}`,
      { hint: `stop it (kill ${state.pid}) and retry` });
  }
  return undefined;
}

/** Stops a server that is not our child: SIGTERM, then SIGKILL after 5 s. */
async function stopPid(pid: number): Promise<void> {
  if (!isNatsServerPid(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 5_000;
  while (pidAlive(pid) && isNatsServerPid(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function removeStateIf(stateFile: string, pid: number): Promise<void> {
  const state = await readEmbeddedState(stateFile);
  if (state?.pid === pid) await unlink(stateFile).catch(() => {});
}

/** True when a process with this pid exists (EPERM means it exists but is not ours). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function isNatsServerPid(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('nats-server');
  } catch {
    return false; // no /proc (or gone): assume the pid was reused by something else
  }
}

async function withStartLock<T>(lockFile: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (!(await tryLock(lockFile))) {
    if (Date.now() > deadline) {
      throw new BusError('bus.embedded_locked', `another process has been starting nats-server for ${timeoutMs} ms`, {
        hint: `if no actorloop process is running, remove ${lockFile}`,
        retryable: true,
      });
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  try {
    return await fn();
  } finally {
    const holder = await lockHolder(lockFile);
    if (holder === process.pid) await unlink(lockFile).catch(() => {});
  }
}

async function tryLock(lockFile: string): Promise<boolean> {
  try {
    const fh = await open(lockFile, 'wx');
    await fh.writeFile(String(process.pid));
    await fh.close();
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const holder = await lockHolder(lockFile);
  const stale = holder === undefined ? await olderThan(lockFile, 5_000) : !pidAlive(holder);
  if (stale) await breakStaleLock(lockFile, holder);
  return false;
}

/**
 * Removes a lock whose holder is dead. Renames it aside first and checks it is still the stale
 * one: a plain unlink could delete a fresh lock another process took in between.
 */
async function breakStaleLock(lockFile: string, stalePid: number | undefined): Promise<void> {
  const aside = `${lockFile}.${process.pid}.${Date.now()}.stale`;
  try {
    await rename(lockFile, aside);
  } catch {
    return; // someone else broke or released it
  }
  if ((await lockHolder(aside)) !== stalePid) {
    // we took a fresh lock: put it back (link fails if yet another lock appeared meanwhile)
    await link(aside, lockFile).catch(() => {});
  }
  await unlink(aside).catch(() => {});
}

async function lockHolder(lockFile: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt(await readFile(lockFile, 'utf8'), 10);
    return Number.isFinite(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function olderThan(path: string, ms: number): Promise<boolean> {
  try {
    return Date.now() - (await stat(path)).mtimeMs > ms;
  } catch {
    return false;
  }
}
