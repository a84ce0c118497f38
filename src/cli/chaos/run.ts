import { cp, mkdtemp, readFile } from 'node:fs/promises';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyLog, type Violation } from '../../verify/verify.js';
import type { ActorEvent } from '../../protocol/events.js';
import {
  agentOf, exitViolation, printedEvents, readLog, startChild, tail,
  type ChaosContext, type Driven, type ProcessRecord, type Scenario,
} from './child.js';
import { checkEffects, effectLines, EFFECT_FILE } from './effects.js';
import { driveWithHosts } from './hosts.js';
import { MODES } from './modes.js';
import { PersonActs } from './person.js';
import { faultSpecFor, type PlannedFault } from './plan.js';
import { childViolations, readTreeLogs, treeEvents } from './tree.js';
import { sleep } from '../../protocol/sleep.js';

export type { ChaosContext, ProcessRecord, Scenario } from './child.js';

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
  /** Every log of the agent's tree, log after log (the root's alone when it spawned none): what the points are counted over. */
  treeEvents: ActorEvent[];
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

/**
 * Drives one run: `run` with the first kill, then `resume` after every kill, `approve` for every
 * approval asked and `answer` for every question, each with the next kill still due, until a
 * process ends the turn. A mode's other acts of a person happen on the way (`PersonActs`): a
 * `steer` run sends its steer at the first wait (before approving), an `interrupt` run starts
 * `actorloop interrupt` once the first process's model call is open and waits for it at the end.
 */
async function drive(ctx: ChaosContext, s: Scenario, workspace: string): Promise<Driven> {
  const processes: ProcessRecord[] = [];
  const violations: Violation[] = [];
  const log: ActorEvent[] = [];
  // what the processes so far committed, over the whole tree: one process counts a point over every agent it hosts
  let counted: ActorEvent[] = [];
  const due = [...s.faults];
  const missed: PlannedFault[] = [];
  const mode = MODES[s.mode];
  let agentId: string | null = null;
  let firstKillAt: number | null = null;
  let lastKillAt: number | null = null;
  let refusals = 0;
  const acts = new PersonActs(ctx, s.mode, processes, violations);
  let next: string[] = ['run', s.task, '--model', `scripted:${s.scriptPath}`, '--approve', mode.approve, '--cwd', workspace, ...(mode.runArgs ?? []), ...(mode.goal ? ['--goal', s.task] : [])];
  for (;;) {
    if (ctx.signal.aborted) break;
    if (processes.length >= MAX_PROCESSES) {
      violations.push({ code: 'chaos.no_progress', seq: null, message: `the turn did not end within ${MAX_PROCESSES} processes` });
      break;
    }
    let fault: string | null = null;
    while (due[0] && (fault = faultSpecFor(due[0], counted)) === null) missed.push(due.shift()!);
    const command = next[0] as ProcessRecord['command'];
    // --in-process: each process hosts the agent itself, even if a host shares the server
    const child = startChild(ctx, [...next, '--json', '--in-process', ...(fault ? ['--fault', fault] : []), ...ctx.common], ctx.childTimeoutMs);
    await acts.interruptWhenOpen(child);
    const r = await child.exited;
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
    agentId ??= agentOf(r.stderr);
    if (agentId !== null) {
      const id = agentId;
      // unreadable (the server busy): the root's printed commits count, as they did before trees
      counted = treeEvents(await readTreeLogs(ctx, id).catch(() => new Map([[id, log]])));
    }
    const stop = exitViolation(ctx, command, r, agentId);
    if (stop !== null || agentId === null) {
      if (stop) violations.push(stop);
      break;
    }
    if (killedByFault) {
      firstKillAt ??= r.exitedAt;
      lastKillAt = r.exitedAt;
      if (fault) due.shift();
      next = ['resume', agentId];
      continue;
    }
    if (r.code === EXIT.waiting) {
      const then = await acts.atWait(agentId, log);
      if (then.kind === 'failed') break;
      if (then.kind === 'next') {
        next = then.args;
        continue;
      }
    }
    const expected = exitCodeFor(mode.outcome);
    if (r.code !== expected && !ctx.signal.aborted) {
      violations.push({ code: 'chaos.turn_not_completed', seq: null, message: `${command} exited ${r.code ?? r.signal} (expected ${expected}): ${tail(r.stderr)}` });
    }
    break;
  }
  await acts.finish();
  for (const f of [...missed, ...due]) {
    violations.push({ code: 'chaos.fault_not_reached', seq: null, message: `${f.point}@${f.nth} never fired: the scenario reaches that point fewer times` });
  }
  return { agentId, processes, violations, firstKillAt, refusals };
}

/**
 * One run of the scenario in a fresh workspace, driven to the end of its turn through kills,
 * resumes and approvals; then its log (read from JetStream, as `actorloop verify` reads it) is
 * checked against every invariant with the log taken as finished, the turn must have ended as its
 * mode says (completed; cancelled for `interrupt`), and the effect file must agree with the log (`checkEffects`).
 */
export async function runScenario(ctx: ChaosContext, s: Scenario): Promise<ScenarioResult> {
  const started = Date.now();
  const workspace = await mkdtemp(join(tmpdir(), 'actorloop-chaos-'));
  if (s.template) await cp(s.template, workspace, { recursive: true });
  const driven = ctx.hosts > 1 ? await driveWithHosts(ctx, s, workspace) : await drive(ctx, s, workspace);
  const violations = [...driven.violations];
  let events: ActorEvent[] = [];
  let tree: ActorEvent[] = [];
  let recoveredInMs: number | null = null;
  if (driven.agentId !== null && !ctx.signal.aborted) {
    try {
      events = await readLog(ctx, driven.agentId);
      const logs = await readTreeLogs(ctx, driven.agentId);
      tree = treeEvents(logs);
      violations.push(...childViolations(logs, driven.agentId));
    } catch (err) {
      violations.push({ code: 'chaos.log_unreadable', seq: null, message: `the log of ${driven.agentId} cannot be read: ${(err as Error).message}` });
    }
    // the log is finished: no process will append to it, so whatever is still open is a violation
    violations.push(...verifyLog(events, { complete: true }));
    const end = events.findLast((e) => e.type === 'turn/end');
    const reported = violations.some((v) => v.code === 'chaos.turn_not_completed');
    if (end?.type !== 'turn/end' && !reported) {
      violations.push({ code: 'chaos.turn_not_completed', seq: null, message: 'the log has no turn/end' });
    } else if (end?.type === 'turn/end' && end.data.outcome !== MODES[s.mode].outcome && !reported) {
      violations.push({ code: 'chaos.turn_not_completed', seq: end.seq, message: `the turn ended ${end.data.outcome}${end.data.reason ? ` (${end.data.reason})` : ''}` });
    }
    if (end && driven.firstKillAt !== null) recoveredInMs = Math.max(0, Date.parse(end.at) - driven.firstKillAt);
  }
  const text = await readFile(join(workspace, EFFECT_FILE), 'utf8').catch(() => null);
  const interrupted = ctx.signal.aborted;
  // a child's calls write effects too: the file is checked against every log of the tree
  if (!interrupted) violations.push(...checkEffects(text, tree.length > 0 ? tree : events, s.expectedLines));
  return {
    agentId: driven.agentId,
    workspace,
    processes: driven.processes,
    kills: driven.processes.filter((p) => p.killedByFault).length,
    refusals: driven.refusals,
    recoveredInMs,
    elapsedMs: Date.now() - started,
    events,
    treeEvents: tree.length > 0 ? tree : events,
    effectLines: effectLines(text),
    violations: interrupted ? [] : violations,
    interrupted,
  };
}
