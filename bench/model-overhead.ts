/**
 * The model benchmark (third section of `npm run bench`): the overhead per model attempt of the
 * runtime through a fake OpenAI-compatible server (streamed Chat Completions, usage chunk on),
 * against the bare `openai` client calling the same server in the same run with the same
 * conversation shape and no durability. Target (issue 3): the runtime adds ≤ 15% to the bare
 * client's time per step at A=10. Each first-byte delay of `--model-latency` runs both sides
 * against its own fake server: 0 answers at once, so a step is the runtime's and the client's
 * work alone; a delay like a hosted model's time to first token shows what a user would see.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionMessageToolCall, ChatCompletionTool } from 'openai/resources/chat/completions';
import { DEFAULT_INSTRUCTIONS } from '../src/actors/agent/turn-settings.js';
import { createOpenAIChatModel } from '../src/model/openai-chat.js';
import { newId } from '../src/protocol/ids.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { echoTool } from './echo-tool.js';
import { benchTurnRequest, type BenchRuntime, type Cleanup } from './harness.js';
import { cpus } from 'node:os';
import { cpuMeter, fmtMs, median, nowMs, percentile, pidCpuMeter, settleGc, table } from './stats.js';
import { createAgents } from './workload.js';

const MODEL = 'test-model';
const API_KEY = 'bench';
const IMPLS = ['bare openai client', 'actorloop'] as const;
export type Impl = (typeof IMPLS)[number];

/** What one run of one side measured. */
interface ModelRun {
  agents: number;
  /** Model responses consumed (echo steps plus the final answer), all agents. */
  steps: number;
  /** Start of the first agent to the end of the last. */
  wallMs: number;
  /** Per-step latency samples, ms (see the notes printed with the table). */
  latencies: number[];
  failed: number;
  /** CPU during the run, µs: this process (all its threads), its main thread, nats-server, the fake server (null: not read). */
  cpu?: { processUs: number; mainUs: number | null; natsUs: number | null; fakeUs: number | null };
}

type CpuSample = NonNullable<ModelRun['cpu']>;
/** Starts measuring CPU for a run's timed window: this process, its main thread, nats-server, the fake server. */
type StartCpu = () => { stop(): CpuSample };

function cpuOfRun(rt: BenchRuntime, fakePid: number | undefined): StartCpu {
  return () => {
    const own = cpuMeter(rt.nats.pid);
    const fake = pidCpuMeter(fakePid);
    return {
      stop() {
        const c = own.stop();
        return { processUs: c.processUs, mainUs: c.mainUs, natsUs: c.serverUs, fakeUs: fake.stop() };
      },
    };
  };
}

/** The fake server, in its own process. */
interface FakeServer {
  baseURL: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Starts bench/fake-server.ts as a child process (every answer's first byte after `firstByteMs`)
 * and waits for its address; registers its stop on `cleanup`.
 */
export async function startFakeServer(steps: number, cleanup: Cleanup, firstByteMs = 0): Promise<FakeServer> {
  const script = fileURLToPath(new URL('./fake-server.ts', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', script, String(steps), String(firstByteMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let exited = false;
  const exit = once(child, 'exit').then(() => {
    exited = true;
  });
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.stdin?.end();
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exit;
    clearTimeout(timer);
  };
  cleanup.add('stop fake OpenAI server', stop);
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    once(lines, 'line').then(([line]) => line as string),
    exit.then(() => null),
    new Promise<null>((resolve) => setTimeout(() => resolve(null), 30_000).unref()),
  ]);
  if (first === null) {
    await stop();
    throw new Error('the fake OpenAI server did not start');
  }
  lines.close();
  child.stdout!.resume();
  return { baseURL: (JSON.parse(first) as { baseURL: string }).baseURL, pid: child.pid, stop };
}

/** The tools exactly as the runtime offers them: the registry's spec of `echo`. */
function wireTools(): ChatCompletionTool[] {
  return createToolRegistry([echoTool]).specs(['echo']).map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters as Record<string, unknown> },
  }));
}

function taskText(agentId: string): string {
  return `Agent ${agentId}: call echo until the script says you are done.`;
}

/**
 * One bare loop: a streamed request, the tool call assembled from its deltas, the assistant
 * message and the echo result appended, until the server answers without calls. A step's latency
 * is from sending its request to its tool result appended (or the final answer read).
 */
async function bareLoop(baseURL: string, tools: ChatCompletionTool[], maxSteps: number, latencies: number[]): Promise<{ steps: number; ok: boolean }> {
  const client = new OpenAI({ apiKey: API_KEY, baseURL, maxRetries: 0 });
  const agentId = newId('agent');
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: DEFAULT_INSTRUCTIONS },
    { role: 'user', content: taskText(agentId) },
  ];
  let steps = 0;
  while (steps < maxSteps) {
    const t0 = nowMs();
    const stream = await client.chat.completions.create({
      model: MODEL, messages, tools, stream: true, stream_options: { include_usage: true },
    });
    let content = '';
    let finish: string | null = null;
    let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.delta.content) content += choice.delta.content;
      for (const tc of choice.delta.tool_calls ?? []) {
        const call = (calls[tc.index] ??= { id: '', name: '', arguments: '' });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        call.arguments += tc.function?.arguments ?? '';
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    steps += 1;
    if (finish === null || usage === null) return { steps, ok: false };
    if (calls.length === 0) {
      latencies.push(nowMs() - t0);
      return { steps, ok: content !== '' };
    }
    const toolCalls: ChatCompletionMessageToolCall[] = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    messages.push({ role: 'assistant', content: content === '' ? null : content, tool_calls: toolCalls });
    for (const c of calls) {
      const result = await echoTool.execute(JSON.parse(c.arguments) as { text: string }, {
        workspace: '', callId: c.id, idempotencyKey: c.id,
      } as Parameters<typeof echoTool.execute>[1]);
      messages.push({ role: 'tool', tool_call_id: c.id, content: result.ok ? String(result.output) : `error: ${String(result.output)}` });
    }
    latencies.push(nowMs() - t0);
  }
  return { steps, ok: false };
}

async function runBare(baseURL: string, agents: number, steps: number, startCpu: StartCpu): Promise<ModelRun> {
  const tools = wireTools();
  const latencies: number[] = [];
  settleGc();
  const cpu = startCpu();
  const t0 = nowMs();
  const outcomes = await Promise.allSettled(Array.from({ length: agents }, () => bareLoop(baseURL, tools, steps + 2, latencies)));
  const wallMs = nowMs() - t0;
  const used = cpu.stop();
  let total = 0;
  let failed = 0;
  for (const o of outcomes) {
    if (o.status === 'fulfilled') total += o.value.steps;
    if (o.status === 'fulfilled' && o.value.ok && o.value.steps === steps + 1) continue;
    failed += 1;
    const why = o.status === 'rejected' ? (o.reason as Error).message : `ended after ${o.value.steps} step(s)`;
    process.stderr.write(`bare openai loop did not complete: ${why}\n`);
  }
  return { agents, steps: total, wallMs, latencies, failed, cpu: used };
}

/**
 * A agents on a fresh supervisor, one turn each, `openai:test-model` through the Chat Completions
 * adapter at the fake server. Step latency: ack of the commit holding `step/start` to the ack of
 * the one holding `step/end`, as in the tool-loop section.
 */
async function runActorloopModel(rt: BenchRuntime, baseURL: string, agents: number, steps: number, startCpu: StartCpu): Promise<ModelRun> {
  const latencies: number[] = [];
  const stepStarts = new Map<string, number>();
  let stepCount = 0;
  const sup = rt.supervisor({
    modelFor: async () => createOpenAIChatModel({ apiKey: API_KEY, baseURL, model: MODEL }),
    onCommit(_actorId, events) {
      const t = nowMs();
      for (const e of events) {
        if (e.type === 'step/start') {
          stepCount += 1;
          stepStarts.set(e.step!, t);
        } else if (e.type === 'step/end') {
          const s = stepStarts.get(e.step!);
          if (s !== undefined) latencies.push(t - s);
          stepStarts.delete(e.step!);
        }
      }
    },
  });
  const actors = await createAgents(sup, rt, agents);
  const ended = actors.map((a) => a.whenTurnEnds());
  const request = { ...benchTurnRequest(rt.workspace, steps + 2), model: `openai:${MODEL}`, baseUrl: baseURL };
  settleGc();
  const cpu = startCpu();
  const t0 = nowMs();
  await Promise.all(
    actors.map((a) =>
      sup.send({
        id: newId('message'), from: 'bench', to: a.actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
        content: taskText(a.actorId), request, sentAt: new Date().toISOString(),
      }),
    ),
  );
  const outcomes = await Promise.allSettled(ended);
  const wallMs = nowMs() - t0;
  const used = cpu.stop();
  await sup.stop();
  await Promise.allSettled(actors.map((a) => a.idle()));
  let failed = 0;
  for (const o of outcomes) {
    if (o.status === 'fulfilled' && o.value.outcome === 'completed') continue;
    failed += 1;
    const why = o.status === 'rejected' ? (o.reason as Error).message : `${o.value.outcome} (${o.value.reason})`;
    process.stderr.write(`actorloop agent (openai model) did not complete: ${why}\n`);
  }
  return { agents, steps: stepCount, wallMs, latencies, failed, cpu: used };
}

/** One run of one side against the fake server at `fake`, CPU measured over its timed window. */
export async function runOnce(rt: BenchRuntime, fake: FakeServer, impl: Impl, agents: number, steps: number): Promise<ModelRun> {
  const startCpu = cpuOfRun(rt, fake.pid);
  return impl === 'actorloop'
    ? runActorloopModel(rt, fake.baseURL, agents, steps, startCpu)
    : runBare(fake.baseURL, agents, steps, startCpu);
}

/** One side's figures at one configuration, each the median over runs (CPU: over all runs). */
interface ModelSummary {
  stepsPerSec: number;
  /** Mean time one agent spends per step: wall × A / steps. */
  msPerStep: number;
  p50: number;
  p99: number;
  perRun: number[];
  failed: number;
  /** µs per step over all runs; null where not read. */
  cpu: { processUs: number; mainUs: number | null; natsUs: number | null; fakeUs: number | null };
  /** CPU of all three processes over the wall time of all runs, in cores; null when one was not read. */
  coresBusy: number | null;
}

function summarize(runs: ModelRun[]): ModelSummary {
  const sps = runs.map((r) => r.steps / (r.wallMs / 1000));
  const steps = runs.reduce((n, r) => n + r.steps, 0);
  const wallUs = runs.reduce((n, r) => n + r.wallMs * 1000, 0);
  const per = (f: (c: CpuSample) => number | null): number | null => {
    const values = runs.map((r) => (r.cpu ? f(r.cpu) : null));
    return values.every((v) => v !== null) ? (values as number[]).reduce((a, b) => a + b, 0) / steps : null;
  };
  const cpu = { processUs: per((c) => c.processUs)!, mainUs: per((c) => c.mainUs), natsUs: per((c) => c.natsUs), fakeUs: per((c) => c.fakeUs) };
  const all = cpu.natsUs === null || cpu.fakeUs === null ? null : cpu.processUs + cpu.natsUs + cpu.fakeUs;
  return {
    stepsPerSec: median(sps),
    msPerStep: median(runs.map((r) => (r.wallMs * r.agents) / r.steps)),
    p50: median(runs.map((r) => percentile(r.latencies, 50))),
    p99: median(runs.map((r) => percentile(r.latencies, 99))),
    perRun: sps,
    failed: runs.reduce((n, r) => n + r.failed, 0),
    cpu,
    coresBusy: all === null ? null : (all * steps) / wallUs,
  };
}

/** Flags of the model section. */
export interface ModelFlags {
  steps: number;
  agents: number[];
  runs: number;
  /** The fake server's delay before each answer's first byte, ms; one configuration each. */
  firstByteMs: number[];
}

/** Results by first-byte delay, then by A, then by side. */
type ModelResults = Map<number, Map<number, Map<Impl, ModelSummary>>>;

/** Runs the model section and prints its tables; every fake server is stopped before it returns. */
export async function runModelOverhead(rt: BenchRuntime, cleanup: Cleanup, flags: ModelFlags): Promise<void> {
  const started = nowMs();
  const results: ModelResults = new Map();
  for (const delay of flags.firstByteMs) {
    const fake = await startFakeServer(flags.steps, cleanup, delay);
    const byA = new Map<number, Map<Impl, ModelSummary>>();
    results.set(delay, byA);
    try {
      // warm-up (not reported): the adapter, the SDK, keep-alive connections, the server's JIT
      for (const impl of IMPLS) await runOnce(rt, fake, impl, Math.max(...flags.agents), flags.steps);
      for (const a of flags.agents) {
        const runs = new Map<Impl, ModelRun[]>(IMPLS.map((i) => [i, []]));
        // interleaved, so drift on the machine touches both sides alike
        for (let r = 0; r < flags.runs; r++) {
          for (const impl of IMPLS) runs.get(impl)!.push(await runOnce(rt, fake, impl, a, flags.steps));
        }
        byA.set(a, new Map(IMPLS.map((i) => [i, summarize(runs.get(i)!)])));
        process.stderr.write(`model first byte ${delay} ms, A=${a} done (${((nowMs() - started) / 1000).toFixed(0)} s)\n`);
      }
    } finally {
      await fake.stop();
    }
  }
  printModel(results, flags);
}

/** actorloop's mean time per step over the bare client's, minus 1, in percent; and the difference in ms. */
function added(byImpl: Map<Impl, ModelSummary>): { pct: number; ms: number } {
  const ours = byImpl.get('actorloop')!.msPerStep;
  const bare = byImpl.get('bare openai client')!.msPerStep;
  return { pct: 100 * (ours / bare - 1), ms: ours - bare };
}

const signed = (x: number, digits: number): string => `${x >= 0 ? '+' : ''}${x.toFixed(digits)}`;
const us = (x: number | null): string => (x === null ? '-' : x.toFixed(0));

function printModel(results: ModelResults, flags: ModelFlags): void {
  console.log('');
  console.log(`== model attempts through a fake OpenAI server (streamed Chat Completions, ${flags.steps} echo steps) vs the bare openai client ==`);
  const rows: string[][] = [];
  const cpuRows: string[][] = [];
  for (const [delay, byA] of results) {
    for (const [a, byImpl] of byA) {
      const add = added(byImpl);
      for (const impl of IMPLS) {
        const s = byImpl.get(impl)!;
        const ours = impl === 'actorloop';
        rows.push([
          String(delay), String(a), impl, s.stepsPerSec.toFixed(0), fmtMs(s.msPerStep), fmtMs(s.p50), fmtMs(s.p99),
          ours ? `${signed(add.pct, 0)}%` : '-', ours ? signed(add.ms, 2) : '-',
          s.perRun.map((x) => x.toFixed(0)).join(', '), String(s.failed),
        ]);
        const c = s.cpu;
        const all = c.natsUs === null || c.fakeUs === null ? null : c.processUs + c.natsUs + c.fakeUs;
        cpuRows.push([
          String(delay), String(a), impl, us(c.processUs), us(c.mainUs), us(c.natsUs), us(c.fakeUs), us(all),
          s.coresBusy === null ? '-' : s.coresBusy.toFixed(2),
        ]);
      }
    }
  }
  console.log(table(
    ['first byte ms', 'A', 'impl', 'steps/s', 'mean ms/step', 'p50 ms', 'p99 ms', 'added per step', 'added ms/step', 'steps/s of each run', 'failed agents'],
    rows,
  ));
  console.log('');
  console.log(table(
    ['first byte ms', 'A', 'impl', 'this process µs/step', 'main thread µs/step', 'nats-server µs/step', 'fake server µs/step', 'all three µs/step', `cores busy (of ${cpus().length})`],
    cpuRows,
  ));
  console.log(
    [
      `notes: the fake OpenAI-compatible server (test/helpers/fake-openai.ts) runs in its own node process on loopback and`,
      `  streams each answer (role chunk, the echo call's header and argument pieces of 8 chars, finish, usage chunk), its`,
      '  first byte after "first byte ms" (0: at once; a delay stands for a hosted model\'s time to first token). A step is one',
      `  model response (${flags.steps} echo calls + the final answer = ${flags.steps + 1} requests per agent). Both sides send the same`,
      '  system prompt and tool spec and grow the same message list; the bare side is `new OpenAI({maxRetries: 0})` +',
      '  chat.completions.create(stream, include_usage), assembling the call and running echo, with no log at all.',
      `  Median over ${flags.runs} run(s). steps/s = all agents' steps / wall time (first request or message to last turn`,
      '  ended); mean ms/step = wall × A / steps, the time one agent spends per step; added per step = actorloop\'s mean',
      '  ms/step over the bare client\'s, minus 1 (and the difference in ms). p50/p99: bare, request sent to tool result',
      '  appended; actorloop, ack of the commit holding step/start to the ack of the one holding step/end (it leaves out',
      '  the work between steps). CPU: over the timed windows of all runs / their steps, nats-server and the fake server',
      '  from /proc (Linux, 10 ms ticks; - where not read); cores busy = the three processes\' CPU / wall time. Where it',
      '  nears the core count, the machine is the limit and the added time per step is the added CPU.',
    ].join('\n'),
  );
  const at10 = results.get(0)?.get(10);
  const a10 = at10 ? added(at10).pct : null;
  const others = [...results].filter(([d, byA]) => d > 0 && byA.has(10)).map(([d, byA]) => `${signed(added(byA.get(10)!).pct, 1)}% with the first byte after ${d} ms`);
  console.log(
    `target (issue 3): the runtime adds ≤ 15% to the bare client's time per step at A=10, the fake server answering at once ` +
      `[${a10 === null ? 'not measured' : `${signed(a10, 0)}%: ${a10 <= 15 ? 'met' : 'MISSED'}`}]` +
      (others.length > 0 ? `; ${others.join(', ')}` : ''),
  );
}
