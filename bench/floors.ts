import type { JetStreamClient } from '@nats-io/jetstream';
import { pino } from 'pino';
import { ensureStream, STREAM_CONFIGS } from '../src/bus/streams.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ToolContext } from '../src/tools/tool.js';
import { echoTool, type EchoInput } from './echo-tool.js';
import type { BenchRuntime } from './harness.js';
import { cpuMeter, settleGc, nowMs, sampleRss } from './stats.js';
import type { RunResult } from './workload.js';

/** The floor's stream: the LOGS stream's settings on its own subjects. */
export const FLOOR_STREAM = 'BENCH_FLOOR';

/** Creates the floor's stream (file storage, limits retention, 2 min dedupe window, like LOGS). */
export async function ensureFloorStream(rt: BenchRuntime): Promise<void> {
  await ensureStream(rt.bus.jsm, { ...STREAM_CONFIGS.logs, name: FLOOR_STREAM, subjects: ['benchfloor.>'] }, rt.logger);
}

// The fake model: hands back the next response, nothing else (no streaming, no request body).
async function fakeModel(script: ScriptResponse[], index: number): Promise<ScriptResponse> {
  return script[index]!;
}

const echoCtx: ToolContext = {
  workspace: '.', callId: 'call_floor', idempotencyKey: 'floor', epoch: 1,
  signal: new AbortController().signal, logger: pino({ level: 'silent' }),
  env: {}, sandbox: { bwrapPath: null, network: false, envAllow: [] }, artifacts: { read: async () => undefined },
};

type Commit = (body: unknown) => Promise<void>;

/**
 * One agent's loop without the runtime. With `commit` it makes the same two acked writes per step
 * the log does: the step's intent before the model call (holding the previous step's end), and
 * the tool's start before the tool runs; the final answer's write ends the last step.
 * A step's latency runs from its first write's ack to the ack of the write that ends it.
 */
async function floorAgent(script: ScriptResponse[], latencies: number[], commit: Commit | null): Promise<number> {
  const history: unknown[] = [];
  let started = 0;
  for (let i = 0; ; i++) {
    if (commit) await commit({ type: 'step/start', index: i + 1, messages: history.length });
    const t = nowMs();
    if (i > 0) latencies.push(t - started);
    started = t;
    const response = await fakeModel(script, i);
    history.push({ role: 'assistant', content: response.content ?? null, toolCalls: response.tool_calls ?? [] });
    const call = response.tool_calls?.[0];
    if (!call) {
      if (commit) await commit({ type: 'turn/end', outcome: 'completed', answer: response.content ?? null });
      latencies.push(nowMs() - started);
      return i + 1;
    }
    if (commit) await commit({ type: 'tool/start', name: call.name, input: call.arguments });
    const result = await echoTool.execute(call.arguments as EchoInput, echoCtx);
    history.push({ role: 'tool', output: result.output });
  }
}

let runCounter = 0;

/** An acked JetStream publish per call, fenced and deduped exactly like a log commit. */
function floorCommitter(js: JetStreamClient, run: string, agent: number, padBytes: number): Commit {
  const subject = `benchfloor.${run}.a${agent}`;
  const pad = 'x'.repeat(padBytes);
  let last = 0;
  let n = 0;
  return async (body) => {
    n += 1;
    const ack = await js.publish(subject, JSON.stringify(padBytes > 0 ? { body, pad } : body), {
      msgID: `${run}.${agent}:${n}`,
      expect: { lastSubjectSequence: last },
    });
    last = ack.seq;
  };
}

/**
 * Runs `agents` floor loops at once; `durable` adds the two acked publishes per step, each
 * padded by `padBytes` (`--floor-pad`: what message size alone costs the floor).
 */
export async function runFloor(rt: BenchRuntime, agents: number, script: ScriptResponse[], durable: boolean, padBytes = 0): Promise<RunResult> {
  const run = `r${++runCounter}`;
  const latencies: number[] = [];
  const commits = Array.from({ length: agents }, (_, i) => (durable ? floorCommitter(rt.bus.js, run, i, padBytes) : null));
  settleGc();
  const rss = sampleRss();
  const cpu = cpuMeter(durable ? rt.nats.pid : undefined);
  const t0 = nowMs();
  const settled = await Promise.allSettled(commits.map((c) => floorAgent(script, latencies, c)));
  const wallMs = nowMs() - t0;
  const used = cpu.stop();
  const peakRss = rss.stop();
  let steps = 0;
  let failed = 0;
  for (const s of settled) {
    if (s.status === 'fulfilled') steps += s.value;
    else {
      failed += 1;
      process.stderr.write(`floor agent failed: ${(s.reason as Error).message}\n`);
    }
  }
  return { steps, wallMs, latencies, peakRss, commits: durable ? steps * 2 : null, failed, cpu: used };
}
