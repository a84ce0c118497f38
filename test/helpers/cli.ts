import { spawn, type ChildProcess } from 'node:child_process';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventSchema, type ActorEvent } from '../../src/protocol/events.js';
import { z } from 'zod';
import { DirectoryEntrySchema, type DirectoryEntry } from '../../src/bus/directory.js';
import { ActorStatusSchema } from '../../src/protocol/gateway.js';
import { tempDir } from './nats.js';

/** The package root: `bin/actorloop.js` and `examples/` are resolved from it. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The bundled demo script (6 responses: list_dir, 2× read_file, search, write_file, read_file, answer). */
export const DEMO_SCRIPT = join(REPO_ROOT, 'examples', 'demo', 'script.json');
/** An agent ID as the CLI prints it. */
export const AGENT_ID = /^agt_[0-9A-HJKMNP-TV-Z]{26}$/;

/** How a CLI process ended, with everything it wrote. */
export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  elapsedMs: number;
}

/**
 * The environment a CLI child runs with: the parent's, minus every variable that would point it
 * at the user's server, data dir, model or faults, plus `ACTORLOOP_DATA_DIR=dataDir`.
 */
export function cliEnv(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['NATS_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ACTORLOOP_MODEL', 'ACTORLOOP_FAULTS', 'ACTORLOOP_DATA_DIR', 'ACTORLOOP_LOG']) {
    delete env[name];
  }
  // the user's own ~/.config/actorloop/config.toml must not reach a test
  return { ...env, ACTORLOOP_DATA_DIR: dataDir, XDG_CONFIG_HOME: join(dataDir, 'config-home'), ...extra };
}

/** How a process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A CLI process left running while the test goes on (a host, `serve`, a run to kill midway). */
export interface RunningCli {
  child: ChildProcess;
  /** What it wrote to stdout so far. */
  stdout(): string;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** Resolves once it exited (its streams may still be draining). */
  exited: Promise<Exit>;
  /** Resolves once it exited and its output was read to the end, with all of it. */
  ended: Promise<CliResult>;
  /**
   * Resolves with the first match of `pattern` in what it wrote (stdout and stderr, as they came);
   * rejects, with its output, when it exits first or after `timeoutMs`.
   */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
}

/**
 * Spawns `node bin/actorloop.js ...` as real processes and remembers the ones still running, so
 * a test that fails midway can kill them (`killAll` in afterEach/onTestFinished/afterAll).
 */
export class CliProcesses {
  private readonly live = new Set<ChildProcess>();

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  /** Runs the CLI to its end (SIGKILLed after `timeoutMs`, which fails the caller's asserts). */
  run(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<CliResult> {
    const started = performance.now();
    // from another directory (`--last` looks in the current one) the CLI is named by its full path
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'actorloop.js'), ...args], {
      cwd: opts.cwd ?? REPO_ROOT,
      env: opts.env ?? this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.live.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    return new Promise((resolve, reject) => {
      child.once('error', (err) => {
        clearTimeout(timer);
        this.live.delete(child);
        reject(err);
      });
      // 'close', not 'exit': it waits for stdout and stderr to be read to their end.
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        this.live.delete(child);
        resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
      });
    });
  }

  /**
   * Starts the CLI (or `command`, a whole command line of its own, such as `script` for a
   * pseudo-terminal) and returns at once; killed with the others by `killAll`.
   */
  start(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; command?: string[] } = {}): RunningCli {
    const started = performance.now();
    const [file, ...rest] = opts.command ?? [process.execPath, join(REPO_ROOT, 'bin', 'actorloop.js'), ...args];
    const child = spawn(file!, rest, { cwd: opts.cwd ?? REPO_ROOT, env: opts.env ?? this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.live.add(child);
    let stdout = '';
    let stderr = '';
    let both = '';
    let closed = false;
    const watchers = new Set<() => void>();
    const seen = (): void => watchers.forEach((w) => w());
    child.stdout!.setEncoding('utf8').on('data', (s: string) => ((stdout += s), (both += s), seen()));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => ((stderr += s), (both += s), seen()));
    const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const ended = new Promise<CliResult>((resolve) => {
      child.once('close', (code, signal) => {
        this.live.delete(child);
        closed = true;
        seen();
        resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
      });
    });
    const waitFor = (pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> =>
      new Promise((resolve, reject) => {
        const told = (why: string): Error => new Error(`${why} before its output matched ${pattern}: ${(opts.command ?? args).join(' ')}\n--- stderr\n${stderr}--- stdout (tail)\n${stdout.slice(-1500)}`);
        const done = (): void => {
          clearTimeout(timer);
          watchers.delete(check);
        };
        const check = (): void => {
          const m = pattern.exec(both);
          if (m) {
            done();
            resolve(m);
          } else if (closed) {
            // on 'close', not 'exit': what it wrote last may still be in the pipe at its exit
            done();
            reject(told(`it exited (code ${child.exitCode}, signal ${child.signalCode})`));
          }
        };
        const timer = setTimeout(() => (done(), reject(told(`timed out after ${timeoutMs} ms`))), timeoutMs);
        watchers.add(check);
        check();
      });
    return { child, stdout: () => stdout, stderr: () => stderr, exited, ended, waitFor };
  }

  /** SIGKILLs every child still running and waits for each to exit. */
  async killAll(): Promise<void> {
    const running = [...this.live];
    this.live.clear();
    await Promise.all(
      running.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
  }
}

/**
 * The CLI processes of one test file. Each test takes its own tracker, killed when that test
 * finishes, pass or fail (`onTestFinished`: an afterEach over shared state would kill the
 * children of concurrent tests too); `killAll` in afterAll kills whatever is left.
 */
export class CliPool {
  private readonly trackers: CliProcesses[] = [];

  /** A tracker for the running test, with `env` for its children. */
  forTest(ctx: { onTestFinished(fn: () => Promise<void>): void }, env: NodeJS.ProcessEnv): CliProcesses {
    const cli = new CliProcesses(env);
    this.trackers.push(cli);
    ctx.onTestFinished(() => cli.killAll());
    return cli;
  }

  /** A tracker for the whole file (a host started in beforeAll): its children are killed by `killAll`. */
  forFile(env: NodeJS.ProcessEnv): CliProcesses {
    const cli = new CliProcesses(env);
    this.trackers.push(cli);
    return cli;
  }

  /** SIGKILLs every child of every tracker still running. */
  async killAll(): Promise<void> {
    await Promise.all(this.trackers.map((t) => t.killAll()));
  }
}

/** Copies the demo workspace (a failing test and the buggy `src/slug.js`) to a fresh temp dir. */
export async function demoWorkspace(): Promise<string> {
  const ws = await tempDir('ws');
  await cp(join(REPO_ROOT, 'examples', 'demo', 'workspace'), ws, { recursive: true });
  return ws;
}

/** The lines of a stream: a complete stream ends in a newline, so there is no partial last line. */
export function lines(text: string): string[] {
  if (text === '') return [];
  if (!text.endsWith('\n')) throw new Error(`output does not end with a newline: ${JSON.stringify(text.slice(-200))}`);
  return text.slice(0, -1).split('\n');
}

/** Parses NDJSON events, each checked against the event schema; throws on any other line. */
export function parseEvents(stdout: string): ActorEvent[] {
  return lines(stdout).map((line, i) => {
    try {
      return EventSchema.parse(JSON.parse(line)) as ActorEvent;
    } catch (err) {
      throw new Error(`stdout line ${i + 1} is not an NDJSON event (${(err as Error).message}): ${line.slice(0, 200)}`);
    }
  });
}

/** One line of `runs --json`: a directory entry whose status is the log's, as every client reads it. */
export type RunsLine = Omit<DirectoryEntry, 'status'> & { status: z.infer<typeof ActorStatusSchema> };

/** Parses `runs --json` output: one directory entry a line. */
export function parseRuns(stdout: string): RunsLine[] {
  return lines(stdout).map((line) => DirectoryEntrySchema.extend({ status: ActorStatusSchema }).parse(JSON.parse(line)));
}

/** A result described for an assertion message. */
export function show(r: CliResult): string {
  return `code=${r.code} signal=${r.signal} (${Math.round(r.elapsedMs)} ms)\n--- stderr\n${r.stderr}--- stdout (tail)\n${r.stdout.slice(-1500)}`;
}
