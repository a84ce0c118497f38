import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, statSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Cleanup } from './harness.js';

/** The package root: `bin/actorloop.js` and `dist/` are resolved from it. */
export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const BIN = join(REPO_ROOT, 'bin', 'actorloop.js');
const DIST_MAIN = join(REPO_ROOT, 'dist', 'cli', 'main.js');

/** One committed event as `host --json` prints it (only the fields the bench reads). */
export interface HostEvent {
  actor: string;
  type: string;
  epoch: number;
  /** Commit time, ms since the epoch (the event's `at`). */
  atMs: number;
  /** `turn/end`: how the turn ended. */
  outcome?: string;
}

/** What starts a host: its name, lease TTL, server, data dir, and a dir to run in. */
export interface HostSpec {
  name: string;
  leaseTtlMs: number;
  natsUrl: string;
  dataDir: string;
  /** The child's cwd and XDG_CONFIG_HOME: holds no actorloop.toml, so no user or workspace config applies. */
  cwd: string;
}

/**
 * A real `actorloop host` child process (built `dist/`, not tsx: what an operator runs). Every
 * event it commits arrives through `--json` on stdout, and every actor it starts hosting through
 * its `hosting actor` log line (ACTORLOOP_LOG=info, pino JSON on stderr, with the host's own
 * timestamp). Registered on `cleanup`: SIGKILLed if still running.
 */
export class HostProcess {
  /** Actor ID → host time (ms since the epoch) of its `hosting actor` line. */
  readonly hosted = new Map<string, number>();
  /** Resolves once the host printed that it is hosting agents (its first claim pass is done). */
  readonly ready: Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private readonly tail: string[] = [];
  private readonly listeners = new Set<(e: HostEvent) => void>();
  private warnings = 0;

  constructor(readonly spec: HostSpec, cleanup: Cleanup) {
    // BENCH_HOST_PROF=<dir>: a CPU profile of each host that exits normally (SIGKILL writes none)
    const prof = process.env.BENCH_HOST_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_HOST_PROF] : [];
    this.child = spawn(
      process.execPath,
      [...prof, BIN, 'host', '--name', spec.name, '--lease-ttl', String(spec.leaseTtlMs), '--nats', spec.natsUrl, '--data-dir', spec.dataDir, '--json'],
      { cwd: spec.cwd, env: hostEnv(spec), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    cleanup.add(`kill host ${spec.name}`, () => this.kill('SIGKILL'));
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    let onReady!: () => void;
    this.ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      void this.exited.then((e) => reject(new Error(`host ${spec.name} exited (${e.code ?? e.signal}) before it was ready: ${this.stderrTail()}`)));
    });
    this.ready.catch(() => {});
    createInterface({ input: this.child.stdout! }).on('line', (line) => this.onStdout(line));
    // BENCH_HOST_LOGS=<dir>: keep each host's stderr there, to see why a takeover was slow
    const keep = process.env.BENCH_HOST_LOGS;
    if (keep) this.child.stderr!.pipe(createWriteStream(join(keep, `host-${spec.name}-${this.child.pid}.log`)));
    createInterface({ input: this.child.stderr! }).on('line', (line) => {
      if (line.includes('hosting agents')) onReady();
      this.onStderr(line);
    });
  }

  /** Calls `fn` with every event the host commits from now on. */
  onEvent(fn: (e: HostEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** True once the process has exited. */
  get gone(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** The child's process ID. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Log lines at warn or above so far (a takeover should need none). */
  get warnCount(): number {
    return this.warnings;
  }

  /** The last lines of its stderr, for an error message. */
  stderrTail(): string {
    return this.tail.slice(-8).join('\n');
  }

  /** SIGTERM (the host drains and releases its leases), SIGKILL if it has not exited after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    const timer = setTimeout(() => void this.kill('SIGKILL'), graceMs);
    await this.kill('SIGTERM');
    clearTimeout(timer);
  }

  /** Sends a signal; resolves once the process is gone. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    if (!this.gone) this.child.kill(signal);
    await this.exited;
  }

  private onStdout(line: string): void {
    let e: { actor?: string; type?: string; epoch?: number; at?: string; data?: { outcome?: string } };
    try {
      e = JSON.parse(line) as typeof e;
    } catch {
      return;
    }
    if (typeof e.actor !== 'string' || typeof e.type !== 'string') return;
    const ev: HostEvent = { actor: e.actor, type: e.type, epoch: e.epoch ?? 0, atMs: Date.parse(e.at ?? '') || Date.now() };
    if (typeof e.data?.outcome === 'string') ev.outcome = e.data.outcome;
    for (const fn of this.listeners) fn(ev);
  }

  private onStderr(line: string): void {
    this.tail.push(line);
    if (this.tail.length > 50) this.tail.shift();
    if (!line.startsWith('{')) return;
    let rec: { level?: number; time?: number; msg?: string; actorId?: string };
    try {
      rec = JSON.parse(line) as typeof rec;
    } catch {
      return;
    }
    if ((rec.level ?? 0) >= 40) this.warnings += 1;
    if (rec.msg === 'hosting actor' && rec.actorId) this.hosted.set(rec.actorId, rec.time ?? Date.now());
  }
}

/** The parent's environment without anything that points a host elsewhere; info logs for `hosting actor`. */
function hostEnv(spec: HostSpec): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['NATS_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ACTORLOOP_MODEL', 'ACTORLOOP_FAULTS', 'ACTORLOOP_DATA_DIR',
    'ACTORLOOP_LOG', 'ACTORLOOP_SNAPSHOT_EVERY']) {
    delete env[name];
  }
  return { ...env, ACTORLOOP_LOG: 'info', XDG_CONFIG_HOME: spec.cwd };
}

/**
 * Why the host children cannot run as built, or null: `dist/` missing, or older than a source
 * file (the children run `bin/actorloop.js`, which loads `dist/`).
 */
export async function staleBuild(): Promise<string | null> {
  let built: number;
  try {
    built = statSync(DIST_MAIN).mtimeMs;
  } catch {
    return `${DIST_MAIN} is missing: run \`npm run build\` first`;
  }
  const newer = await newestSource(join(REPO_ROOT, 'src'));
  if (newer && newer.mtimeMs > built) return `${newer.path} is newer than dist/: run \`npm run build\` first`;
  return null;
}

async function newestSource(dir: string): Promise<{ path: string; mtimeMs: number } | null> {
  let best: { path: string; mtimeMs: number } | null = null;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const found = entry.isDirectory() ? await newestSource(path) : entry.name.endsWith('.ts') ? { path, mtimeMs: (await stat(path)).mtimeMs } : null;
    if (found && (!best || found.mtimeMs > best.mtimeMs)) best = found;
  }
  return best;
}

/** CPU time (user + system, ms) a process has used so far, from /proc; NaN where there is none (not Linux, gone). */
export async function cpuMsOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name, which is in parentheses and may hold spaces
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat(5), in clock ticks (USER_HZ, 100 on Linux)
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}
