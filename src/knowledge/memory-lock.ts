import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { open, readFile, stat, unlink, utimes } from 'node:fs/promises';
import { ToolError } from '../protocol/errors.js';

/** A lock no one refreshed for this long is taken to be left by a holder that stopped. */
export const LOCK_STALE_MS = 30_000;
/** How long `acquireFileLock` waits for a held lock by default. */
export const DEFAULT_LOCK_TIMEOUT_MS = 10_000;
const POLL_MS = 20;

/** What a lock file holds: who took it, so a waiter can tell a dead holder from a busy one. */
interface LockBody {
  pid: number;
  host: string;
  at: string;
  token: string;
}

/** A lock this process holds; `release` gives it up, `held` says whether it is still ours. */
export interface FileLock {
  readonly path: string;
  /** True while the lock file is the one this holder created (no one broke it as stale). */
  held(): Promise<boolean>;
  /** Marks the lock fresh again: a holder that keeps it past LOCK_STALE_MS (an editor) calls this. */
  refresh(): Promise<void>;
  /** Removes the lock file if it is still ours; safe to call twice. */
  release(): Promise<void>;
}

/**
 * Takes `<target>.lock`, created exclusively (O_EXCL) with the holder's pid, host and time.
 * A lock whose pid is gone (same host) or that nobody refreshed for LOCK_STALE_MS is broken;
 * otherwise it polls until `timeoutMs` and then fails with `memory.locked` (retryable). The
 * lock file's mtime is its age, so `refresh` (utimes) keeps a long hold alive.
 */
export async function acquireFileLock(target: string, timeoutMs = DEFAULT_LOCK_TIMEOUT_MS): Promise<FileLock> {
  const path = `${target}.lock`;
  const body: LockBody = { pid: process.pid, host: hostname(), at: new Date().toISOString(), token: randomBytes(12).toString('hex') };
  const deadline = Date.now() + timeoutMs;
  let holder: LockBody | null = null;
  for (;;) {
    if (await tryCreate(path, body)) return heldLock(path, body.token);
    holder = await readBody(path);
    if (await isStale(path, holder)) await breakStale(path, holder);
    else if (Date.now() >= deadline) break;
    else await sleep(POLL_MS + Math.floor(Math.random() * POLL_MS));
  }
  const who = holder ? `process ${holder.pid} on ${holder.host} since ${holder.at}` : 'another process';
  throw new ToolError('memory.locked', `${target} is locked by ${who} (waited ${timeoutMs} ms)`, {
    retryable: true,
    hint: `try again in a moment; if no actorloop process is editing it, remove ${path}`,
  });
}

async function tryCreate(path: string, body: LockBody): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new ToolError('memory.lock_failed', `cannot create the lock ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    await handle.writeFile(JSON.stringify(body));
  } finally {
    await handle.close();
  }
  return true;
}

/** The lock's body, or null when it is gone or not (yet) readable: a creator may not have written it. */
async function readBody(path: string): Promise<LockBody | null> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<LockBody>;
    if (typeof parsed.pid !== 'number' || typeof parsed.token !== 'string') return null;
    return { pid: parsed.pid, host: String(parsed.host ?? ''), at: String(parsed.at ?? ''), token: parsed.token };
  } catch {
    return null;
  }
}

async function isStale(path: string, body: LockBody | null): Promise<boolean> {
  const info = await stat(path).catch(() => null);
  if (info === null) return false; // released meanwhile: the next try takes it
  if (Date.now() - info.mtimeMs > LOCK_STALE_MS) return true;
  // an unreadable body is a creator between open and write: only its age can break it
  return body !== null && body.host === hostname() && !processAlive(body.pid);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes a stale lock, under `<lock>.break` so two waiters that both judged it stale do not
 * both remove it: the second would remove the fresh lock the first one's winner just made.
 */
async function breakStale(path: string, judged: LockBody | null): Promise<void> {
  const breaker = `${path}.break`;
  const brk: LockBody = { pid: process.pid, host: hostname(), at: new Date().toISOString(), token: randomBytes(12).toString('hex') };
  if (!(await tryCreate(breaker, brk))) {
    // a breaker that died mid-break must not block everyone for good
    if (await isStale(breaker, await readBody(breaker))) await unlink(breaker).catch(() => undefined);
    return;
  }
  try {
    const now = await readBody(path);
    // still the lock judged stale (same token, or still unreadable): remove it
    if ((now?.token ?? null) === (judged?.token ?? null) && (await isStale(path, now))) await unlink(path).catch(() => undefined);
  } finally {
    await unlink(breaker).catch(() => undefined);
  }
}

function heldLock(path: string, token: string): FileLock {
  let released = false;
  const held = async (): Promise<boolean> => !released && (await readBody(path))?.token === token;
  return {
    path,
    held,
    async refresh() {
      if (await held()) {
        const now = new Date();
        await utimes(path, now, now).catch(() => undefined);
      }
    },
    async release() {
      if (released) return;
      const mine = await held();
      released = true;
      if (mine) await unlink(path).catch(() => undefined);
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
