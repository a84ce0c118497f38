/**
 * Compaction (design §10): one scripted investigation of N steps (read_file of 4 KB files) in an
 * 8,000-token window, on the durable runtime the other sections use (the bench's nats-server,
 * JetStream ports, LMDB), against the same turn with a window nothing compacts in.
 *
 * The turn is compaction.test.ts's retention scenario: the plan at step 1, a steer (the user's
 * correction) while step 3's tool runs, a write_file at step 10, and an apply_patch at step 20
 * whose host is dropped right after its `tool/start` (`after:tool/start@20=drop`), so a second
 * supervisor hydrates the actor and recovery leaves the call `outcome_unknown`. Both windows run
 * the same scenario (steer and drop included), so their wall times differ by compaction alone.
 *
 * Reported, from the log once the turn ended: the checkpoints' tokens before and after (of the
 * range each replaced), the compaction attempts' share of all attempts' usage, the turn's wall
 * time in both windows, and the retention of the pinned facts in the turn's final request (the
 * model port keeps the last prepared request of the agent's own steps).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { AgentActor } from '../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../src/actors/actor/hosted-agent.js';
import { createMemoryFaultRecords, type FaultRecords } from '../src/actors/faults/fault-records.js';
import { createFaultInjector, parseFaultSpecs } from '../src/actors/faults/faults.js';
import { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createJetStreamPorts } from '../src/actors/hosting/supervisor-ports.js';
import type { ModelAdapter, PreparedRequest } from '../src/model/model-port.js';
import type { ScriptResponse } from '../src/model/script.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ActorEvent, EventOf, EventType, TurnRequest } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import type { InboxMessage } from '../src/protocol/inbox.js';
import { builtinTools } from '../src/tools/builtins/index.js';
import { createToolRegistry } from '../src/tools/registry.js';
import type { ToolDefinition } from '../src/tools/tool.js';
import { Cleanup, openBenchRuntime, tempDir, type BenchRuntime } from './harness.js';
import { median, nowMs, settleGc, table } from './stats.js';

/** Flags of the compaction section. */
export interface CompactionFlags {
  /** Steps of the investigation (tool calls; a final answer follows). */
  steps: number;
  runs: number;
}

const WINDOW = 8_000;
/** Large enough that a turn of 4 KB results never compacts (the scripted model's own is 128,000). */
const UNLIMITED = 100_000_000;
/** The steps the scenario places its facts at; a shorter turn cannot hold them all. */
const GATE_STEP = 3;
const WRITE_STEP = 10;
const PATCH_STEP = 20;
const MIN_STEPS = PATCH_STEP + 5;
const FILES = 30;

const TASK = 'Find why the parser drops the last token in src/parse.txt and write your findings to notes.md';
const CORRECTION = 'the bug is in the loop bound, not the tokenizer';
const TOOLS = ['read_file', 'write_file', 'apply_patch', 'update_plan', 'gate'];

/** One turn in one window: what its log and its final request said. */
interface TurnRun {
  wallMs: number;
  /** Steps the log holds (`step/start`), over both incarnations. */
  steps: number;
  checkpoints: Array<{ before: number; after: number }>;
  rejected: number;
  /** Usage (input + output tokens) of the compaction attempts, and of every attempt. */
  compactionTokens: number;
  allTokens: number;
  /** Tokens of the final request, as its `request/prepared` budget counted them. */
  finalRequestTokens: number;
  /** Of the window: what the final request kept free (the answer, the next observation), and its non-history parts. */
  reserve: number;
  fixedTokens: number;
  /** Events of the turn's log, and the commits (acked appends) that carried them. */
  events: number;
  commits: number;
  /** Each pinned fact: whether the final request holds its line verbatim. */
  retained: Array<{ fact: string; kept: boolean }>;
  outcome: string;
}

/** A workspace of `FILES` distinct files of 4 KB (`f0.txt` …) and the parser the task names. */
async function workspace(cleanup: Cleanup): Promise<string> {
  const ws = await tempDir('compaction-ws', cleanup);
  await mkdir(join(ws, 'src'), { recursive: true });
  for (let i = 0; i < FILES; i++) await writeFile(join(ws, `f${i}.txt`), `file ${i}: ${'lorem ipsum dolor sit amet '.repeat(150)}`.slice(0, 4096));
  await writeFile(join(ws, 'src', 'parse.txt'), 'tokens: a b c\n');
  return ws;
}

/** The investigation: the plan, reads, the gate at step 3, notes.md at 10, a patch at 20, reads to `steps`, an answer. */
function script(steps: number): ScriptResponse[] {
  const read = (i: number): ScriptResponse => ({ tool_calls: [{ id: `c_read_${i}`, name: 'read_file', arguments: { path: `f${i % FILES}.txt` } }] });
  const patch = '--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+x\n';
  const out: ScriptResponse[] = [];
  for (let i = 1; i <= steps; i++) {
    if (i === 1) out.push({ tool_calls: [{ id: 'c_plan', name: 'update_plan', arguments: { items: [{ content: 'read every file', status: 'in_progress' }, { content: 'write notes.md', status: 'pending' }] } }] });
    else if (i === GATE_STEP) out.push({ tool_calls: [{ id: 'c_gate', name: 'gate', arguments: { text: `step ${GATE_STEP}` } }] });
    else if (i === WRITE_STEP) out.push({ tool_calls: [{ id: 'c_write', name: 'write_file', arguments: { path: 'notes.md', content: 'the last token is dropped by the loop bound\n' } }] });
    else if (i === PATCH_STEP) out.push({ tool_calls: [{ id: 'c_patch', name: 'apply_patch', arguments: { patch } }] });
    else out.push(read(i));
  }
  out.push({ content: 'The loop bound skips the last token.' });
  return out;
}

/** A tool that returns once `opened` resolves: holds step 3 until the steer was received. */
function gateTool(opened: () => Promise<void>): ToolDefinition<{ text: string }> {
  return {
    name: 'gate', version: '1', description: 'Waits for the bench.', input: z.strictObject({ text: z.string() }), level: 'read',
    executionSemantics: () => ({ effects: 'none', retry: 'auto' }), resources: () => [],
    async execute() {
      await opened();
      return { ok: true, output: 'open' };
    },
  };
}

function ofType<T extends EventType>(log: ActorEvent[], type: T): EventOf<T>[] {
  return log.filter((e) => e.type === type) as unknown as EventOf<T>[];
}

/** Runs the scenario once in a `window`-token window; resolves when the turn ended and its log was read. */
async function runTurn(rt: BenchRuntime, cleanup: Cleanup, ws: string, steps: number, window: number): Promise<TurnRun> {
  const responses = script(steps);
  // the final request is all retention needs: keeping every body would hold hundreds of MB unlimited
  let lastRequest: PreparedRequest | null = null;
  const modelFor = async (_s: unknown, cursor: number): Promise<ModelAdapter> => {
    const m = createScriptedModel({ responses, cursor, record: false });
    return {
      ...m,
      stream(prepared, signal) {
        if (prepared.request.purpose === undefined) lastRequest = prepared;
        return m.stream(prepared, signal);
      },
    };
  };
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  const tools = createToolRegistry([...builtinTools(), gateTool(() => opened)]);
  const records = createMemoryFaultRecords();
  const correction: InboxMessage = {
    id: newId('message'), from: 'client:bench', to: '', kind: 'steer', target: 'next_step', wakeup: true,
    content: CORRECTION, request: null, sentAt: new Date().toISOString(),
  };
  let steerSent = false;
  // event-driven, not polled: the steer goes out on the gate's tool/start, the gate opens on its receipt
  let current: Supervisor | null = null;
  let commits = 0;
  const onCommit = (_actorId: string, events: ActorEvent[]): void => {
    commits += 1;
    for (const e of events) {
      if (e.type === 'tool/start' && e.data.name === 'gate' && !steerSent) {
        steerSent = true;
        void current!.send(correction).catch((err: unknown) => process.stderr.write(`compaction bench: steer not sent: ${(err as Error).message}\n`));
      } else if (e.type === 'inbox/received' && e.data.messageId === correction.id) open();
    }
  };
  const supervisor = (faults: string, faultRecords: FaultRecords): Supervisor => {
    const s = new Supervisor({
      ports: createJetStreamPorts(rt.bus), blobs: rt.blobs, snapshots: rt.snapshots, tools, logger: rt.logger,
      faults: createFaultInjector(parseFaultSpecs(faults), undefined, faultRecords), faultRecords,
      snapshotEvery: 64, modelFor, onCommit,
    });
    cleanup.add('stop supervisor', () => s.stop());
    return s;
  };
  const request: TurnRequest = {
    approvalMode: 'auto-edit', model: 'scripted:inline', baseUrl: null, workspace: ws, tools: TOOLS, instructions: null,
    maxSteps: steps + 10, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null, context: { window },
  };

  const sup1 = supervisor(`after:tool/start@${PATCH_STEP}=drop`, records);
  current = sup1;
  const actorId = newId('agent');
  const first = await sup1.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'compaction bench', workspace: ws, labels: {} });
  correction.to = actorId;
  await sup1.inboxPending(actorId);
  const firstEnded = first.whenTurnEnds();
  settleGc();
  const t0 = nowMs();
  await sup1.send({
    id: newId('message'), from: 'bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: TASK, request, sentAt: new Date().toISOString(),
  });
  try {
    await firstEnded;
    throw new Error(`the turn ended before the drop at step ${PATCH_STEP}`);
  } catch (err) {
    if ((err as { code?: string }).code !== 'actor.dropped') throw err;
  }
  // the host is gone: its supervisor stops, another hydrates the actor (recovery finds the patch started)
  await sup1.stop();
  const sup2 = supervisor('', records);
  current = sup2;
  let ended: Promise<TurnEnded> | null = null;
  const { actor } = await sup2.hydrate(actorId, (a: AgentActor) => {
    ended = a.whenTurnEnds();
  });
  const end = await ended!;
  const wallMs = nowMs() - t0;
  await sup2.stop();

  const log: ActorEvent[] = [];
  for await (const { event } of sup2.reader.read(actor.rootId, actorId, { afterSeq: 0 })) log.push(event);
  const compactionAttempts = new Set(ofType(log, 'attempt/start').filter((e) => e.data.kind === 'compaction').map((e) => e.attempt));
  let compactionTokens = 0;
  let allTokens = 0;
  for (const e of ofType(log, 'attempt/end')) {
    const n = e.data.usage.inputTokens + e.data.usage.outputTokens;
    allTokens += n;
    if (compactionAttempts.has(e.attempt)) compactionTokens += n;
  }
  const unknown = ofType(log, 'tool/outcome_unknown')[0];
  const facts: Array<[string, string | null]> = [
    ['task', `Task (the user's words): ${TASK}`],
    ['correction', `User, later: ${CORRECTION}`],
    ['changed file', 'Changed: notes.md (sha256:'],
    ['outcome_unknown', unknown ? `Outcome unknown (may or may not have taken effect): apply_patch ${unknown.call}` : null],
    ['plan', 'Plan: [in_progress] read every file; [pending] write notes.md'],
  ];
  const body = (lastRequest as PreparedRequest | null)?.body ?? '';
  // the lines sit inside a JSON string in the body: look for them as JSON writes them
  const retained = facts.map(([fact, line]) => ({ fact, kept: line !== null && body.includes(JSON.stringify(line).slice(1, -1)) }));
  const prepared = ofType(log, 'request/prepared');
  return {
    wallMs,
    steps: ofType(log, 'step/start').length,
    checkpoints: ofType(log, 'checkpoint/committed').map((c) => ({ before: c.data.tokensBefore, after: c.data.tokensAfter })),
    rejected: ofType(log, 'compaction/rejected').length,
    compactionTokens,
    allTokens,
    finalRequestTokens: prepared.at(-1)?.data.budget?.tokens ?? 0,
    reserve: prepared.at(-1)?.data.budget?.reserve ?? 0,
    fixedTokens: (prepared.at(-1)?.data.contributions ?? []).filter((c) => c.source !== 'history').reduce((n, c) => n + c.tokens, 0),
    events: log.length,
    commits,
    retained,
    outcome: end.outcome === 'completed' ? 'completed' : `${end.outcome} (${end.reason})`,
  };
}

const int = (x: number): string => Math.round(x).toLocaleString('en-US');
const minMax = (xs: number[]): string => (xs.length === 0 ? '-' : `${int(Math.min(...xs))} – ${int(Math.max(...xs))}`);
const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** Runs the section: a warm-up, then `runs` interleaved pairs (8,000-token window, unlimited), and prints the tables. */
export async function runCompactionBench(rt: BenchRuntime, cleanup: Cleanup, flags: CompactionFlags): Promise<void> {
  console.log('');
  console.log(`== compaction: a ${flags.steps}-step investigation (read_file of 4 KB files) in a ${int(WINDOW)}-token window, against an unlimited one ==`);
  if (flags.steps < MIN_STEPS) {
    console.log(`  skipped: the scenario needs at least ${MIN_STEPS} steps (its patch is dropped at step ${PATCH_STEP})`);
    return;
  }
  const ws = await workspace(cleanup);
  // warm-up, not reported: JIT, the tools' first calls, the streams' first pages. A whole turn of
  // each: after a 40-step one the first timed run was still the slowest of three, in both windows
  await runTurn(rt, cleanup, ws, flags.steps, WINDOW);
  await runTurn(rt, cleanup, ws, flags.steps, UNLIMITED);
  const small: TurnRun[] = [];
  const big: TurnRun[] = [];
  for (let r = 0; r < flags.runs; r++) {
    // interleaved, so drift on the machine touches both alike
    small.push(await runTurn(rt, cleanup, ws, flags.steps, WINDOW));
    big.push(await runTurn(rt, cleanup, ws, flags.steps, UNLIMITED));
    process.stderr.write(`compaction run ${r + 1} of ${flags.runs} done\n`);
  }
  for (const r of [...small, ...big]) if (r.outcome !== 'completed') process.stderr.write(`compaction bench: a turn did not complete: ${r.outcome}\n`);

  const row = (label: string, r: Pick<TurnRun, 'checkpoints' | 'rejected'>): string[] => {
    const before = r.checkpoints.map((c) => c.before);
    const after = r.checkpoints.map((c) => c.after);
    const saved = r.checkpoints.map((c) => c.before - c.after);
    return [label, String(r.checkpoints.length), String(r.rejected), int(median(before)), minMax(before), int(median(after)), minMax(after), int(median(saved)), minMax(saved)];
  };
  const rows = small.map((r, i) => row(`run ${i + 1}`, r));
  // the median run: by its count of checkpoints, then its median saving
  const all = small.flatMap((r) => r.checkpoints);
  rows.push(row(`all ${small.length} runs`, { checkpoints: all, rejected: small.reduce((n, r) => n + r.rejected, 0) }));
  console.log(table(['checkpoints (8,000 window)', 'committed', 'rejected', 'tokensBefore p50', 'min – max', 'tokensAfter p50', 'min – max', 'saved p50', 'min – max'], rows));

  console.log(
    table(
      ['tokens (usage of attempt/end)', 'compaction attempts', 'all attempts', 'compaction share', 'final request tokens'],
      [
        ...small.map((r, i) => [`${int(WINDOW)} window, run ${i + 1}`, int(r.compactionTokens), int(r.allTokens), pct(r.compactionTokens / r.allTokens), int(r.finalRequestTokens)]),
        [`${int(WINDOW)} window, median`, int(median(small.map((r) => r.compactionTokens))), int(median(small.map((r) => r.allTokens))),
          pct(median(small.map((r) => r.compactionTokens / r.allTokens))), int(median(small.map((r) => r.finalRequestTokens)))],
        ['unlimited, median', int(median(big.map((r) => r.compactionTokens))), int(median(big.map((r) => r.allTokens))),
          pct(median(big.map((r) => r.compactionTokens / r.allTokens))), int(median(big.map((r) => r.finalRequestTokens)))],
      ],
    ),
  );

  const wall = (rs: TurnRun[]) => median(rs.map((r) => r.wallMs));
  const runsOf = (rs: TurnRun[]) => rs.map((r) => (r.wallMs / 1000).toFixed(2)).join(', ');
  console.log(
    table(
      ['turn wall time', 'steps', 'events', 'commits', 'median s', 'ms/step', 'runs s', 'vs unlimited'],
      [
        [`${int(WINDOW)} window`, String(median(small.map((r) => r.steps))), int(median(small.map((r) => r.events))), int(median(small.map((r) => r.commits))), (wall(small) / 1000).toFixed(2),
          (wall(small) / median(small.map((r) => r.steps))).toFixed(2), runsOf(small), `${(wall(small) / wall(big)).toFixed(2)}×`],
        ['unlimited', String(median(big.map((r) => r.steps))), int(median(big.map((r) => r.events))), int(median(big.map((r) => r.commits))), (wall(big) / 1000).toFixed(2),
          (wall(big) / median(big.map((r) => r.steps))).toFixed(2), runsOf(big), '1.00×'],
      ],
    ),
  );

  const facts = small[0]!.retained.map((f) => f.fact);
  console.log(
    table(
      ['retention (final request, 8,000 window)', ...facts, 'retained'],
      small.map((r, i) => [`run ${i + 1}`, ...r.retained.map((f) => (f.kept ? 'kept' : 'LOST')), pct(r.retained.filter((f) => f.kept).length / r.retained.length)]),
    ),
  );
  console.log(
    '  tokens: the scripted model counts four characters a token; checkpoint tokensBefore/After are of the range each\n' +
      '  replaced; usage is the scripted model\'s estimate (request body / 4 in, answer / 4 out). Both windows run the same\n' +
      `  scenario: a steer while step ${GATE_STEP}'s tool runs, the host dropped after step ${PATCH_STEP}'s tool/start, a second supervisor hydrating.\n` +
      `  Of the ${int(WINDOW)}-token window the final request kept ${int(median(small.map((r) => r.reserve)))} free (answer and next observation) and its instructions and\n` +
      `  tool schemas took ${int(median(small.map((r) => r.fixedTokens)))}: the rest is all the history (task, checkpoint, kept steps) may hold.`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const cleanup = new Cleanup();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => void cleanup.run().finally(() => process.exit(130)));
  }
  let code = 0;
  try {
    const rt = await openBenchRuntime(cleanup);
    await runCompactionBench(rt, cleanup, { steps: Number(process.argv[2] ?? 300), runs: Number(process.argv[3] ?? 3) });
  } catch (err) {
    process.stderr.write(`compaction bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    code = 1;
  } finally {
    await cleanup.run();
  }
  process.exit(code);
}
