import { readdir, readFile } from 'node:fs/promises';
import { randomInt } from 'node:crypto';

/** A process found in /proc: its PID and argv. */
export interface ProcInfo {
  pid: number;
  argv: string[];
}

/**
 * A unique `sleep` duration to plant in a command line: inside a PID namespace PIDs differ, so
 * tests find their processes by this marker in /proc/<pid>/cmdline instead.
 */
export function sleepMarker(): string {
  return `300.${randomInt(100_000_000, 999_999_999)}`;
}

/** Live processes whose command line contains `marker` (zombies have none, so they never match). */
export async function processesWith(marker: string): Promise<ProcInfo[]> {
  const found: ProcInfo[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const raw = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (!raw.includes(marker)) continue;
    found.push({ pid: Number(name), argv: raw.split('\0').filter((a) => a !== '') });
  }
  return found;
}

/** `sleep` processes running with `marker` as their duration. */
export async function sleepers(marker: string): Promise<number[]> {
  return (await processesWith(marker)).filter((p) => p.argv[0]?.endsWith('sleep') && p.argv[1] === marker).map((p) => p.pid);
}

/** Polls `check` every 25 ms until it returns true; false when `timeoutMs` passes first. */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** SIGKILLs every process whose command line holds one of the markers: cleanup after a failed test. */
export async function killMarked(markers: Iterable<string>): Promise<void> {
  for (const marker of markers) {
    for (const p of await processesWith(marker)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}

/**
 * Polls `fn` every 100 ms until it returns something truthy, and resolves with it; throws after
 * `timeoutMs` naming `what` (a function is called then, so the message can carry a log so far).
 */
export async function until<T>(what: string | (() => string), fn: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
