import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import { join } from 'node:path';
import type { Violation } from '../../verify/verify.js';
import type { ActorEvent } from '../../protocol/events.js';
import {
  agentOf, exitViolation, readLog, startChild, tail, waitFor,
  type ChaosContext, type Child, type Driven, type Exited, type ProcessRecord, type Scenario,
} from './child.js';
import { MODES } from './modes.js';
import { PersonActs } from './person.js';
import { faultSpecFor } from './plan.js';
import { childViolations, readTreeLogs } from './tree.js';

/**
 * The lease TTL of a session's hosts: a killed host's agent moves to another after this long. A
 * host renews every third of it, so a live host loses its agent only after a stall of two thirds:
 * at 2 s, a loaded 2-core CI machine (browsers and other hosts beside it) once let a host's
 * agent move before the kill it carried could fire.
 */
export const CHAOS_HOST_LEASE_TTL_MS = 4_000;
/**
 * How long a host may take to start, or to drain when it is stopped, before it is killed. A start
 * is a node process, the bus's streams and buckets made sure of, and the first lease pass: on a
 * loaded 2-core machine (CI with browsers beside it) one took over 20 s once.
 */
const HOST_START_MS = 60_000;
const HOST_STOP_MS = 10_000;
/** How long host 1 has to take the agent before the other hosts start anyway. */
const CLAIM_WAIT_MS = 15_000;
/** Host restarts and followers past this many: the run is going nowhere. */
const MAX_STARTS = 12;
/**
 * How long the hosts are left running after the root's turn ended while a child of the tree still
 * owes its notice or has a turn open: a child whose host died owing it is taken over once its
 * lease lapses, and sends it again (the parent took it already and dedupes it).
 */
const TREE_SETTLE_MS = 5 * CHAOS_HOST_LEASE_TTL_MS + 5_000;

/**
 * Waits (bounded) until no child of the tree owes its notice or has a turn open: what the
 * checks after the run look for, which the hosts are still carrying out when the root's turn ends.
 */
async function treeSettled(ctx: ChaosContext, rootId: string): Promise<void> {
  const until = Date.now() + TREE_SETTLE_MS;
  while (Date.now() < until && !ctx.signal.aborted) {
    const logs = await readTreeLogs(ctx, rootId).catch(() => null);
    if (logs === null || logs.size <= 1) return;
    if (!childViolations(logs, rootId).some((v) => v.code === 'chaos.notice_owed' || v.code === 'chaos.child_turn_open')) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** One running host of a run: its slot (1..K), the planned fault it carries (an index), its process. */
interface FleetHost {
  slot: number;
  name: string;
  armed: number | null;
  fault: string | null;
  child: Child;
}

/** What a host is started with: the planned fault it carries and its spec, or none. */
interface Arming {
  armed: number | null;
  fault: string | null;
}

/** The K `actorloop host` processes of one run, each with a data dir (an LMDB) of its own. */
class HostFleet {
  private readonly running = new Map<number, FleetHost>();
  private readonly generations = new Map<number, number>();
  /** Hosts started, restarts included. */
  starts = 0;

  constructor(
    private readonly ctx: ChaosContext,
    private readonly dataRoot: string,
    private readonly processes: ProcessRecord[],
  ) {}

  /**
   * Starts the host of `slot` (a new name each time: a restarted host is a new holder, so it
   * takes nothing over before the lease of its dead self lapses).
   */
  start(slot: number, arming: Arming): FleetHost {
    const generation = (this.generations.get(slot) ?? 0) + 1;
    this.generations.set(slot, generation);
    this.starts += 1;
    const name = `${this.dataRoot.slice(-6)}-h${slot}${generation > 1 ? `.${generation}` : ''}`;
    const child = startChild(this.ctx, [
      'host', '--name', name, '--lease-ttl', String(CHAOS_HOST_LEASE_TTL_MS),
      '--nats', this.ctx.natsUrl, '--data-dir', join(this.dataRoot, name),
      ...(arming.fault ? ['--fault', arming.fault] : []),
    ], null);
    const host: FleetHost = { slot, name, ...arming, child };
    this.running.set(slot, host);
    return host;
  }

  /** Waits until a host announced itself (it takes work from then on); false when it did not come up. */
  ready(host: FleetHost): Promise<boolean> {
    return waitFor(() => host.child.stderr().includes('hosting agents'), host.child.exited, HOST_START_MS, this.ctx.signal);
  }

  /** Hosts running now. */
  live(): FleetHost[] {
    return [...this.running.values()];
  }

  /** The first host to exit, with how it ended. */
  nextExit(): Promise<{ kind: 'host'; host: FleetHost; r: Exited }> {
    return Promise.race(this.live().map((host) => host.child.exited.then((r) => ({ kind: 'host' as const, host, r }))));
  }

  /** Notes that a host exited: it leaves the fleet and joins the run's processes. */
  exited(host: FleetHost, r: Exited): void {
    if (this.running.get(host.slot) !== host) return;
    this.running.delete(host.slot);
    const killedByFault = r.signal === 'SIGKILL' && !r.stoppedHere && host.armed !== null;
    this.processes.push({ command: 'host', name: host.name, fault: host.fault, code: r.code, signal: r.signal, killedByFault, ms: r.ms });
  }

  /** Stops a host (SIGTERM: it drains) and starts its slot again with `arming`. */
  async restart(host: FleetHost, arming: Arming): Promise<void> {
    this.exited(host, await host.child.stop(HOST_STOP_MS));
    this.start(host.slot, arming);
  }

  /** Stops every host still running (SIGTERM, then SIGKILL after a grace). */
  async stopAll(): Promise<void> {
    await Promise.all(this.live().map(async (h) => this.exited(h, await h.child.stop(HOST_STOP_MS))));
  }
}

/**
 * Drives one run over K `actorloop host` processes (`--hosts K`): host 1 starts alone, carrying
 * the first planned kill, and `run` hands the agent to it (the only live host) and follows it; the
 * other hosts start once it holds the agent, carrying the kill due after that one. When a host
 * dies at its fault, the survivors take the agent over after the lease TTL, the dead one is
 * started again, and every host is made to carry the kill due next (a survivor still carrying one
 * that fired is restarted, or it would fire again). A person's acts are done as `drive` does them
 * (`PersonActs`): a wait the follower stops at (exit 5) is answered with `approve` or `answer`,
 * which follow too, a steer is sent at the first, an interrupt once the first model call is
 * open; each reaches the agent on its host as mail. Every host and follower is stopped at the end.
 */
export async function driveWithHosts(ctx: ChaosContext, s: Scenario, workspace: string): Promise<Driven> {
  const processes: ProcessRecord[] = [];
  const violations: Violation[] = [];
  await mkdir(ctx.dataDir, { recursive: true });
  const dataRoot = await mkdtemp(join(ctx.dataDir, 'chaos-hosts-'));
  const fleet = new HostFleet(ctx, dataRoot, processes);
  const acts = new PersonActs(ctx, s.mode, processes, violations);
  let agentId: string | null = null;
  let firstKillAt: number | null = null;
  /** The planned kill that fires next (an index into `s.faults`). */
  let due = 0;
  let follower: Child | null = null;
  const logSoFar = async (): Promise<ActorEvent[]> => (agentId ? await readLog(ctx, agentId).catch(() => []) : []);
  const arm = async (index: number): Promise<Arming> => {
    const planned = s.faults[index];
    const spec = planned ? faultSpecFor(planned, await logSoFar()) : null;
    if (!spec) return { armed: null, fault: null };
    // scoped to the run's agent once it is known: a host counts only that agent's points
    return { armed: index, fault: agentId ? spec.replace('@', `:${agentId}@`) : spec };
  };
  try {
    const first = fleet.start(1, await arm(0));
    if (!(await fleet.ready(first))) {
      violations.push({ code: 'chaos.host_not_started', seq: null, message: `host ${first.name} did not start: ${tail(first.child.stderr())}` });
      return { agentId, processes, violations, firstKillAt, refusals: 0 };
    }
    let command: ProcessRecord['command'] = 'run';
    const run = startChild(ctx, ['run', s.task, '--model', `scripted:${s.scriptPath}`, '--approve', MODES[s.mode].approve, '--cwd', workspace, ...(MODES[s.mode].runArgs ?? []), ...(MODES[s.mode].goal ? ['--goal', s.task] : []), '--json', ...ctx.common], ctx.childTimeoutMs);
    follower = run;
    await waitFor(() => / to host \S+; following/.test(run.stderr()), run.exited, CLAIM_WAIT_MS, ctx.signal);
    agentId = agentOf(run.stderr());
    const rest = await arm(1);
    for (let slot = 2; slot <= ctx.hosts && !ctx.signal.aborted; slot++) fleet.start(slot, rest);
    await acts.interruptWhenOpen(run);
    for (;;) {
      if (ctx.signal.aborted) break;
      const current: Child = follower;
      const ev = await Promise.race([current.exited.then((r) => ({ kind: 'follower' as const, r })), fleet.nextExit()]);
      if (ev.kind === 'host') {
        const { host, r } = ev;
        fleet.exited(host, r);
        if (ctx.signal.aborted) break;
        if (r.signal === 'SIGKILL' && !r.stoppedHere && host.armed !== null) {
          firstKillAt ??= r.exitedAt;
          due = host.armed + 1;
        } else {
          violations.push({ code: 'chaos.host_exited', seq: null, message: `host ${host.name} exited (${r.code ?? r.signal}) with no fault firing: ${tail(r.stderr)}` });
        }
        if (fleet.starts >= MAX_STARTS + ctx.hosts) {
          violations.push({ code: 'chaos.no_progress', seq: null, message: `the turn did not end within ${fleet.starts} host starts` });
          break;
        }
        const next = await arm(due);
        for (const h of fleet.live()) if (h.armed !== null && h.armed < due) await fleet.restart(h, next);
        fleet.start(host.slot, next);
        continue;
      }
      const r = ev.r;
      processes.push({ command, fault: null, code: r.code, signal: r.signal, killedByFault: false, ms: r.ms });
      agentId ??= agentOf(r.stderr);
      const stop = exitViolation(ctx, command, r, agentId);
      if (stop !== null || agentId === null) {
        if (stop) violations.push(stop);
        break;
      }
      if (r.code === EXIT.waiting && processes.length < MAX_STARTS + ctx.hosts) {
        const then = await acts.atWait(agentId, await logSoFar());
        if (then.kind === 'failed') break;
        if (then.kind === 'next') {
          command = then.args[0] as ProcessRecord['command'];
          follower = startChild(ctx, [...then.args, '--json', ...ctx.common], ctx.childTimeoutMs);
          continue;
        }
      }
      const expected = exitCodeFor(MODES[s.mode].outcome);
      if (r.code !== expected && !ctx.signal.aborted) {
        violations.push({ code: 'chaos.turn_not_completed', seq: null, message: `${command} exited ${r.code ?? r.signal} (expected ${expected}): ${tail(r.stderr)}` });
      }
      break;
    }
  } finally {
    // before the hosts stop: the interrupt follows the turn to its end
    await acts.finish();
    await follower?.stop(0);
    // and a child whose host died owing its notice is taken over and sends it
    if (agentId !== null) await treeSettled(ctx, agentId);
    await fleet.stopAll();
    await rm(dataRoot, { recursive: true, force: true });
  }
  for (const f of s.faults.slice(due)) {
    violations.push({ code: 'chaos.fault_not_reached', seq: null, message: `${f.point}@${f.nth} never fired: the scenario reaches that point fewer times` });
  }
  return { agentId, processes, violations, firstKillAt, refusals: 0 };
}
