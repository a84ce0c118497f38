import { spawn, type ChildProcess } from 'node:child_process';
import type { ActorDirectory } from '../../bus/directory.js';
import { EventSchema, type ActorEvent } from '../../protocol/events.js';
import type { LogReader } from '../../store/log-port.js';
import type { Violation } from '../../verify/verify.js';
import type { ChaosMode } from './modes.js';
import type { PlannedFault } from './plan.js';
import { sleep } from '../../protocol/sleep.js';

/** What every run of a chaos session shares: how to start the CLI, and where to read logs. */
export interface ChaosContext {
  /** The CLI's entry script (`bin/actorloop.js`), run with this process's node. */
  cliEntry: string;
  /** `--data-dir` and `--nats` of the session: every child shares its one nats-server. */
  common: string[];
  /** The session's nats-server, for host processes (each with a data dir of its own). */
  natsUrl: string;
  /** The session's data dir: host processes keep theirs under it, for the run. */
  dataDir: string;
  env: NodeJS.ProcessEnv;
  reader: LogReader;
  directory: ActorDirectory;
  /** Aborting kills every child that is running and ends the run. */
  signal: AbortSignal;
  /** A child still running after this long is SIGKILLed and the run fails. */
  childTimeoutMs: number;
  /** `actorloop host` processes a run is spread over; 1: none, each `run`/`resume` hosts the agent. */
  hosts: number;
}

/** One run of the scenario to drive. */
export interface Scenario {
  /** Absolute path of the script (`--model scripted:<file>`). */
  scriptPath: string;
  /** A directory copied into the fresh workspace, or null for an empty one. */
  template: string | null;
  task: string;
  mode: ChaosMode;
  /** Kills in the order they must fire; empty for a clean (baseline) run. */
  faults: PlannedFault[];
  /** The effect lines a clean run wrote, to catch effects a successful call lost. */
  expectedLines: string[];
}

/** One CLI process of a run. */
export interface ProcessRecord {
  /** `send`, `interrupt` and `compact` are a person's acts the driver does mid-run (modes `steer`, `interrupt`, `compact`). */
  command: 'run' | 'resume' | 'approve' | 'answer' | 'send' | 'interrupt' | 'compact' | 'host';
  /** A host's name (`--hosts` > 1). */
  name?: string;
  fault: string | null;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It SIGKILLed itself at its fault (not killed by the chaos command for taking too long). */
  killedByFault: boolean;
  ms: number;
}

/** How driving a run went, before its log and effects are checked. */
export interface Driven {
  agentId: string | null;
  processes: ProcessRecord[];
  violations: Violation[];
  /** When the first process killed at its fault was seen dead; null without a kill. */
  firstKillAt: number | null;
  refusals: number;
}

/** How a child process ended, with everything it wrote. */
export interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  exitedAt: number;
  ms: number;
  timedOut: boolean;
  /** The chaos command stopped it (end of run, Ctrl-C), so a SIGKILL is not a fault firing. */
  stoppedHere: boolean;
}

/** A CLI child that is running: what it wrote so far, its end, and how to stop it. */
export interface Child {
  process: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<Exited>;
  /** SIGTERM (a host drains), then SIGKILL after `graceMs`; resolves when it exited. */
  stop(graceMs: number): Promise<Exited>;
}

/** Starts `node <cli> ...args`; killed after `timeoutMs` (null: never) and when the session aborts. */
export function startChild(ctx: ChaosContext, args: string[], timeoutMs: number | null): Child {
  const started = Date.now();
  const child = spawn(process.execPath, [ctx.cliEntry, ...args], { env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let timedOut = false;
  let stoppedHere = false;
  let exitedAt = 0;
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  // the kill time is when it died, not when its pipes were read to the end
  child.once('exit', () => (exitedAt = Date.now()));
  const kill = (): void => {
    stoppedHere = true;
    child.kill('SIGKILL');
  };
  const timer = timeoutMs === null ? null : setTimeout(() => {
    timedOut = true;
    kill();
  }, timeoutMs);
  ctx.signal.addEventListener('abort', kill, { once: true });
  const exited = new Promise<Exited>((resolve, reject) => {
    const done = (): void => {
      if (timer) clearTimeout(timer);
      ctx.signal.removeEventListener('abort', kill);
    };
    child.once('error', (err) => {
      done();
      reject(err);
    });
    child.once('close', (code, signal) => {
      done();
      exitedAt ||= Date.now();
      resolve({ code, signal, stdout, stderr, exitedAt, ms: exitedAt - started, timedOut, stoppedHere });
    });
  });
  return {
    process: child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    stop(graceMs) {
      if (child.exitCode === null && child.signalCode === null) {
        stoppedHere = true;
        child.kill('SIGTERM');
        const force = setTimeout(kill, graceMs);
        void exited.finally(() => clearTimeout(force));
      }
      return exited;
    },
  };
}

/** Runs one CLI command with the session's `--data-dir` and `--nats` to its end. */
export function spawnCli(ctx: ChaosContext, args: string[]): Promise<Exited> {
  return startChild(ctx, [...args, ...ctx.common], ctx.childTimeoutMs).exited;
}

/** NDJSON events a child printed; a line that is not one (there should be none) is skipped. */
export function printedEvents(stdout: string): ActorEvent[] {
  const out: ActorEvent[] = [];
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const parsed = EventSchema.safeParse(JSON.parse(line));
      if (parsed.success) out.push(parsed.data as ActorEvent);
    } catch {
      // not JSON: nothing of the log
    }
  }
  return out;
}


/** Approvals asked for in `log` and not answered yet, in the order they were asked. */
export function pendingApprovals(log: readonly ActorEvent[]): string[] {
  const answered = new Set(log.flatMap((e) => (e.type === 'approval/granted' || e.type === 'approval/denied' ? [e.data.approvalId] : [])));
  return log.flatMap((e) => (e.type === 'approval/requested' && !answered.has(e.data.approvalId) ? [e.data.approvalId] : []));
}

/** Questions asked in `log` and not answered yet, in the order they were asked. */
export function pendingQuestions(log: readonly ActorEvent[]): string[] {
  const answered = new Set(log.flatMap((e) => (e.type === 'ask/answered' ? [e.data.questionId] : [])));
  return log.flatMap((e) => (e.type === 'ask/asked' && !answered.has(e.data.questionId) ? [e.data.questionId] : []));
}

/** Polls `check` until it holds; false when `exited` settles, `timeoutMs` passes or the session aborts first. */
export async function waitFor(check: () => boolean, exited: Promise<unknown>, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  let over = false;
  void exited.then(() => (over = true), () => (over = true));
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (over || signal.aborted || Date.now() > end) return check();
    await sleep(50, signal);
  }
  return true;
}

/** The last lines of a child's stderr, for a violation message. */
export function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ').slice(0, 400) || '(nothing on stderr)';
}

/** An agent ID as `run` prints it on a line of its own. */
export const AGENT_LINE = /^agt_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The agent a child printed the ID of (its first such line), or null. */
export function agentOf(stderr: string): string | null {
  return stderr.split('\n').find((l) => AGENT_LINE.test(l)) ?? null;
}

/** The whole log of an agent, as `actorloop verify` reads it. */
export async function readLog(ctx: ChaosContext, agentId: string): Promise<ActorEvent[]> {
  const entry = await ctx.directory.get(agentId);
  const events: ActorEvent[] = [];
  for await (const { event } of ctx.reader.read(entry?.rootId ?? agentId, agentId, { afterSeq: 0 })) events.push(event);
  return events;
}

/** Why a child's end stops the run (it hung, or never named its agent), or null when it does not. */
export function exitViolation(ctx: ChaosContext, command: string, r: Exited, agentId: string | null): Violation | null {
  if (r.timedOut) {
    return { code: 'chaos.process_timeout', seq: null, message: `${command} ran longer than ${ctx.childTimeoutMs} ms and was killed: ${tail(r.stderr)}` };
  }
  if (agentId === null) {
    return { code: 'chaos.no_agent', seq: null, message: `${command} exited (${r.code ?? r.signal}) without printing an agent ID: ${tail(r.stderr)}` };
  }
  return null;
}
