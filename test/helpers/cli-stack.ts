// What an end-to-end CLI test file shares: a nats-server on a free port (or none, where the
// commands start their data dir's embedded one), temp dirs and workspaces, CLI processes tracked
// per test, and a teardown that stops all of it after the file's tests, also when one failed:
// processes first (each test's are killed as it finishes), then any process left that names one
// of the file's dirs (the embedded nats-server a killed command left), then the server, the dirs.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { CliPool, DEMO_SCRIPT, cliEnv, demoWorkspace, type CliProcesses } from './cli.js';
import { startTestNats, tempDir, type TestNats } from './nats.js';
import { killMarked } from './processes.js';

/** What a test hands the stack so its processes die with it: vitest's test context, or its `onTestFinished`. */
export type TestEnd = { onTestFinished(fn: () => Promise<void>): void } | ((fn: () => Promise<void>) => void);

/** One test's data dir, workspace and CLI, and the flags that point a command at them. */
export interface CliSetup {
  /** A copy of the demo workspace (or an empty dir with `workspace: 'empty'`). */
  ws: string;
  dataDir: string;
  cli: CliProcesses;
  /** `--nats <the file's server> --data-dir <dataDir>` (only `--data-dir` on an embedded stack). */
  common: string[];
  /** `scripted:<file>`: the `script` option written to the data dir, else the bundled demo script. */
  model: string;
}

/** The shared setup of one test file; see `useCliStack`. */
export interface CliStack {
  /** The file's nats-server (there is none with `{ nats: false }`). */
  readonly nats: TestNats;
  /** Every CLI process of the file. */
  readonly pool: CliPool;
  /** A fresh temp dir, removed after the file's tests. */
  dir(prefix: string): Promise<string>;
  /** A copy of the demo workspace, removed after the file's tests. */
  workspace(): Promise<string>;
  /** Removes `path` (a file or dir the test made elsewhere) after the file's tests. */
  remove(path: string): void;
  /** Runs `fn` after the file's tests, before the server stops (a fake model server's close). */
  onClose(fn: () => Promise<void>): void;
  /** `--nats <url> --data-dir <dataDir>`, or only `--data-dir` on an embedded stack. */
  flags(dataDir: string): string[];
  /** A CLI tracker for the running test, on `dataDir` with `env` added; its processes die with the test. */
  cli(end: TestEnd, dataDir: string, env?: Record<string, string>): CliProcesses;
  /** A CLI tracker for the whole file (hosts started in beforeAll), killed after the file's tests. */
  fileCli(dataDir: string, env?: Record<string, string>): CliProcesses;
  /** A data dir, a workspace and a CLI for the running test. */
  setup(end: TestEnd, opts?: { prefix?: string; env?: Record<string, string>; workspace?: 'demo' | 'empty'; script?: unknown }): Promise<CliSetup>;
}

/**
 * Opens a CLI stack for the test file: call it at the top of the file. With `{ nats: false }` no
 * server is started: the commands run on their data dir's embedded one, which teardown stops.
 */
export function useCliStack(opts: { nats?: boolean } = {}): CliStack {
  let nats: TestNats | null = null;
  const pool = new CliPool();
  const dirs: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  // vitest's test context is itself callable: tell it from a bare `onTestFinished` by its member
  const finisher = (end: TestEnd) => ('onTestFinished' in end ? end : { onTestFinished: end });
  const stack: CliStack = {
    get nats(): TestNats {
      if (!nats) throw new Error('this stack has no nats-server of its own: its commands use the embedded one');
      return nats;
    },
    pool,
    async dir(prefix) {
      const d = await tempDir(prefix);
      dirs.push(d);
      return d;
    },
    async workspace() {
      const ws = await demoWorkspace();
      dirs.push(ws);
      return ws;
    },
    remove(path) {
      dirs.push(path);
    },
    onClose(fn) {
      closers.push(fn);
    },
    flags(dataDir) {
      return nats ? ['--nats', nats.url, '--data-dir', dataDir] : ['--data-dir', dataDir];
    },
    cli(end, dataDir, env = {}) {
      return pool.forTest(finisher(end), cliEnv(dataDir, env));
    },
    fileCli(dataDir, env = {}) {
      return pool.forFile(cliEnv(dataDir, env));
    },
    async setup(end, o = {}) {
      const ws = o.workspace === 'empty' ? await stack.dir('ws') : await stack.workspace();
      const dataDir = await stack.dir(o.prefix ?? 'data');
      let model = `scripted:${DEMO_SCRIPT}`;
      if (o.script !== undefined) {
        const file = join(dataDir, 'script.json');
        await writeFile(file, JSON.stringify(o.script));
        model = `scripted:${file}`;
      }
      return { ws, dataDir, cli: stack.cli(end, dataDir, o.env), common: stack.flags(dataDir), model };
    },
  };
  if (opts.nats !== false) {
    beforeAll(async () => {
      nats = await startTestNats();
    });
  }
  afterAll(async () => {
    await pool.killAll();
    await Promise.all(closers.map((c) => c()));
    // whatever still names one of the file's dirs: the embedded nats-server a killed command left
    // behind (its parent gone, or a host's on purpose, for the next command to adopt), the hosts a
    // killed `chaos` started
    await killMarked(dirs);
    await nats?.stop();
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });
  return stack;
}
