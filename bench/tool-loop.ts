/**
 * The tool-loop benchmark (`npm run bench`): A agents at once, each one turn of N echo steps and
 * a final answer, on actorloop and on two floors (a bare in-memory loop; the same loop with two
 * acked JetStream publishes per step), then the memory of agents parked mid-turn, then the
 * overhead per model attempt through a fake OpenAI server against the bare `openai` client, then
 * the tool pipeline's cost per call against calling the tool directly, then one long turn (its late
 * steps against its early ones: nothing may be redone for the whole history), then host takeover: two
 * real `actorloop host` processes, the one holding N agents SIGKILLed, the time until the other
 * runs them all again, and the cost of rehydrating one agent by the length of its log.
 * Prints tables; never asserts. Flags: --agents 1,10,100 (0 leaves the tool loop out) --steps 20
 * --runs 3 --park 1000 --model-steps 20 --model-agents 1,10 --model-latency 0,200 (the fake
 * server's delay before each answer's first byte, ms; --skip-model leaves the model section out) --pipeline-steps 300 (0 leaves the pipeline section out) --context-steps 200 (0 leaves the context assembly section out)
 * --compaction-steps 300 (a scripted investigation in an 8,000-token window against an unlimited one; 0 leaves the compaction section out)
 * --takeover 10,100,1000 (idle agents per takeover; 0 leaves the whole takeover section out)
 * --takeover-mid 100 (agents killed mid-turn; 0: none) --takeover-ttl 3000 (the hosts' lease TTL, ms)
 * --rehydrate-events 100,10000 (log lengths whose rehydration is timed; 0: none) --floor-pad 0 (bytes of
 * padding in each durable floor publish: what message size alone costs the floor) --long-steps 300
 * (0 leaves the long turn out) --long-result-bytes 4000 --fresh 100 (agents created one per task, each a turn of --steps echo
 * steps and an answer, against the same tasks on pre-created agents, --runs times each; 0 leaves it out)
 * --fresh-lanes 1,10 (how many create-and-run at once) --inbox 30 (steers and interrupts timed, one agent each; 0 leaves
 * the inbox section out) --inbox-first-byte 200 (the scripted model's delay before the steered step's answer, ms)
 * --goals 20 (goals whose continuations are timed, one agent each; 0 leaves the section out) --goal-turns 4
 * --fanout 10,100,1000 (children one parent spawns, on one host; 0 leaves them out) --fanout-hosts 100 (the same across two supervisors).
 * --gateway-agents 100 (agents whose events one gateway client receives, then the tool loop at --agents with the gateway
 * running and without; 0 leaves the gateway section out).
 * --page-actors 1000 --page-rate 200 --page-seconds 20 (the page in headless Chromium over a tree of that many actors, events
 * committed at that rate; its longest frame; 0 leaves the page section out; needs `npm run build` for dist/web).
 * --jobs 1,100 (owners at once, each one start_job in its first step; 0 leaves the jobs section out) --job-samples 20 (jobs
 * per run at each size: rounds of N until there are that many) --job-command 'echo ready' (needs bubblewrap).
 * The takeover's hosts run the built CLI: `npm run build` first (the section says so if dist/ is stale).
 * The largest idle size also runs with host B on its own empty data dir (no LMDB of A: log only).
 * NATS_URL set: the in-process sections run on that server (or cluster) instead of one the bench starts.
 */
import { cpus, loadavg, platform, release } from 'node:os';
import { parseArgs } from 'node:util';
import { natsServerVersion } from '../src/bus/nats-server.js';
import { STREAMS } from '../src/bus/subjects.js';
import { Cleanup, openBenchRuntime, type BenchRuntime } from './harness.js';
import { ensureFloorStream, FLOOR_STREAM, runFloor } from './floors.js';
import { runPark, type ParkResult } from './park.js';
import { printFresh, runFreshPairs } from './fresh-agent.js';
import { fmtMs, median, percentile, table, type CpuUse } from './stats.js';
import { runActorloop, toolLoopScript, type RunResult } from './workload.js';
import { runActorloopNoIo } from './no-io.js';
import { runModelOverhead } from './model-overhead.js';
import { runToolPipelineBench } from './tool-pipeline.js';
import { runContextAssemblyBench } from './context-assembly.js';
import { runCompactionBench } from './compaction.js';
import { runTakeoverSection } from './takeover-report.js';
import { runLongTurn } from './long-turn.js';
import { runInboxLatency } from './inbox-latency.js';
import { runGoalContinuation } from './goal-continuation.js';
import { printFanout, runFanout } from './fanout.js';
import { runGatewaySection } from './gateway.js';
import { runPageSection } from './page-frames.js';
import { runJobsBench } from './jobs.js';

const IMPLS = ['inmem floor', 'durable floor', 'actorloop', 'actorloop, no I/O'] as const;
type Impl = (typeof IMPLS)[number];

interface Flags {
  agents: number[];
  steps: number;
  runs: number;
  park: number;
  modelSteps: number;
  modelAgents: number[];
  /** The fake OpenAI server's delays before each answer's first byte, ms (0: at once). */
  modelLatency: number[];
  skipModel: boolean;
  pipelineSteps: number;
  contextSteps: number;
  /** Steps of the compaction section's investigation (0 leaves it out). */
  compactionSteps: number;
  takeover: number[];
  takeoverMid: number;
  takeoverTtl: number;
  rehydrateEvents: number[];
  /** Bytes of padding in each durable floor publish (0: the floor's own small messages). */
  floorPad: number;
  /** Echo steps of the long-turn section (0 leaves it out), and the bytes of each result. */
  longSteps: number;
  longResultBytes: number;
  /** Agents created for the fresh-agent section (0 leaves it out), split over each number of lanes. */
  fresh: number;
  freshLanes: number[];
  /** Steers and interrupts timed by the inbox section (0 leaves it out), and the model's first-byte delay there. */
  inbox: number;
  /** Goals timed by the goal-continuation section (0 leaves it out), and the turns of each. */
  goals: number;
  goalTurns: number;
  inboxFirstByteMs: number;
  /** Children one parent spawns in the fan-out section, per run on one host (empty leaves it out), and across two. */
  fanout: number[];
  fanoutHosts: number[];
  /** Agents of the gateway section (0 leaves it out). */
  gatewayAgents: number;
  /** Actors in the page section's tree (0 leaves it out), the events a second committed across it, and for how long. */
  pageActors: number;
  pageRate: number;
  pageSeconds: number;
  /** Owners at once in the jobs section, one job each (empty leaves it out); jobs per run at each size; the command. */
  jobs: number[];
  jobSamples: number;
  jobCommand: string;
}

/** A bad flag: reported in one line, without a stack. */
class UsageError extends Error {
  override name = 'UsageError';
}

const FLAG_OPTIONS = {
  agents: { type: 'string', default: '1,10,100' },
  steps: { type: 'string', default: '20' },
  runs: { type: 'string', default: '3' },
  park: { type: 'string', default: '1000' },
  'model-steps': { type: 'string', default: '20' },
  'model-agents': { type: 'string', default: '1,10' },
  'model-latency': { type: 'string', default: '0,200' },
  'skip-model': { type: 'boolean', default: false },
  'pipeline-steps': { type: 'string', default: '300' },
  'context-steps': { type: 'string', default: '200' },
  'compaction-steps': { type: 'string', default: '300' },
  takeover: { type: 'string', default: '10,100,1000' },
  'takeover-mid': { type: 'string', default: '100' },
  'takeover-ttl': { type: 'string', default: '3000' },
  'rehydrate-events': { type: 'string', default: '100,10000' },
  'floor-pad': { type: 'string', default: '0' },
  'long-steps': { type: 'string', default: '300' },
  'long-result-bytes': { type: 'string', default: '4000' },
  fresh: { type: 'string', default: '100' },
  'fresh-lanes': { type: 'string', default: '1,10' },
  inbox: { type: 'string', default: '30' },
  goals: { type: 'string', default: '20' },
  'goal-turns': { type: 'string', default: '4' },
  fanout: { type: 'string', default: '10,100,1000' },
  'fanout-hosts': { type: 'string', default: '100' },
  'inbox-first-byte': { type: 'string', default: '200' },
  'gateway-agents': { type: 'string', default: '100' },
  'page-actors': { type: 'string', default: '1000' },
  'page-rate': { type: 'string', default: '200' },
  'page-seconds': { type: 'string', default: '20' },
  jobs: { type: 'string', default: '1,100' },
  'job-samples': { type: 'string', default: '20' },
  'job-command': { type: 'string', default: 'echo ready' },
} as const;

function parseFlags(): Flags {
  let values: {
    agents: string; steps: string; runs: string; park: string; 'model-steps': string; 'model-agents': string; 'model-latency': string; 'skip-model': boolean;
    'pipeline-steps': string; 'context-steps': string; 'compaction-steps': string; takeover: string; 'takeover-mid': string; 'takeover-ttl': string; 'rehydrate-events': string;
    'floor-pad': string; 'long-steps': string; 'long-result-bytes': string; fresh: string; 'fresh-lanes': string;
    inbox: string; 'inbox-first-byte': string; goals: string; 'goal-turns': string; fanout: string; 'fanout-hosts': string; 'gateway-agents': string;
    'page-actors': string; 'page-rate': string; 'page-seconds': string; jobs: string; 'job-samples': string; 'job-command': string;
  };
  try {
    values = parseArgs({ options: FLAG_OPTIONS }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const int = (name: string, v: string, min: number): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name} must be an integer ≥ ${min}, got "${v}"`);
    return n;
  };
  if (values['page-actors'].trim() === '1') throw new UsageError('--page-actors must be 0 (leaves the page section out) or ≥ 2 (a root and its children)');
  // "0" turns a list off
  const list = (name: string, v: string): number[] => (v.trim() === '0' ? [] : v.split(',').map((s) => int(name, s.trim(), 1)));
  return {
    agents: list('agents', values.agents),
    steps: int('steps', values.steps, 1),
    runs: int('runs', values.runs, 1),
    park: int('park', values.park, 0),
    modelSteps: int('model-steps', values['model-steps'], 1),
    modelAgents: values['model-agents'].split(',').map((s) => int('model-agents', s.trim(), 1)),
    modelLatency: values['model-latency'].split(',').map((s) => int('model-latency', s.trim(), 0)),
    skipModel: values['skip-model'],
    pipelineSteps: int('pipeline-steps', values['pipeline-steps'], 0),
    contextSteps: int('context-steps', values['context-steps'], 0),
    compactionSteps: int('compaction-steps', values['compaction-steps'], 0),
    takeover: list('takeover', values.takeover),
    takeoverMid: int('takeover-mid', values['takeover-mid'], 0),
    takeoverTtl: int('takeover-ttl', values['takeover-ttl'], 200),
    rehydrateEvents: list('rehydrate-events', values['rehydrate-events']),
    floorPad: int('floor-pad', values['floor-pad'], 0),
    longSteps: int('long-steps', values['long-steps'], 0),
    longResultBytes: int('long-result-bytes', values['long-result-bytes'], 1),
    fresh: int('fresh', values.fresh, 0),
    freshLanes: list('fresh-lanes', values['fresh-lanes']),
    inbox: int('inbox', values.inbox, 0),
    inboxFirstByteMs: int('inbox-first-byte', values['inbox-first-byte'], 50),
    goals: int('goals', values.goals, 0),
    goalTurns: int('goal-turns', values['goal-turns'], 2),
    fanout: list('fanout', values.fanout),
    fanoutHosts: list('fanout-hosts', values['fanout-hosts']),
    gatewayAgents: int('gateway-agents', values['gateway-agents'], 0),
    pageActors: int('page-actors', values['page-actors'], 0),
    pageRate: int('page-rate', values['page-rate'], 0),
    pageSeconds: int('page-seconds', values['page-seconds'], 1),
    jobs: list('jobs', values.jobs),
    jobSamples: int('job-samples', values['job-samples'], 1),
    jobCommand: values['job-command'],
  };
}

/** One configuration's figures, each the median over runs. */
interface Summary {
  stepsPerSec: number;
  p50: number;
  p99: number;
  peakRssMb: number;
  commitsPerStep: number | null;
  perRun: number[];
  failed: number;
  /** CPU per step over all runs (µs): this process, its main thread, and nats-server (null when not read). */
  cpu: { processUs: number; mainUs: number | null; serverUs: number | null } | null;
}

/** CPU per step over all the runs' timed windows (the /proc clock ticks are too coarse for one A=1 run). */
function cpuPerStep(runs: RunResult[]): Summary['cpu'] {
  const measured = runs.filter((r) => r.cpu !== undefined);
  const steps = measured.reduce((n, r) => n + r.steps, 0);
  if (steps === 0) return null;
  // /proc counts in clock ticks (10 ms): a total of fewer than 10 ticks says too little to show
  const perStep = (f: (c: CpuUse) => number | null, fromProc = true): number | null => {
    if (!measured.every((r) => f(r.cpu!) !== null)) return null;
    const total = measured.reduce((n, r) => n + f(r.cpu!)!, 0);
    return fromProc && total < 100_000 ? null : total / steps;
  };
  return { processUs: perStep((c) => c.processUs, false)!, mainUs: perStep((c) => c.mainUs), serverUs: perStep((c) => c.serverUs) };
}

function summarize(runs: RunResult[]): Summary {
  const sps = runs.map((r) => r.steps / (r.wallMs / 1000));
  const commits = runs.map((r) => (r.commits === null ? null : r.commits / r.steps));
  return {
    stepsPerSec: median(sps),
    p50: median(runs.map((r) => percentile(r.latencies, 50))),
    p99: median(runs.map((r) => percentile(r.latencies, 99))),
    peakRssMb: median(runs.map((r) => r.peakRss / 2 ** 20)),
    commitsPerStep: commits[0] === null ? null : median(commits as number[]),
    perRun: sps,
    failed: runs.reduce((n, r) => n + r.failed, 0),
    cpu: cpuPerStep(runs),
  };
}

async function streamState(rt: BenchRuntime, name: string): Promise<{ messages: number; bytes: number }> {
  const info = await rt.bus.jsm.streams.info(name);
  return { messages: info.state.messages, bytes: info.state.bytes };
}

/** Runs one implementation once and adds what its stream grew by to `bytes`. */
async function runOnce(rt: BenchRuntime, impl: Impl, agents: number, steps: number, floorPad: number, bytes?: Map<Impl, number[]>): Promise<RunResult> {
  const script = toolLoopScript(steps);
  if (impl === 'inmem floor') return runFloor(rt, agents, script, false);
  if (impl === 'actorloop, no I/O') return runActorloopNoIo(agents, script, rt.workspace);
  const stream = impl === 'actorloop' ? STREAMS.logs : FLOOR_STREAM;
  const s0 = await streamState(rt, stream);
  const r = impl === 'actorloop' ? await runActorloop(rt, agents, script) : await runFloor(rt, agents, script, true, floorPad);
  const s1 = await streamState(rt, stream);
  if (s1.messages > s0.messages) bytes?.get(impl)?.push((s1.bytes - s0.bytes) / (s1.messages - s0.messages));
  return r;
}

/** Every run's steps/s, or min – max of them when there are many. */
function spreadOf(perRun: number[]): string {
  if (perRun.length <= 5) return perRun.map((x) => x.toFixed(0)).join(', ');
  return `${Math.min(...perRun).toFixed(0)} – ${Math.max(...perRun).toFixed(0)} (${perRun.length} runs)`;
}

function pct(x: number): string {
  return `${x.toFixed(0)}%`;
}

function verdict(ok: boolean | null): string {
  return ok === null ? 'not measured' : ok ? 'met' : 'MISSED';
}

function printLoop(flags: Flags, results: Map<number, Map<Impl, Summary>>, msgBytes: Map<number, Map<Impl, number[]>>): void {
  const rows: string[][] = [];
  for (const [a, byImpl] of results) {
    const floor = byImpl.get('durable floor')!;
    for (const impl of IMPLS) {
      const s = byImpl.get(impl)!;
      rows.push([
        String(a), impl, s.stepsPerSec.toFixed(0), fmtMs(s.p50), fmtMs(s.p99), s.peakRssMb.toFixed(0),
        s.commitsPerStep === null ? '-' : s.commitsPerStep.toFixed(2),
        impl === 'inmem floor' ? '-' : pct((100 * s.stepsPerSec) / floor.stepsPerSec),
      ]);
    }
  }
  console.log(table(['config (A)', 'impl', 'steps/s', 'p50 ms', 'p99 ms', 'peak RSS MB', 'commits/step', '% of durable floor'], rows));
  const perSteps = flags.steps + 1;
  console.log(
    [
      `notes: a step is one model response (${flags.steps} echo steps + the final answer = ${perSteps} per agent); every figure is`,
      `  the median over ${flags.agents.map((a) => `${runsAt(flags, a)} at A=${a}`).join(', ')} runs, each metric taken separately. steps/s = all agents' steps / wall time from the first`,
      '  message sent to the last turn ended. Step latency: actorloop, from the host time the commit holding a step\'s',
      '  step/start was acked (supervisor onCommit) to the ack of the commit holding its step/end; durable floor, from',
      '  the ack of a step\'s first publish to the ack of the publish that ends it (the next step\'s first, or the final',
      '  one); inmem floor, loop top to loop top. commits/step: actorloop, onCommit calls / steps; durable floor, acked',
      '  publishes / steps. Peak RSS: whole process (tsx, nats client, LMDB), sampled every 50 ms during the run.',
      '  actorloop, no I/O: the same agents with the log kept in memory (events stamped, validated and encoded, no',
      '  publish), no blobs, snapshots or inbox: the ceiling of the actor runtime itself on this machine.',
    ].join('\n'),
  );
  const bytesLine = [...msgBytes].map(([a, m]) => {
    const al = median(m.get('actorloop') ?? []);
    const fl = median(m.get('durable floor') ?? []);
    return `A=${a}: actorloop ${al.toFixed(0)} B, floor ${fl.toFixed(0)} B`;
  });
  console.log(`  mean stored message size (stream bytes / messages): ${bytesLine.join("; ")}${flags.floorPad > 0 ? ` (floor padded by ${flags.floorPad} B: --floor-pad)` : ""}`);

  const spread = [...results].flatMap(([a, byImpl]) =>
    IMPLS.map((impl) => [String(a), impl, spreadOf(byImpl.get(impl)!.perRun), String(byImpl.get(impl)!.failed)]),
  );
  console.log('');
  console.log(table(['config (A)', 'impl', 'steps/s of each run', 'failed agents'], spread));

  const us = (x: number | null | undefined) => (x === null || x === undefined ? '-' : x.toFixed(0));
  const cpuRows = [...results].flatMap(([a, byImpl]) =>
    IMPLS.map((impl) => {
      const s = byImpl.get(impl)!;
      const c = s.cpu;
      // the event loop's share of the wall time: its CPU per step × steps per second
      const busy = c?.mainUs === null || c?.mainUs === undefined ? '-' : pct((c.mainUs * s.stepsPerSec) / 1e4);
      return [String(a), impl, us(c?.processUs), us(c?.mainUs), busy, us(c?.serverUs), us(c && c.serverUs !== null ? c.processUs + c.serverUs : null)];
    }),
  );
  console.log('');
  console.log(table(['config (A)', 'impl', 'this process µs/step', 'main thread µs/step', 'main thread busy', 'nats-server µs/step', 'both µs/step'], cpuRows));
  console.log(
    '  CPU in the timed windows of all runs / their steps: this process with all its threads (GC, LMDB\'s writer),\n' +
      '  its main thread (the event loop) and nats-server, the last two from /proc (Linux, in 10 ms ticks: - where the\n' +
      '  runs add up to less than 100 ms). They share this machine\'s cores: where the process and the server add up\n' +
      '  to the cores × wall time, the machine is the limit; where the main thread is busy near 100% of the wall time\n' +
      '  (its µs/step × the median steps/s), the event loop is.',
  );

  const at = (a: number) => results.get(a);
  const maxCommits = Math.max(...[...results.values()].map((m) => m.get('actorloop')!.commitsPerStep ?? 0));
  const ratio = (a: number) => {
    const m = at(a);
    return m ? (100 * m.get('actorloop')!.stepsPerSec) / m.get('durable floor')!.stepsPerSec : null;
  };
  const r100 = ratio(100);
  const r1 = ratio(1);
  const p99x = at(100) ? at(100)!.get('actorloop')!.p99 / at(100)!.get('durable floor')!.p99 : null;
  console.log('');
  console.log(
    `targets (issue): ≤ 3 commits/step [max ${maxCommits.toFixed(2)}: ${verdict(maxCommits <= 3)}]; ` +
      `A=100 steps/s ≥ 40% of durable floor [${r100 === null ? '-' : pct(r100)}: ${verdict(r100 === null ? null : r100 >= 40)}]; ` +
      `A=1 ≥ 60% [${r1 === null ? '-' : pct(r1)}: ${verdict(r1 === null ? null : r1 >= 60)}]; ` +
      `p99 at A=100 ≤ 2× the floor's p99 [${p99x === null ? '-' : `${p99x.toFixed(2)}×`}: ${verdict(p99x === null ? null : p99x <= 2)}]`,
  );
}

function printPark(p: ParkResult): void {
  const mb = (b: number) => (b / 2 ** 20).toFixed(1);
  const perKb = (d: number) => (d / p.parked / 1024).toFixed(1);
  const heapDelta = p.after.heapUsed - p.before.heapUsed;
  const rssDelta = p.after.rss - p.before.rss;
  console.log(
    table(
      ['parked agents', 'heap before MB', 'heap after MB', 'heap/agent KB', 'history/agent KB', 'heap/agent beyond history KB',
        'RSS before MB', 'RSS after MB', 'RSS/agent KB'],
      [[
        `${p.parked} of ${p.agents}`, mb(p.before.heapUsed), mb(p.after.heapUsed), perKb(heapDelta), (p.historyBytes / 1024).toFixed(2),
        ((heapDelta / p.parked - p.historyBytes) / 1024).toFixed(1), mb(p.before.rss), mb(p.after.rss), perKb(rssDelta),
      ]],
    ),
  );
  const heapBeyondKb = (heapDelta / p.parked - p.historyBytes) / 1024;
  console.log(
    `notes: heap = process.memoryUsage().heapUsed ${p.gcForced ? 'after a forced full GC' : 'WITHOUT a forced GC (run node with --expose-gc)'}, ` +
      `before creating the agents and once all had committed attempt/start; history = JSON bytes of the projection's history.\n` +
      `  created in ${(p.createMs / 1000).toFixed(1)} s, all parked ${(p.parkMs / 1000).toFixed(1)} s after the first message, ` +
      `stopped in ${(p.stopMs / 1000).toFixed(1)} s. external+arrayBuffers after: ${mb(p.after.external)} MB.`,
  );
  console.log(`target (issue): ≤ 32 KB heap per parked agent beyond its history [${heapBeyondKb.toFixed(1)} KB: ${verdict(heapBeyondKb <= 32)}]`);
}

/** Runs per implementation at `a` agents: at least `--runs`, and at least 30 agents' turns in all. */
function runsAt(flags: Flags, a: number): number {
  return Math.max(flags.runs, Math.ceil(30 / a));
}

/** The tool-loop section: every implementation at every agent count, runs interleaved. */
async function toolLoop(rt: BenchRuntime, flags: Flags, started: number): Promise<void> {
  // warm-up (not reported): JIT, schemas, the streams' first pages. Two runs at up to 100 agents
  // (about 4,000 steps): with one run of 10 agents, V8 had not yet optimized the runtime's hot
  // paths, and the A=1 runs (21 steps, ~40 ms each) measured the compiler, not the runtime.
  const warm = Math.min(100, Math.max(...flags.agents));
  for (let r = 0; r < 2; r++) for (const impl of IMPLS) await runOnce(rt, impl, warm, flags.steps, flags.floorPad);

  const results = new Map<number, Map<Impl, Summary>>();
  const msgBytes = new Map<number, Map<Impl, number[]>>();
  for (const a of flags.agents) {
    const runs = new Map<Impl, RunResult[]>(IMPLS.map((i) => [i, []]));
    const bytes = new Map<Impl, number[]>(IMPLS.map((i) => [i, []]));
    // interleaved, so drift on the machine touches every implementation alike
    // a run of few agents is short and noisy: take more of them (30 at A=1, 3 at A=10 and up)
    for (let r = 0; r < runsAt(flags, a); r++) {
      for (const impl of IMPLS) runs.get(impl)!.push(await runOnce(rt, impl, a, flags.steps, flags.floorPad, bytes));
    }
    results.set(a, new Map(IMPLS.map((i) => [i, summarize(runs.get(i)!)])));
    msgBytes.set(a, bytes);
    process.stderr.write(`A=${a} done (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  }
  console.log('');
  console.log('== tool loop ==');
  printLoop(flags, results, msgBytes);
}

async function main(cleanup: Cleanup): Promise<void> {
  const flags = parseFlags();
  const rt = await openBenchRuntime(cleanup);
  await ensureFloorStream(rt);
  const cpu = cpus();
  console.log(
    `actorloop tool-loop bench: node ${process.version}, nats-server ${await natsServerVersion()}, ${cpu.length} CPU(s) ` +
      `(${cpu[0]?.model.trim() ?? '?'}), ${platform()} ${release()}`,
  );
  console.log(
    `agents ${flags.agents.join(',') || 'none'}; ${flags.steps} echo steps + a final answer each; ${flags.runs} run(s), median reported; ` +
      `snapshots every 64 events; park ${flags.park}; ` +
      (flags.skipModel
        ? 'model section skipped'
        : `model: ${flags.modelSteps} steps, agents ${flags.modelAgents.join(',')}, first byte after ${flags.modelLatency.join(',')} ms`),
  );
  console.log(`load average at start: ${loadavg().map((x) => x.toFixed(2)).join(' ')} (other processes share these CPUs)`);
  const started = Date.now();
  if (flags.agents.length > 0) await toolLoop(rt, flags, started);
  if (flags.gatewayAgents > 0) await runGatewaySection(rt, { agents: flags.gatewayAgents, loopAgents: flags.agents, steps: flags.steps, runs: flags.runs });
  if (flags.pageActors > 0 && flags.pageRate > 0) {
    await runPageSection(rt, cleanup, { actors: flags.pageActors, rate: flags.pageRate, seconds: flags.pageSeconds, runs: flags.runs });
  }

  if (flags.fresh > 0 && flags.freshLanes.length > 0) {
    // warm-up, not reported
    await runFreshPairs(rt, 1, 20, flags.steps, 1);
    const fresh = [];
    // the tasks split over the lanes, so every concurrency creates the same number of agents
    for (const lanes of flags.freshLanes) fresh.push(await runFreshPairs(rt, lanes, Math.max(1, Math.round(flags.fresh / lanes)), flags.steps, flags.runs));
    printFresh(fresh, flags.steps);
  }

  if (flags.inbox > 0) await runInboxLatency(rt, { samples: flags.inbox, firstByteMs: flags.inboxFirstByteMs });
  if (flags.goals > 0) await runGoalContinuation(rt, { agents: flags.goals, turns: flags.goalTurns });
  if (flags.jobs.length > 0) await runJobsBench(rt, cleanup, { sizes: flags.jobs, samples: flags.jobSamples, runs: flags.runs, command: flags.jobCommand });
  if (flags.fanout.length > 0 || flags.fanoutHosts.length > 0) {
    await runFanout(rt, 10, 1); // warm-up, not reported
    const fan = [];
    for (const n of flags.fanout) fan.push(await runFanout(rt, n, 1));
    for (const n of flags.fanoutHosts) fan.push(await runFanout(rt, n, 2));
    printFanout(fan);
  }

  if (flags.park > 0) {
    const p = await runPark(rt, flags.park);
    console.log('');
    console.log(`== ${flags.park} agents parked mid-turn (first model response delayed 10 min) ==`);
    printPark(p);
  }

  if (!flags.skipModel) {
    await runModelOverhead(rt, cleanup, { steps: flags.modelSteps, agents: flags.modelAgents, runs: flags.runs, firstByteMs: flags.modelLatency });
  }
  if (flags.pipelineSteps > 0) {
    await runToolPipelineBench({ steps: flags.pipelineSteps, runs: flags.runs, workspace: rt.workspace });
  }
  if (flags.contextSteps > 0) runContextAssemblyBench({ steps: flags.contextSteps });
  if (flags.compactionSteps > 0) await runCompactionBench(rt, cleanup, { steps: flags.compactionSteps, runs: flags.runs });
  if (flags.longSteps > 0) await runLongTurn(rt, { steps: flags.longSteps, resultBytes: flags.longResultBytes, runs: flags.runs });
  if (flags.takeover.length > 0) {
    await runTakeoverSection(cleanup, rt, {
      idle: flags.takeover, midTurn: flags.takeoverMid, leaseTtlMs: flags.takeoverTtl, ownDir: true, runs: flags.runs,
      rehydrateEvents: flags.rehydrateEvents,
    });
  }
  console.log('');
  console.log(`total ${((Date.now() - started) / 1000).toFixed(0)} s; load average at end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
}

const cleanup = new Cleanup();
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    process.stderr.write(`${sig}: cleaning up\n`);
    void cleanup.run().finally(() => process.exit(130));
  });
}
// Whoever read the tables went away (`npm run bench | head`): without a listener the EPIPE would
// end the process on the spot and leave its nats-server and hosts running. Stop as Ctrl-C stops.
let readerGone = false;
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err;
  if (readerGone) return;
  readerGone = true;
  process.emit('SIGTERM');
});
let code = 0;
try {
  await main(cleanup);
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`${err.message} (flags: --agents 1,10,100 --steps 20 --runs 3 --park 1000 --model-steps 20 --model-agents 1,10 --model-latency 0,200 --skip-model --pipeline-steps 300 --context-steps 200 --compaction-steps 300 --takeover 10,100,1000 --takeover-mid 100 --takeover-ttl 3000 --rehydrate-events 100,10000 --floor-pad 0 --long-steps 300 --long-result-bytes 4000 --fresh 100 --fresh-lanes 1,10 --inbox 30 --inbox-first-byte 200 --goals 20 --goal-turns 4 --fanout 10,100,1000 --fanout-hosts 100 --gateway-agents 100 --page-actors 1000 --page-rate 200 --page-seconds 20 --jobs 1,100 --job-samples 20 --job-command 'echo ready')\n`);
    code = 2;
  } else if (cleanup.closing) {
    // interrupted: the cleanup closed what the section was using, which is why it failed
    code = 130;
  } else {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    code = 1;
  }
} finally {
  await cleanup.run();
}
process.exit(code);
