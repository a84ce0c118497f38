import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { pino, type Logger } from 'pino';
import { openBus, type Bus } from '../src/bus/connection.js';
import { publishInbox } from '../src/bus/inbox.js';
import { createKvLeaseStore } from '../src/bus/leases.js';
import { startNatsServer } from '../src/bus/nats-server.js';
import { BUCKETS } from '../src/bus/subjects.js';
import type { ScriptResponse } from '../src/model/script.js';
import { newId } from '../src/protocol/ids.js';
import { Cleanup, pool, tempDir } from './harness.js';
import { cpuMsOf, HostProcess, type HostEvent } from './host-process.js';

/** What host A holds when it is killed: agents parked on an approval, or agents inside a model call. */
export type TakeoverKind = 'idle' | 'mid-turn';

/** One takeover: N agents on host A, A SIGKILLed, B takes them over. */
export interface TakeoverSpec {
  kind: TakeoverKind;
  agents: number;
  leaseTtlMs: number;
  /** `shared`: B opens A's data dir (A's LMDB snapshots and blobs); `own`: an empty one (log only). */
  bDir: 'shared' | 'own';
}

/** What one takeover measured; times in ms from the SIGKILL of A (host clocks, same machine). */
export interface TakeoverRun extends TakeoverSpec {
  /** Agents A had claimed, parked and held a live lease on just before the kill. */
  heldByA: number;
  /** Agents B hosted before A was killed (it raced A for them): 0 in a valid run. */
  claimedEarly: number;
  /** Mid-turn: agents with an attempt open at the kill, and turns that had already ended. */
  openAtKill: number;
  endedAtKill: number;
  /** Agents running on B when the wait ended. */
  running: number;
  firstRunningMs: number;
  /** NaN when not every agent was running again before the wait gave up. */
  allRunningMs: number;
  /** Mid-turn: turns B finished with outcome `completed`, and when the last one ended. */
  completed: number;
  allEndedMs: number;
  /** Warn-or-worse log lines of B during the takeover. */
  bWarnings: number;
  /** CPU used from the kill until every agent ran again, ms: host B, and nats-server. */
  bCpuMs: number;
  natsCpuMs: number;
  setupMs: number;
}

const USAGE = { input_tokens: 100, output_tokens: 10 };
/** Mid-turn agents: this many list_dir steps and an answer, every model response this slow. */
export const MID_STEPS = 5;
export const MID_DELAY_MS = 2_500;

function script(kind: TakeoverKind): ScriptResponse[] {
  if (kind === 'idle') {
    // write_file under approval mode `ask` waits for a person: the turn parks on the approval
    return [
      { tool_calls: [{ name: 'write_file', arguments: { path: 'takeover.txt', content: 'parked' } }], usage: USAGE },
      { content: 'Written.', usage: USAGE },
    ];
  }
  return [
    ...Array.from({ length: MID_STEPS }, (): ScriptResponse => ({
      tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }], usage: USAGE, delay_ms: MID_DELAY_MS,
    })),
    { content: 'Listed.', usage: USAGE, delay_ms: MID_DELAY_MS },
  ];
}

/** Polls `check` every 20 ms; false when `timeoutMs` passes first. */
async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Per agent: when (host clock) it first committed each event type of interest, and whether an attempt is open. */
class EventBook {
  private readonly first = new Map<string, Map<string, number>>();
  private readonly count = new Map<string, number>();
  private readonly inAttempt = new Set<string>();

  constructor(private readonly keep: Set<string>) {}

  add(e: HostEvent): void {
    if (e.type === 'attempt/start') this.inAttempt.add(e.actor);
    else if (e.type === 'attempt/end') this.inAttempt.delete(e.actor);
    if (!this.keep.has(e.type)) return;
    let m = this.first.get(e.actor);
    if (!m) this.first.set(e.actor, (m = new Map()));
    if (m.has(e.type)) return;
    m.set(e.type, e.atMs);
    this.count.set(e.type, (this.count.get(e.type) ?? 0) + 1);
  }

  at(actor: string, type: string): number | undefined {
    return this.first.get(actor)?.get(type);
  }

  /** Agents that committed `type` at least once. */
  agents(type: string): number {
    return this.count.get(type) ?? 0;
  }

  /** Agents whose last attempt is still open. */
  openAttempts(): number {
    return this.inAttempt.size;
  }
}

/** Puts `count` agents in the directory and sends each a task; the running host claims them by their mail. */
async function submit(bus: Bus, count: number, ws: string, scriptPath: string): Promise<string[]> {
  const ids = Array.from({ length: count }, () => newId('agent'));
  await pool(ids, 32, async (actorId) => {
    const now = new Date().toISOString();
    await bus.directory.put({
      actorId, kind: 'agent', parentId: null, rootId: actorId, status: 'running', title: 'takeover bench', workspace: ws,
      createdAt: now, updatedAt: now, labels: {},
    });
    await publishInbox(bus.js, {
      id: newId('message'), from: 'bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
      content: `Agent ${actorId}: do the scripted work.`, sentAt: now,
      request: {
        model: `scripted:${scriptPath}`, baseUrl: null, workspace: ws, tools: null, instructions: null, approvalMode: 'ask',
        maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
      },
    }, 'person');
  });
  return ids;
}

/**
 * One takeover on a fresh nats-server: host A up, N agents submitted and parked on A, host B
 * started once A holds them all, A SIGKILLed, and B watched until every agent is running again
 * (hosted, and its recovery committed under B's epoch) — and, mid-turn, until every turn ended.
 */
export async function runTakeover(outer: Cleanup, spec: TakeoverSpec, logger: Logger): Promise<TakeoverRun> {
  const cleanup = new Cleanup();
  outer.add('end the takeover run', () => cleanup.run());
  try {
    return await takeover(cleanup, spec, logger);
  } finally {
    await cleanup.run();
  }
}

async function takeover(cleanup: Cleanup, spec: TakeoverSpec, logger: Logger): Promise<TakeoverRun> {
  const { kind, agents: n, leaseTtlMs } = spec;
  const t0 = Date.now();
  const nats = await startNatsServer({ storeDir: await tempDir('takeover-nats', cleanup), logger });
  cleanup.add('stop nats-server', () => nats.stop());
  const bus = await openBus({ natsUrl: nats.url, dataDir: await tempDir('takeover-client', cleanup), logger, name: 'takeover-bench' });
  cleanup.add('close bus', () => bus.close());
  const ws = await tempDir('takeover-ws', cleanup);
  const scriptPath = join(ws, 'script.json');
  await writeFile(scriptPath, JSON.stringify({ responses: script(kind) }));
  const dataA = await tempDir('takeover-data', cleanup);
  const dataB = spec.bDir === 'shared' ? dataA : await tempDir('takeover-data-b', cleanup);
  const host = (name: string, dataDir: string) => new HostProcess({ name, leaseTtlMs, natsUrl: nats.url, dataDir, cwd: ws }, cleanup);

  const a = host('A', dataA);
  const onA = new EventBook(new Set(['approval/requested', 'attempt/start', 'turn/end']));
  a.onEvent((e) => onA.add(e));
  await a.ready;
  const ids = await submit(bus, n, ws, scriptPath);
  const parkedOn = kind === 'idle' ? 'approval/requested' : 'attempt/start';
  const setupTimeout = 60_000 + 60 * n;
  if (!(await waitFor(() => (a.hosted.size >= n && onA.agents(parkedOn) >= n) || a.gone, setupTimeout)) || a.gone) {
    throw new Error(`host A parked ${onA.agents(parkedOn)} of ${n} agents (${a.hosted.size} hosted) in ${setupTimeout} ms: ${a.stderrTail()}`);
  }
  const leases = createKvLeaseStore(await new Kvm(bus.js).open(BUCKETS.leases), { ttlMs: leaseTtlMs });

  // B starts only now: the agents are A's, and B's first pass sees every lease live
  const b = host('B', dataB);
  const onB = new EventBook(new Set(['recovery/started', 'turn/end']));
  let completed = 0;
  let lastEnd = Number.NaN;
  b.onEvent((e) => {
    onB.add(e);
    if (e.type !== 'turn/end') return;
    lastEnd = e.atMs;
    if (e.outcome === 'completed') completed += 1;
  });
  await b.ready;
  // one get per agent, not leases.list(): listing the keys of a bucket whose keys A keeps renewing
  // can wait out a 30 s heartbeat, and can name a key twice
  const holders = await pool(ids, 64, async (id) => (await leases.get(id, Date.now()))?.host);
  const heldByA = holders.filter((h) => h === 'A').length;
  const claimedEarly = b.hosted.size;
  const openAtKill = onA.openAttempts();
  const endedAtKill = onA.agents('turn/end');
  const setupMs = Date.now() - t0;
  const warnBefore = b.warnCount;

  const cpu0 = { b: await cpuMsOf(b.pid), nats: await cpuMsOf(nats.pid) };
  const killedAt = Date.now();
  await a.kill('SIGKILL');
  const runningAt = (id: string): number | undefined => {
    const hosted = b.hosted.get(id);
    const recovered = onB.at(id, 'recovery/started');
    return hosted === undefined || recovered === undefined ? undefined : Math.max(hosted, recovered);
  };
  const takeoverTimeout = leaseTtlMs + 60_000 + 100 * n;
  await waitFor(() => ids.every((id) => runningAt(id) !== undefined), takeoverTimeout);
  const cpu1 = { b: await cpuMsOf(b.pid), nats: await cpuMsOf(nats.pid) };
  const times = ids.map(runningAt).filter((t): t is number => t !== undefined).map((t) => t - killedAt);
  if (kind === 'mid-turn') {
    await waitFor(() => onB.agents('turn/end') >= n, 60_000 + (MID_STEPS + 1) * MID_DELAY_MS);
  }
  const bWarnings = b.warnCount - warnBefore;
  await b.stop();
  return {
    ...spec, heldByA, claimedEarly, openAtKill, endedAtKill,
    running: times.length,
    firstRunningMs: times.length ? Math.min(...times) : Number.NaN,
    allRunningMs: times.length === n ? Math.max(...times) : Number.NaN,
    completed,
    allEndedMs: kind === 'mid-turn' && onB.agents('turn/end') === n ? lastEnd - killedAt : Number.NaN,
    bWarnings,
    bCpuMs: cpu1.b - cpu0.b,
    natsCpuMs: cpu1.nats - cpu0.nats,
    setupMs,
  };
}

/** The bench's logger for the takeover's own pieces (nats-server, client bus): warnings to stderr. */
export function takeoverLogger(): Logger {
  return pino({ level: process.env.BENCH_LOG ?? 'warn' }, pino.destination(2));
}
