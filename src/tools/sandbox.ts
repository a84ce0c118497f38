import { execFile, spawn } from 'node:child_process';
import { access, constants, lstat, mkdtemp, readdir, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ToolError } from '../protocol/errors.js';
import { GIT_DIR_NAME, WORKSPACE_CONFIG_NAME } from './protected-paths.js';

/** PATH used when the environment has none, and for the bubblewrap probe. */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Bytes of each stream (stdout, stderr) kept by `runProcess`; the rest is read and discarded. */
export const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;
/** Time between SIGTERM and SIGKILL when a process tree is stopped. */
export const DEFAULT_KILL_GRACE_MS = 2_000;
/** Directories masked with an empty tmpfs in the sandbox: they hold sockets (docker, dbus, agents) and secrets. */
export const DEFAULT_HIDDEN_PATHS: readonly string[] = ['/run', '/var/run'];

/**
 * Environment names that look like secrets, matched case-insensitively. `AUTH` only as a whole
 * `_`-separated word, so `GIT_AUTHOR_NAME` passes while `SSH_AUTH_SOCK` and `NPM_CONFIG__AUTH` do not.
 */
export const SECRET_ENV_PATTERNS: readonly RegExp[] = [
  /KEY/i,
  /SECRET/i,
  /TOKEN/i,
  /PASSWORD/i,
  /PASSWD/i,
  /CREDENTIAL/i,
  /PRIVATE/i,
  /(^|_)AUTH($|_)/i,
];
/**
 * The runtime's own variables: a process that learns the bus URL (which may carry credentials)
 * could forge log events when it has network, and ACTORLOOP_* configure the runtime, not the work.
 */
export const RUNTIME_ENV_PATTERNS: readonly RegExp[] = [/^NATS_/i, /^ACTORLOOP_/i];
// `scheme://user:password@host`: DATABASE_URL and friends carry passwords under innocent names.
const URL_WITH_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:[^/\s@]+@/i;

// Private /tmp dirs carry their creator's PID, so those of a process that was killed can be swept.
const TMP_PREFIX = 'actorloop-sh-';
const TMP_OWNER = /^actorloop-sh-(\d+)-/;
let swept: Promise<unknown> | null = null;

const PROBE_TIMEOUT_MS = 3_000;
// The namespaces and mounts of a real call, around a program that only exits.
const PROBE_ARGS = ['--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--', 'true'];
const probes = new Map<string, Promise<boolean>>();

/** The first executable file called `name` on a PATH string; empty and relative entries are skipped. */
export async function findExecutable(name: string, pathEnv: string | undefined): Promise<string | null> {
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    // An empty or relative entry means "the current directory": never resolve a binary from there.
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      if (!(await stat(candidate)).isFile()) continue;
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Missing or not executable: look further along PATH.
    }
  }
  return null;
}

/**
 * The path of a bubblewrap that works here, or null. Containers without user namespaces ship
 * bwrap but cannot use it, so the first `bwrap` on PATH is run once (cached per path) with the
 * namespaces and mounts a real call uses.
 */
export async function findBubblewrap(pathEnv: string | undefined): Promise<string | null> {
  const found = await findExecutable('bwrap', pathEnv);
  if (!found) return null;
  let probe = probes.get(found);
  if (!probe) {
    probe = probeBubblewrap(found);
    probes.set(found, probe);
  }
  return (await probe) ? found : null;
}

function probeBubblewrap(bwrapPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(bwrapPath, PROBE_ARGS, { timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL', env: { PATH: DEFAULT_PATH } }, (err) => resolve(!err));
  });
}

/**
 * A copy of `env` without variables that look secret (name patterns, or a URL with a password
 * as value) or belong to the runtime, except the names in `allow` (exact, case-sensitive).
 */
export function sandboxEnv(env: Readonly<Record<string, string | undefined>>, allow: readonly string[]): Record<string, string> {
  const allowed = new Set(allow);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (!allowed.has(name) && isHiddenEnv(name, value)) continue;
    out[name] = value;
  }
  return out;
}

/** True when a variable is kept from processes unless allowed by name. */
export function isHiddenEnv(name: string, value = ''): boolean {
  return (
    SECRET_ENV_PATTERNS.some((p) => p.test(name)) || RUNTIME_ENV_PATTERNS.some((p) => p.test(name)) || URL_WITH_PASSWORD.test(value)
  );
}

/** Options of `bwrapArgs`. */
export interface BwrapOptions {
  /** Real absolute path of the workspace, bound read-write at the same path. */
  workspace: string;
  /** Absolute working directory (inside the workspace). */
  cwd: string;
  /** A private host directory mounted as /tmp (created per call, removed after); '' for a tmpfs. */
  tmpDir: string;
  /** Whether the process shares the host's network. */
  network: boolean;
  /** Existing directories to mask with an empty tmpfs (see DEFAULT_HIDDEN_PATHS). */
  hide?: readonly string[];
  /** Existing paths inside the workspace bound read-only over it (see protectedInWorkspace). */
  readOnly?: readonly string[];
  /** Existing paths bound after all of the above, in order (a later bind covers an earlier one). */
  binds?: readonly SandboxBind[];
}

/** A host path bound at the same path in the sandbox. */
export interface SandboxBind {
  path: string;
  writable: boolean;
}

/**
 * bubblewrap arguments (without `--` and the command) for a read-only host with one writable
 * workspace, a private /tmp, /dev and /proc, no network unless granted, and no capabilities.
 * The environment is not passed here but to spawn: argv is readable in /proc by every user.
 */
export function bwrapArgs(opts: BwrapOptions): string[] {
  const args = ['--unshare-all'];
  if (opts.network) args.push('--share-net');
  args.push(
    '--die-with-parent',
    // A new session: no controlling terminal, so no TIOCSTI keystroke injection into ours.
    '--new-session',
    // Root in the sandbox keeps every capability in its user namespace otherwise, and could
    // unmount the private /tmp or the masks to see (read-only) what they cover.
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
  );
  args.push(...(opts.tmpDir === '' ? ['--tmpfs', '/tmp'] : ['--bind', opts.tmpDir, '/tmp']));
  for (const dir of opts.hide ?? []) args.push('--tmpfs', dir);
  // /etc/resolv.conf often points into /run (systemd-resolved): name resolution needs it back.
  if (opts.network && (opts.hide ?? []).includes('/run')) args.push('--ro-bind-try', '/run/systemd/resolve', '/run/systemd/resolve');
  // Last, so masks and the private /tmp cannot cover a workspace that lives below them.
  args.push('--bind', opts.workspace, opts.workspace);
  // after the workspace, so they cover its writable bind
  for (const p of opts.readOnly ?? []) args.push('--ro-bind', p, p);
  for (const b of opts.binds ?? []) args.push(b.writable ? '--bind' : '--ro-bind', b.path, b.path);
  args.push('--chdir', opts.cwd);
  return args;
}

/** How `runProcess` contains the process; null runs it directly on the host. */
export interface ProcessSandbox {
  bwrapPath: string;
  /** The workspace root, the only writable host path. */
  workspace: string;
  network: boolean;
  /** Directories to mask besides DEFAULT_HIDDEN_PATHS (the runtime's data dir, ~/.ssh, ...). */
  hide?: readonly string[];
  /** More host paths to bind after the workspace (see BwrapOptions.binds). */
  binds?: readonly SandboxBind[];
}

/** Options of `runProcess`. */
export interface RunProcessOptions {
  /** Absolute working directory. */
  cwd: string;
  /** The complete environment of the process (nothing is inherited). */
  env: Readonly<Record<string, string>>;
  signal?: AbortSignal;
  /** Stop the process tree after this long; unbounded when absent. */
  timeoutMs?: number;
  /** Bytes kept per stream; default DEFAULT_MAX_OUTPUT_BYTES. */
  maxOutputBytes?: number;
  sandbox: ProcessSandbox | null;
  /** SIGTERM-to-SIGKILL grace; default DEFAULT_KILL_GRACE_MS. */
  killGraceMs?: number;
  /**
   * Each chunk as it is read, besides the capped copy kept in the outcome. A returned promise
   * pauses that stream until it settles: a slow reader slows the process instead of filling memory.
   */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void | Promise<void>;
  /** The PID of the process started (bubblewrap when sandboxed), which leads its own process group. */
  onSpawn?: (pid: number) => void;
}

/** How a process ended and what it wrote. */
export interface ProcessOutcome {
  /** Exit code, or null when killed by a signal. Under bwrap a signal death is 128 + signal. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** Bytes each stream wrote, kept or not. */
  stdoutBytes: number;
  stderrBytes: number;
  /** True when either stream wrote more than `maxOutputBytes`. */
  truncated: boolean;
  timedOut: boolean;
  aborted: boolean;
  /**
   * Something it started may still run: a process that left its group held the output pipes past
   * the kill, or the group outlived SIGKILL. Then nobody can say its work stopped.
   */
  stray: boolean;
  durationMs: number;
}

/**
 * Runs argv in its own process group (under bubblewrap when `sandbox` is set) and collects its
 * output. On timeout or abort the whole tree gets SIGTERM, then SIGKILL after a grace; when the
 * main process exits, what it left behind is stopped the same way. It resolves only once its
 * process group is gone (what is left of it after the pipes close is SIGKILLed and awaited), or
 * says `stray` when it cannot tell. Never rejects for the process's own failures; throws a
 * ToolError only when it cannot start.
 */
export async function runProcess(argv: readonly string[], opts: RunProcessOptions): Promise<ProcessOutcome> {
  const started = performance.now();
  if (argv.length === 0) throw new ToolError('tool.spawn_failed', 'no program to run');
  if (opts.signal?.aborted) return { ...emptyOutcome(), aborted: true, durationMs: 0 };
  let tmpDir: string | null = null;
  try {
    let file = argv[0]!;
    let args = argv.slice(1);
    if (opts.sandbox) {
      const workspace = await realpath(opts.sandbox.workspace);
      if (workspace === path.parse(workspace).root) {
        throw new ToolError('tool.sandbox_failed', 'the workspace is the filesystem root; a sandbox around it would contain nothing');
      }
      swept ??= sweepStaleTmpDirs();
      await swept;
      tmpDir = await mkdtemp(path.join(tmpdir(), `${TMP_PREFIX}${process.pid}-`));
      const hide = await realDirectories([...DEFAULT_HIDDEN_PATHS, ...(opts.sandbox.hide ?? [])]);
      const readOnly = await protectedInWorkspace(workspace);
      const sandboxArgs = bwrapArgs({ workspace, cwd: opts.cwd, tmpDir, network: opts.sandbox.network, hide, readOnly, binds: opts.sandbox.binds ?? [] });
      file = opts.sandbox.bwrapPath;
      args = [...sandboxArgs, '--', ...argv];
    }
    return await collect(file, args, opts, started);
  } finally {
    if (tmpDir) await rm(tmpDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Removes private /tmp dirs whose creating process is gone (killed before its cleanup ran).
 * Runs once per process before its first sandboxed call; exported for tests.
 */
export async function sweepStaleTmpDirs(dir: string = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [])) {
    const owner = TMP_OWNER.exec(name)?.[1];
    if (!owner || isAlive(Number(owner))) continue;
    await rm(path.join(dir, name), { recursive: true, force: true }).catch(() => undefined);
    removed.push(name);
  }
  return removed;
}

/** Whether a process with this PID exists (a zombie counts; this process always does). */
export function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function collect(file: string, args: readonly string[], opts: RunProcessOptions, started: number): Promise<ProcessOutcome> {
  const graceMs = opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const stdout = new CappedBuffer(opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  const stderr = new CappedBuffer(opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  return new Promise((resolve, reject) => {
    // detached: the child leads a new process group (and session), so one kill reaches the tree.
    const child = spawn(file, args, { cwd: opts.cwd, env: { ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let timedOut = false;
    let aborted = false;
    let stopping = false;
    let settled = false;
    let stray = false;
    const timers: NodeJS.Timeout[] = [];

    const killGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const stop = (): void => {
      if (stopping) return;
      stopping = true;
      killGroup('SIGTERM');
      timers.push(setTimeout(() => killGroup('SIGKILL'), graceMs));
      // A descendant that left the group (setsid) can hold our pipes open forever: stop waiting for it.
      timers.push(
        setTimeout(() => {
          stray = true;
          child.stdout?.destroy();
          child.stderr?.destroy();
          finish();
        }, graceMs + 1_000),
      );
    };
    const onAbort = (): void => {
      aborted = true;
      stop();
    };
    const finish = (): void => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      opts.signal?.removeEventListener('abort', onAbort);
      // The pipes closing says who held them is gone, not the group: a member that ignored
      // SIGTERM with its output elsewhere would outlive the cleared SIGKILL timer.
      void reapGroup(child.pid, graceMs).then((gone) => {
        if (!gone) stray = true;
        done();
      });
    };
    const done = (): void => {
      resolve({
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        stdout: stdout.bytes(),
        stderr: stderr.bytes(),
        stdoutBytes: stdout.total,
        stderrBytes: stderr.total,
        truncated: stdout.truncated || stderr.truncated,
        timedOut,
        aborted,
        stray,
        durationMs: Math.round(performance.now() - started),
      });
    };

    // Keep reading past the cap: a child blocked on a full pipe would never exit.
    const onData = (name: 'stdout' | 'stderr', kept: CappedBuffer) => (chunk: Buffer): void => {
      kept.push(chunk);
      const stream = child[name];
      const wait = opts.onOutput?.(name, chunk);
      // Only while the process runs: after its exit the stray timer would take a stream paused
      // for a slow reader for one held by an escaped process. What is left then is bounded (the
      // pipe's buffer, and what descendants write before the group is stopped).
      if (wait && exit === null) {
        stream.pause();
        void wait.catch(() => undefined).then(() => stream.resume());
      }
    };
    child.stdout.on('data', onData('stdout', stdout));
    child.stderr.on('data', onData('stderr', stderr));
    if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    child.once('error', (err) => {
      if (child.pid !== undefined) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      opts.signal?.removeEventListener('abort', onAbort);
      reject(new ToolError('tool.spawn_failed', `could not start ${file}: ${err.message}`, { cause: err }));
    });
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      child.stdout.resume();
      child.stderr.resume();
      // Background jobs outlive the shell and keep our pipes open; they are part of this call.
      stop();
    });
    child.once('close', finish);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    // The signal may have fired while the sandbox was being prepared.
    if (opts.signal?.aborted) onAbort();
    if (opts.timeoutMs !== undefined && Number.isFinite(opts.timeoutMs)) {
      timers.push(
        setTimeout(() => {
          if (exit) return;
          timedOut = true;
          stop();
        }, opts.timeoutMs),
      );
    }
  });
}

/**
 * SIGKILLs what is left of process group `pgid` and waits up to `waitMs` for it to be gone;
 * true when nothing of it runs (zombies do not run). Costs one syscall when the group is gone.
 */
async function reapGroup(pgid: number | undefined, waitMs: number): Promise<boolean> {
  if (pgid === undefined || !(await groupRuns(pgid))) return true;
  const deadline = performance.now() + waitMs;
  for (;;) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // ESRCH: gone meanwhile.
    }
    await new Promise((r) => setTimeout(r, 20));
    if (!(await groupRuns(pgid))) return true;
    if (performance.now() > deadline) return false;
  }
}

/** Whether a process of group `pgid` runs: signal 0 to the group, then /proc to skip zombies nobody reaped. */
export async function groupRuns(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  const names = await readdir('/proc').catch(() => null);
  // no /proc to ask: trust the signal
  if (!names) return true;
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await procStat(Number(name));
    if (stat?.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') return true;
  }
  return false;
}

/** The fields of /proc/<pid>/stat this module reads; null when the process is gone (or there is no /proc). */
export interface ProcStat {
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** When it started, in clock ticks since boot: with the PID, it names one process across PID reuse. */
  startTicks: number;
}

/** Reads /proc/<pid>/stat; null when the process is gone or there is no /proc. */
export async function procStat(pid: number): Promise<ProcStat | null> {
  const raw = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (raw === '') return null;
  // fields after the command (which may hold spaces and parentheses): state ppid pgrp session ...
  const f = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
  return { state: f[0] ?? '', ppid: Number(f[1]), pgrp: Number(f[2]), session: Number(f[3]), startTicks: Number(f[19]) };
}

/**
 * Sends `sig` to the process groups of the children of `bwrapPid` that lead their own: bubblewrap
 * starts the command in a new session (`--new-session`), out of reach of a signal to its own
 * group, and a signal to bubblewrap itself kills the sandbox at once (`--die-with-parent`). This
 * is how a sandboxed command gets a SIGTERM it can clean up on. Returns the groups signalled.
 */
export async function signalSandboxedGroups(bwrapPid: number, sig: NodeJS.Signals): Promise<number[]> {
  const signalled: number[] = [];
  for (const name of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await procStat(Number(name));
    if (stat?.ppid !== bwrapPid || stat.pgrp !== Number(name)) continue;
    try {
      process.kill(-stat.pgrp, sig);
      signalled.push(stat.pgrp);
    } catch {
      // ESRCH: gone meanwhile.
    }
  }
  return signalled;
}

/** Keeps the first `max` bytes of a stream and counts the rest. */
class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  total = 0;
  truncated = false;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.max - this.kept;
    if (chunk.length <= room) {
      this.chunks.push(chunk);
      this.kept += chunk.length;
      return;
    }
    this.truncated = true;
    // Copy the kept part: a subarray would pin the whole chunk.
    if (room > 0) this.chunks.push(Buffer.from(chunk.subarray(0, room)));
    this.kept = this.max;
  }

  bytes(): Uint8Array {
    return Buffer.concat(this.chunks, this.kept);
  }
}

function emptyOutcome(): ProcessOutcome {
  const none = new Uint8Array(0);
  return {
    exitCode: null,
    signal: null,
    stdout: none,
    stderr: none,
    stdoutBytes: 0,
    stderrBytes: 0,
    truncated: false,
    timedOut: false,
    aborted: false,
    stray: false,
    durationMs: 0,
  };
}

/**
 * The protected paths of a workspace (protected-paths.ts) that exist at its root, resolved: its
 * repository's `.git` (a directory, or a worktree's `.git` file) and its actorloop.toml. One a link
 * leads out of the workspace is read-only in the sandbox anyway. A `.git` made by a command in
 * the sandbox is writable for the rest of that command; the host refuses to run git on a
 * repository whose config names programs (src/actors/tree/git-safety.ts), so that is no way out either.
 */
export async function protectedInWorkspace(workspace: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of [GIT_DIR_NAME, WORKSPACE_CONFIG_NAME]) {
    const real = await realpath(path.join(workspace, name)).catch(() => null);
    if (real !== null && real !== workspace && real.startsWith(workspace + path.sep) && !out.includes(real)) out.push(real);
  }
  return out;
}

// Only real directories can be masked: a symlink (/var/run -> /run) is masked through its target.
async function realDirectories(paths: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    const info = await lstat(p).catch(() => null);
    if (info?.isDirectory() && !out.includes(p)) out.push(p);
  }
  return out;
}
