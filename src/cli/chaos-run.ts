import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyLog, type Violation } from '../actors/verify.js';
import type { ActorDirectory } from '../bus/directory.js';
import { EventSchema, type ActorEvent } from '../protocol/events.js';
import type { LogReader } from '../store/log-port.js';
import { checkEffects, effectLines, EFFECT_FILE } from './chaos-effects.js';
import { faultSpecFor, type ChaosMode, type PlannedFault } from './chaos-plan.js';

/** What every run of a chaos session shares: how to start the CLI, and where to read logs. */
export interface ChaosContext {
  /** The CLI's entry script (`bin/actorloop.js`), run with this process's node. */
  cliEntry: string;
  /** `--data-dir` and `--nats` of the session: every child shares its one nats-server. */
  common: string[];
  env: NodeJS.ProcessEnv;
  reader: LogReader;
  directory: ActorDirectory;
  /** Aborting kills the child that is running and ends the run. */
  signal: AbortSignal;
  /** A child still running after this long is SIGKILLed and the run fails. */
  childTimeoutMs: number;
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
  command: 'run' | 'resume' | 'approve';
  fault: string | null;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It SIGKILLed itself at its fault (not killed by the chaos command for taking too long). */
  killedByFault: boolean;
  ms: number;
}

/** How a run went: its processes, the log and effect file it left, and what broke. */
export interface ScenarioResult {
  agentId: string | null;
  workspace: string;
  processes: ProcessRecord[];
  kills: number;
  /** Times a command refused to start after a kill and was tried again (a lease still held). */
  refusals: number;
  /** From the first kill (the killed process seen dead) to the `turn/end` commit; null without a kill. */
  recoveredInMs: number | null;
  elapsedMs: number;
  events: ActorEvent[];
  effectLines: string[];
  violations: Violation[];
  /** Ctrl-C stopped it midway: nothing was checked, so it neither passed nor failed. */
  interrupted: boolean;
}

/** A run that needs more processes than this is going nowhere (each kill or approval adds one). */
const MAX_PROCESSES = 12;
/**
 * How long a command may keep refusing to start after a kill (exit 2, nothing committed): the
 * killed process may hold the agent's lease until it lapses, and `resume` refuses meanwhile.
 */
const REFUSED_FOR_MS = 30_000;
const REFUSED_RETRY_MS = 1_000;
const AGENT_LINE = /^agt_[0-9A-HJKMNP-TV-Z]{26}$/;

interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  exitedAt: number;
  ms: number;
  timedOut: boolean;
}

function spawnCli(ctx: ChaosContext, args: string[]): Promise<Exited> {
  const started = Date.now();
  const child = spawn(process.execPath, [ctx.cliEntry, ...args, ...ctx.common], { env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let timedOut = false;
  let exitedAt = 0;
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  // the kill time is when it died, not when its pipes were read to the end
  child.once('exit', () => (exitedAt = Date.now()));
  const kill = (): void => {
    child.kill('SIGKILL');
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, ctx.childTimeoutMs);
  ctx.signal.addEventListener('abort', kill, { once: true });
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', kill);
    };
    child.once('error', (err) => {
      done();
      reject(err);
    });
    child.once('close', (code, signal) => {
      done();
      exitedAt ||= Date.now();
      resolve({ code, signal, stdout, stderr, exitedAt, ms: exitedAt - started, timedOut });
    });
  });
}

/** NDJSON events a child printed; a line that is not one (there should be none) is skipped. */
function printedEvents(stdout: string): ActorEvent[] {
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function pendingApprovals(log: readonly ActorEvent[]): string[] {
  const answered = new Set(log.flatMap((e) => (e.type === 'approval/granted' || e.type === 'approval/denied' ? [e.data.approvalId] : [])));
  return log.flatMap((e) => (e.type === 'approval/requested' && !answered.has(e.data.approvalId) ? [e.data.approvalId] : []));
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ').slice(0, 400) || '(nothing on stderr)';
}

/**
 * Drives one run: `run` with the first kill, then `resume` after every kill and `approve` for
 * every approval asked, each with the next kill still due, until a process ends the turn.
 */
async function drive(ctx: ChaosContext, s: Scenario, workspace: string) {
  const processes: ProcessRecord[] = [];
  const violations: Violation[] = [];
  const log: ActorEvent[] = [];
  const due = [...s.faults];
  const missed: PlannedFault[] = [];
  let agentId: string | null = null;
  let firstKillAt: number | null = null;
  let lastKillAt: number | null = null;
  let refusals = 0;
  let next: string[] = ['run', s.task, '--model', `scripted:${s.scriptPath}`, '--approve', s.mode, '--cwd', workspace];
  for (;;) {
    if (ctx.signal.aborted) break;
    if (processes.length >= MAX_PROCESSES) {
      violations.push({ code: 'chaos.no_progress', seq: null, message: `the turn did not end within ${MAX_PROCESSES} processes` });
      break;
    }
    let fault: string | null = null;
    while (due[0] && (fault = faultSpecFor(due[0], log)) === null) missed.push(due.shift()!);
    const command = next[0] as ProcessRecord['command'];
    const r = await spawnCli(ctx, [...next, '--json', ...(fault ? ['--fault', fault] : [])]);
    const printed = printedEvents(r.stdout);
    if (command !== 'run' && r.code === 2 && printed.length === 0 && lastKillAt !== null && r.exitedAt - lastKillAt < REFUSED_FOR_MS) {
      // refused, not failed: try the same command again once the dead process lets go
      refusals += 1;
      await sleep(REFUSED_RETRY_MS, ctx.signal);
      continue;
    }
    const killedByFault = r.signal === 'SIGKILL' && !r.timedOut && !ctx.signal.aborted;
    processes.push({ command, fault, code: r.code, signal: r.signal, killedByFault, ms: r.ms });
    log.push(...printed);
    agentId ??= r.stderr.split('\n').find((l) => AGENT_LINE.test(l)) ?? null;
    if (r.timedOut) {
      violations.push({ code: 'chaos.process_timeout', seq: null, message: `${command} ran longer than ${ctx.childTimeoutMs} ms and was killed: ${tail(r.stderr)}` });
      break;
    }
    if (agentId === null) {
      violations.push({ code: 'chaos.no_agent', seq: null, message: `${command} exited (${r.code ?? r.signal}) without printing an agent ID: ${tail(r.stderr)}` });
      break;
    }
    if (killedByFault) {
      firstKillAt ??= r.exitedAt;
      lastKillAt = r.exitedAt;
      if (fault) due.shift();
      next = ['resume', agentId];
      continue;
    }
    const approval = r.code === 4 ? pendingApprovals(log)[0] : undefined;
    if (approval) {
      next = ['approve', agentId, approval];
      continue;
    }
    if (r.code !== 0 && !ctx.signal.aborted) {
      violations.push({ code: 'chaos.turn_not_completed', seq: null, message: `${command} exited ${r.code ?? r.signal}: ${tail(r.stderr)}` });
    }
    break;
  }
  for (const f of [...missed, ...due]) {
    violations.push({ code: 'chaos.fault_not_reached', seq: null, message: `${f.point}@${f.nth} never fired: the scenario reaches that point fewer times` });
  }
  return { agentId, processes, violations, firstKillAt, refusals };
}

async function readLog(ctx: ChaosContext, agentId: string): Promise<ActorEvent[]> {
  const entry = await ctx.directory.get(agentId);
  const events: ActorEvent[] = [];
  for await (const { event } of ctx.reader.read(entry?.rootId ?? agentId, agentId, { afterSeq: 0 })) events.push(event);
  return events;
}

/**
 * One run of the scenario in a fresh workspace, driven to the end of its turn through kills,
 * resumes and approvals; then its log (read from JetStream, as `actorloop verify` reads it) is
 * checked against every invariant with the log taken as finished, the turn must have completed,
 * and the effect file must agree with the log (`checkEffects`).
 */
export async function runScenario(ctx: ChaosContext, s: Scenario): Promise<ScenarioResult> {
  const started = Date.now();
  const workspace = await mkdtemp(join(tmpdir(), 'actorloop-chaos-'));
  if (s.template) await cp(s.template, workspace, { recursive: true });
  const driven = await drive(ctx, s, workspace);
  const violations = [...driven.violations];
  let events: ActorEvent[] = [];
  let recoveredInMs: number | null = null;
  if (driven.agentId !== null && !ctx.signal.aborted) {
    try {
      events = await readLog(ctx, driven.agentId);
    } catch (err) {
      violations.push({ code: 'chaos.log_unreadable', seq: null, message: `the log of ${driven.agentId} cannot be read: ${(err as Error).message}` });
    }
    // the log is finished: no process will append to it, so whatever is still open is a violation
    violations.push(...verifyLog(events, { complete: true }));
    const end = events.findLast((e) => e.type === 'turn/end');
    const reported = violations.some((v) => v.code === 'chaos.turn_not_completed');
    if (end?.type !== 'turn/end' && !reported) {
      violations.push({ code: 'chaos.turn_not_completed', seq: null, message: 'the log has no turn/end' });
    } else if (end?.type === 'turn/end' && end.data.outcome !== 'completed' && !reported) {
      violations.push({ code: 'chaos.turn_not_completed', seq: end.seq, message: `the turn ended ${end.data.outcome}${end.data.reason ? ` (${end.data.reason})` : ''}` });
    }
    if (end && driven.firstKillAt !== null) recoveredInMs = Math.max(0, Date.parse(end.at) - driven.firstKillAt);
  }
  const text = await readFile(join(workspace, EFFECT_FILE), 'utf8').catch(() => null);
  const interrupted = ctx.signal.aborted;
  if (!interrupted) violations.push(...checkEffects(text, events, s.expectedLines));
  return {
    agentId: driven.agentId,
    workspace,
    processes: driven.processes,
    kills: driven.processes.filter((p) => p.killedByFault).length,
    refusals: driven.refusals,
    recoveredInMs,
    elapsedMs: Date.now() - started,
    events,
    effectLines: effectLines(text),
    violations: interrupted ? [] : violations,
    interrupted,
  };
}
