// What the browser tests against the real thing share: a nats-server on a free port, one data
// dir, `actorloop` processes (hosts, `serve`) started against them, headless chromium, and a CLI
// pool for commands. `useRealStack` opens it before the file's tests and stops all of it after.
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll } from 'vitest';
import { CliPool, cliEnv } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { ownerAuth, servedPageUrl, servedUrl } from '../helpers/serve-output.js';

/** A process the stack started, with what it printed so far. */
export interface Started {
  proc: ChildProcess;
  out(): string;
  err(): string;
  exited: Promise<unknown>;
}

/** The stack of one test file (its fields are set once `beforeAll` ran). */
export interface RealStack {
  nats: TestNats;
  browser: Browser;
  dataDir: string;
  pool: CliPool;
  /** Removed after the file's tests. */
  dirs: string[];
  /** Starts `actorloop <args> --nats … --data-dir …`. */
  start(args: string[]): Started;
  /**
   * Starts `actorloop serve --port 0 <args>` and waits for what it prints: its URL (stdout), the
   * page's URL with the token (stderr, what its owner opens once in a browser), and the header
   * the owner's programs send (the token in the data dir).
   */
  serve(args?: string[]): Promise<Served>;
}

/** A running `actorloop serve` of the stack. */
export interface Served extends Started {
  /** `http://127.0.0.1:<port>/`. */
  url: string;
  /** `http://127.0.0.1:<port>/?token=…`: a person opens it once; the page keeps the token in a cookie. */
  pageUrl: string;
  /** `Authorization: Bearer <the data dir's token>`, for the test's own requests. */
  auth: Record<string, string>;
}

/** Polls `ok` every 100 ms until it holds; fails after `ms` naming `what`. */
export async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Opens the stack before the file's tests (its data dir named after `prefix`) and stops everything it started after them. */
export function useRealStack(prefix: string): RealStack {
  const stack = {
    pool: new CliPool(),
    dirs: [] as string[],
    start(args: string[]): Started {
      const p = stack.pool.forFile(cliEnv(stack.dataDir)).start([...args, '--nats', stack.nats.url, '--data-dir', stack.dataDir]);
      return { proc: p.child, out: p.stdout, err: p.stderr, exited: p.exited };
    },
    async serve(args: string[] = []): Promise<Served> {
      const s = stack.start(['serve', '--port', '0', ...args]);
      await until('serve to print its URLs', () => servedUrl(s.out()) !== null && servedPageUrl(s.err()) !== null);
      return { ...s, url: `${servedUrl(s.out())!}/`, pageUrl: servedPageUrl(s.err())!, auth: ownerAuth(stack.dataDir) };
    },
  } as RealStack;
  beforeAll(async () => {
    stack.nats = await startTestNats();
    stack.dataDir = await tempDir(prefix);
    stack.dirs.push(stack.dataDir);
    stack.browser = await launchChromium();
  });
  afterAll(async () => {
    await stack.browser?.close();
    await stack.pool.killAll();
    await stack.nats?.stop();
    await Promise.all(stack.dirs.map((d) => rm(d, { recursive: true, force: true })));
  });
  return stack;
}
