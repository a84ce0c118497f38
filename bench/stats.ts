import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** Nearest-rank percentile of unsorted samples (`p` in 0..100); NaN when there are none. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

/** Median of values (mean of the middle two for an even count). */
export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Samples process RSS every `everyMs` and keeps the maximum. */
export interface RssSampler {
  /** Stops sampling and returns the peak in bytes. */
  stop(): number;
}

/** Starts sampling RSS (`process.memoryUsage.rss()`, the same figure as `memoryUsage().rss`, cheaper). */
export function sampleRss(everyMs = 50): RssSampler {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, process.memoryUsage.rss());
    },
  };
}

/** Milliseconds on the high-resolution monotonic clock. */
export const nowMs = (): number => performance.now();

/**
 * A regular major GC before a timed run (with `--expose-gc`), so garbage of the run before is not
 * collected inside this one. Not `gc()`: that is a memory-reducing GC, which also flushes compiled
 * code, and the next short run then measured V8 compiling the runtime again (about half the A=1
 * throughput); the floors' few small functions barely noticed.
 */
export function settleGc(): void {
  (globalThis as { gc?: (o: { type: 'major'; execution: 'sync' }) => void }).gc?.({ type: 'major', execution: 'sync' });
}

/** Forces a full, memory-reducing GC when node runs with `--expose-gc` (for heap readings); true when it could. */
export function forceGc(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return false;
  gc();
  gc();
  return true;
}

/** Formats a duration in ms with precision that fits its size. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms < 1) return ms.toFixed(3);
  if (ms < 100) return ms.toFixed(2);
  return ms.toFixed(1);
}

/** Renders rows as a plain-text table with aligned columns (numbers right-aligned). */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^[-+\d.,%x ]*$/.test(r[i] ?? '')));
  const line = (cells: string[]) =>
    cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map(line)].join('\n');
}

/** CPU used during a run: this process (all its threads) and, on Linux, the nats-server. */
export interface CpuUse {
  processUs: number;
  /** The main thread (the event loop) alone; null when it cannot be read (not Linux). */
  mainUs: number | null;
  /** null when the server's CPU cannot be read (not Linux, no pid, the process gone). */
  serverUs: number | null;
}

/** Starts measuring CPU; `stop` gives what was used since. */
export function cpuMeter(serverPid?: number): { stop(): CpuUse } {
  const p0 = process.cpuUsage();
  const main = `${process.pid}/task/${process.pid}`;
  const m0 = processCpuUs(main);
  const s0 = serverPid === undefined ? null : processCpuUs(String(serverPid));
  return {
    stop() {
      const p = process.cpuUsage(p0);
      const m1 = m0 === null ? null : processCpuUs(main);
      const s1 = s0 === null ? null : processCpuUs(String(serverPid!));
      return {
        processUs: p.user + p.system,
        mainUs: m0 === null || m1 === null ? null : m1 - m0,
        serverUs: s0 === null || s1 === null ? null : s1 - s0,
      };
    },
  };
}

/** CPU of another process (Linux, from /proc), µs since the start; `stop` gives null when it cannot be read. */
export function pidCpuMeter(pid: number | undefined): { stop(): number | null } {
  const c0 = pid === undefined ? null : processCpuUs(String(pid));
  return {
    stop() {
      const c1 = c0 === null ? null : processCpuUs(String(pid!));
      return c0 === null || c1 === null ? null : c1 - c0;
    },
  };
}

let clockTicks: number | undefined;

/** User + system CPU of a process (`<pid>`) or thread (`<pid>/task/<tid>`) from /proc (Linux), µs; null when unreadable. */
function processCpuUs(which: string): number | null {
  try {
    const stat = readFileSync(`/proc/${which}/stat`, 'utf8');
    // fields after the command, which is in parentheses and may hold spaces: utime is the 14th field
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks;
  } catch {
    return null;
  }
}
