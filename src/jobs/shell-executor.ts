import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { ToolError } from '../protocol/errors.js';
import { shellInvocation } from '../tools/builtins/shell.js';
import { groupRuns, isAlive, procStat, runProcess, signalSandboxedGroups } from '../tools/sandbox.js';
import type { ToolContext } from '../tools/tool.js';

// The shell executor of a job (design §11b): the job's command line runs exactly as the `shell`
// tool runs one (`shellInvocation`: bubblewrap, the grant's network and env_allow, secrets
// stripped, the cwd contained in the workspace) through the same `runProcess`, so the sandbox
// stays the one boundary around what an agent wrote. What differs from `shell` is the lifetime:
// output streams to a sink as it comes (the caller stores it as an artifact) with a bounded tail
// kept live, and a stop is graceful: SIGTERM to the command, a grace, then SIGKILL.
//
// A process handle lives only in this host's memory. Under bubblewrap the job's processes die
// with the host (`--die-with-parent`: bubblewrap, and with it its PID namespace, is SIGKILLed when
// the host process dies, even by SIGKILL), so the job's next holder finds them gone and ends the
// job `interrupted`. Without bubblewrap the command leads a process group of its own, which
// outlives its host: the next holder on the same machine recognises it by `ProcessIdentity` and
// stops it with `killOrphanGroup`.

/** Timeout of a job's command when the job names none. */
export const DEFAULT_JOB_TIMEOUT_MS = 30 * 60_000;
/** Time between SIGTERM and SIGKILL when a job is cancelled or times out, unless the call names one. */
export const DEFAULT_JOB_KILL_GRACE_MS = 5_000;
/** Bytes of the latest output a running job keeps for `tail()`. */
export const DEFAULT_JOB_TAIL_BYTES = 16 * 1024;
/** Bytes given to the sink and not yet written above which the command's output is paused. */
export const OUTPUT_HIGH_WATER_BYTES = 1024 * 1024;
/** The most bytes one sink call gets when chunks that waited are joined. */
export const MAX_SINK_WRITE_BYTES = 256 * 1024;

/** One piece of a job's output, in the order it was read. */
export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  bytes: Uint8Array;
  /** Bytes of output (both streams) before this chunk. */
  offset: number;
}

/** Where a job's output goes as it comes (the caller writes it to an artifact in the blob store). */
export interface OutputSink {
  /**
   * Writes one chunk; called again only after the previous call settled, so chunks that came
   * meanwhile arrive joined. A throw stops the writing, not the job.
   */
  write(chunk: OutputChunk): void | Promise<void>;
}

/** What to run. */
export interface ShellJobSpec {
  /** The command line, run by bash -c (sh -c where bash is missing), as `shell` runs it. */
  command: string;
  /** Working directory relative to the workspace root (default "."). */
  cwd?: string;
  /** Stop the command after this long; default DEFAULT_JOB_TIMEOUT_MS. */
  timeoutMs?: number;
  /** SIGTERM-to-SIGKILL grace of a timeout, and of a cancel that names none; default DEFAULT_JOB_KILL_GRACE_MS. */
  killGraceMs?: number;
}

/** The same policy inputs a `shell` call gets: the workspace, the host's environment, the grant. */
export type ShellJobContext = Pick<ToolContext, 'workspace' | 'env' | 'sandbox'>;

/** Options of `startShellJob`. */
export interface ShellJobOptions {
  sink: OutputSink;
  /** Bytes kept for `tail()`; default DEFAULT_JOB_TAIL_BYTES. */
  tailBytes?: number;
}

/** How a job's command ended. */
export interface ShellJobResult {
  /** Exit code, or null when killed by a signal. Under bubblewrap a signal death is 128 + signal. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  durationMs: number;
  /** Bytes of output (both streams), written to the sink or not. */
  bytes: number;
  timedOut: boolean;
  /** `cancel` was called before the command ended. */
  cancelled: boolean;
  /** Something it started left its group and may still run: nobody can say its work stopped. */
  stray: boolean;
  /** Whether bubblewrap contained it (the grant had a bwrap path). */
  sandboxed: boolean;
  /** The sink's first failure, after which no output was written; null when all of it was. */
  outputError: { message: string } | null;
}

/** A running job's command. The handle is this host's only: nothing of it is persisted but `identity`. */
export interface ShellJob {
  /** Who runs the command (bubblewrap when sandboxed), the leader of its own process group. */
  readonly pid: number;
  /** What the job's log can keep so that a later holder on this machine can recognise the process. */
  readonly identity: ProcessIdentity;
  readonly sandboxed: boolean;
  /** The latest output (both streams, up to `tailBytes`), at any time. */
  tail(): Uint8Array;
  /** Bytes of output so far. */
  bytes(): number;
  /** Settles once the command ended, its process group is gone and its output was given to the sink; never rejects. */
  readonly result: Promise<ShellJobResult>;
  /**
   * SIGTERM to the command's process group, up to `graceMs` for it to end, then SIGKILL; resolves
   * with the result once the group is gone. Idempotent: a second call waits for the first.
   */
  cancel(graceMs?: number): Promise<ShellJobResult>;
}

/**
 * Starts a job's command and resolves once it runs. Throws a ToolError, having started nothing,
 * for a cwd outside the workspace, missing or not a directory, or when the process cannot start.
 */
export async function startShellJob(spec: ShellJobSpec, ctx: ShellJobContext, opts: ShellJobOptions): Promise<ShellJob> {
  const run = await shellInvocation(spec.command, spec.cwd, ctx);
  const sandboxed = run.sandbox !== null;
  const graceDefault = spec.killGraceMs ?? DEFAULT_JOB_KILL_GRACE_MS;
  const tail = new Tail(opts.tailBytes ?? DEFAULT_JOB_TAIL_BYTES);
  const abort = new AbortController();
  const started = performance.now();
  const output = new SinkQueue(opts.sink);
  let bytes = 0;
  let timedOut = false;
  let cancelled = false;
  let ended = false;
  let stopping: Promise<void> | null = null;
  // the sandboxed command's own groups, signalled at a stop: waited for besides bubblewrap's
  const innerGroups = new Set<number>();

  let onSpawn!: (pid: number) => void;
  const spawned = new Promise<number>((resolve) => (onSpawn = resolve));
  const outcome = runProcess(run.argv, {
    cwd: run.cwd,
    env: run.env,
    sandbox: run.sandbox,
    signal: abort.signal,
    // the outcome keeps nothing: the output goes to the sink and the tail
    maxOutputBytes: 0,
    killGraceMs: graceDefault,
    onSpawn,
    onOutput: (stream, chunk) => {
      const offset = bytes;
      bytes += chunk.length;
      tail.push(chunk);
      return output.push({ stream, bytes: chunk, offset });
    },
  });
  const pid = await Promise.race([spawned, outcome.then(() => null)]);
  if (pid === null) {
    // runProcess resolves without spawning only when aborted before, which nothing here does
    throw new ToolError('tool.spawn_failed', 'the job command ended before it started');
  }
  const identity = (await processIdentity(pid)) ?? { pid, startTicks: 0, bootId: '' };

  const signalCommand = async (sig: NodeJS.Signals): Promise<void> => {
    if (sandboxed) {
      for (const g of await signalSandboxedGroups(pid, sig)) innerGroups.add(g);
      return;
    }
    try {
      process.kill(-pid, sig);
    } catch {
      // ESRCH: the group is gone.
    }
  };
  const stop = (graceMs: number): Promise<void> => {
    stopping ??= (async () => {
      await signalCommand('SIGTERM');
      const timer = setTimeout(() => {
        // under bubblewrap this kills the sandbox whole: its PID namespace dies with it
        void signalCommand('SIGKILL');
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // ESRCH: gone meanwhile.
        }
        abort.abort();
      }, graceMs);
      // settled either way: a stop never rejects
      await outcome.then(() => clearTimeout(timer), () => clearTimeout(timer));
    })();
    return stopping;
  };

  const timeoutMs = spec.timeoutMs ?? DEFAULT_JOB_TIMEOUT_MS;
  const timeout = setTimeout(() => {
    if (ended) return;
    timedOut = true;
    void stop(graceDefault);
  }, timeoutMs);

  const result: Promise<ShellJobResult> = outcome.then(
    async (o) => {
      ended = true;
      clearTimeout(timeout);
      let stray = o.stray;
      for (const g of innerGroups) if (!(await waitGroupGone(g, graceDefault))) stray = true;
      await output.drained();
      return {
        exitCode: o.exitCode,
        signal: o.signal,
        durationMs: Math.round(performance.now() - started),
        bytes,
        timedOut,
        cancelled,
        stray,
        sandboxed,
        outputError: output.error,
      };
    },
    // runProcess rejects only when the process cannot start, and it had started
    (err: unknown) => {
      ended = true;
      clearTimeout(timeout);
      return {
        exitCode: null, signal: null, durationMs: Math.round(performance.now() - started), bytes, timedOut, cancelled,
        stray: true, sandboxed, outputError: { message: err instanceof Error ? err.message : String(err) },
      };
    },
  );

  return {
    pid,
    identity,
    sandboxed,
    tail: () => tail.bytes(),
    bytes: () => bytes,
    result,
    cancel(graceMs = graceDefault) {
      if (!ended && !timedOut) cancelled = true;
      if (!ended) void stop(graceMs);
      return result;
    },
  };
}

/** Names one process across PID reuse and reboots: what a job's log keeps of its command. */
export interface ProcessIdentity {
  pid: number;
  /** When it started, in clock ticks since boot (/proc/<pid>/stat). */
  startTicks: number;
  /** The kernel's boot ID: a PID of another boot is another process. '' when unknown. */
  bootId: string;
}

/** The identity of a running process, or null when it is gone (or there is no /proc). */
export async function processIdentity(pid: number): Promise<ProcessIdentity | null> {
  const stat = await procStat(pid);
  if (!stat) return null;
  return { pid, startTicks: stat.startTicks, bootId: await bootId() };
}

/**
 * Whether the process an identity names still runs on this machine: same boot, same start time,
 * not a zombie. False for a job started on another machine or before a reboot, and after its host
 * died under bubblewrap (its sandbox died with it).
 */
export async function isProcessAlive(identity: ProcessIdentity): Promise<boolean> {
  if (identity.bootId === '' || identity.bootId !== (await bootId())) return false;
  const stat = await procStat(identity.pid);
  return stat !== null && stat.startTicks === identity.startTicks && stat.state !== 'Z' && stat.state !== 'X';
}

/** Whether a process with this PID exists on this machine (any process: prefer `isProcessAlive`). */
export { isAlive };

/** Whether a process of group `pgid` runs here (zombies do not). */
export const processGroupAlive = groupRuns;

/**
 * SIGKILLs the process group an identity leads, when that very process still runs here (a job
 * whose host died without bubblewrap), and waits up to `waitMs` for the group to be gone. True
 * when nothing of it runs afterwards.
 */
export async function killOrphanGroup(identity: ProcessIdentity, waitMs = DEFAULT_JOB_KILL_GRACE_MS): Promise<boolean> {
  if (!(await isProcessAlive(identity))) return !(await groupRuns(identity.pid));
  const stat = await procStat(identity.pid);
  // a process that no longer leads its group is not ours to signal as a group
  if (stat?.pgrp !== identity.pid) return false;
  try {
    process.kill(-identity.pid, 'SIGKILL');
  } catch {
    // ESRCH: gone meanwhile.
  }
  return waitGroupGone(identity.pid, waitMs);
}

async function waitGroupGone(pgid: number, waitMs: number): Promise<boolean> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    if (!(await groupRuns(pgid))) return true;
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

let bootIdRead: Promise<string> | null = null;
function bootId(): Promise<string> {
  bootIdRead ??= readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((s) => s.trim(), () => '');
  return bootIdRead;
}

/** The last `max` bytes of a stream, for a live tail. */
class Tail {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    if (this.max <= 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    // drop whole chunks that fall out of the window; `bytes` cuts the first one kept
    while (this.chunks.length > 1 && this.size - this.chunks[0]!.length >= this.max) this.size -= this.chunks.shift()!.length;
  }

  bytes(): Uint8Array {
    const all = Buffer.concat(this.chunks, this.size);
    return all.length <= this.max ? all : Buffer.from(all.subarray(all.length - this.max));
  }
}

/**
 * Writes chunks to a sink one call at a time, in order. What comes while a write is on its way is
 * joined (consecutive chunks of one stream, up to MAX_SINK_WRITE_BYTES): a sink's cost per call
 * (a blob store round trip) then bounds the calls, not how finely the pipe was read.
 */
class SinkQueue {
  private readonly queue: OutputChunk[] = [];
  private pending = 0;
  private writing: Promise<void> | null = null;
  private waiters: (() => void)[] = [];
  error: { message: string } | null = null;

  constructor(private readonly sink: OutputSink) {}

  /** Queues a chunk; returns a promise to pause the output on while more than the high water waits. */
  push(chunk: OutputChunk): Promise<void> | undefined {
    if (this.error) return undefined;
    this.queue.push(chunk);
    this.pending += chunk.bytes.length;
    this.writing ??= this.drain();
    if (this.pending <= OUTPUT_HIGH_WATER_BYTES) return undefined;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Settles once everything queued was written (or the sink failed). */
  drained(): Promise<void> {
    return this.writing ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && !this.error) {
      const next = this.joinNext();
      try {
        await this.sink.write(next);
      } catch (err) {
        this.error = { message: err instanceof Error ? err.message : String(err) };
      }
      this.pending -= next.bytes.length;
      if (this.pending <= OUTPUT_HIGH_WATER_BYTES || this.error) this.wake();
    }
    // after a failure nothing more is written: what waits is dropped, and the output flows on
    this.queue.length = 0;
    this.pending = 0;
    this.wake();
    this.writing = null;
  }

  private joinNext(): OutputChunk {
    const first = this.queue.shift()!;
    const parts = [first.bytes];
    let size = first.bytes.length;
    while (this.queue[0]?.stream === first.stream && size + this.queue[0].bytes.length <= MAX_SINK_WRITE_BYTES) {
      const c = this.queue.shift()!;
      parts.push(c.bytes);
      size += c.bytes.length;
    }
    return parts.length === 1 ? first : { stream: first.stream, offset: first.offset, bytes: Buffer.concat(parts, size) };
  }

  private wake(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) w();
  }
}
