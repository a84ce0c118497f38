/**
 * The tool pipeline benchmark (issue 4): what the pipeline adds to a tool call — resolve,
 * validate, policy, plan digest, the tool/start intent, the execution wrapper, observation
 * shaping and redaction, the result — beyond the commits it needs. The log is in memory (each
 * commit is validated and encoded as the JetStream writer does, then resolves at once), so what
 * is measured is CPU, not NATS. Against it, the same no-op tool's `execute` called directly in
 * the same run. Target: ≤ 2 ms per call at p50.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { AgentActor } from '../src/actors/actor/agent-actor.js';
import { createFaultInjector } from '../src/actors/faults/faults.js';
import { defaultTooling } from '../src/actors/agent/tooling.js';
import type { ModelAdapter } from '../src/model/model-port.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import { emptyProjection } from '../src/store/projection.js';
import { createToolRegistry } from '../src/tools/registry.js';
import type { ToolContext, ToolDefinition } from '../src/tools/tool.js';
import { benchTurnRequest } from './harness.js';
import { memoryLog, noBlobs } from './no-io.js';
import { fmtMs, median, nowMs, percentile, table } from './stats.js';

/** When the no-op tool's runs began and ended in the current step. */
let runs: Array<[number, number]> = [];

const noop: ToolDefinition<{ n: number }> = {
  name: 'noop',
  version: '1',
  description: 'Do nothing',
  input: z.strictObject({ n: z.number().int() }),
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  async execute(input) {
    const start = nowMs();
    const result = { ok: true, output: `ok ${input.n}` };
    runs.push([start, nowMs()]);
    return result;
  },
};

/** Per-step samples of one run. */
interface PipelineRun {
  /** Model answer → every result committed, minus the tools' own run time (ms per step). */
  overhead: number[];
  /** The tool's `execute` called directly, ms. */
  direct: number[];
}

async function runOnce(callsPerStep: number, steps: number, workspace: string): Promise<PipelineRun> {
  const call = (i: number): ScriptResponse['tool_calls'] => Array.from({ length: callsPerStep }, (_, k) => ({ name: 'noop', arguments: { n: i * 100 + k } }));
  const script: ScriptResponse[] = [...Array.from({ length: steps }, (_, i) => ({ tool_calls: call(i) })), { content: 'done' }];
  const out: PipelineRun = { overhead: [], direct: [] };
  let modelEnd = 0;
  let shaped = 0;
  // The pipeline's last act before staging a result is redacting its output: a stamp there ends
  // the call's measurement, before the step ends and the next request is prepared (model work).
  const base = defaultTooling().redactor;
  const redactor = {
    ...base,
    redact(text: string) {
      const r = base.redact(text);
      shaped += 1;
      if (shaped === callsPerStep) {
        const toolTime = runs.reduce((sum, [a, b]) => sum + (b - a), 0);
        out.overhead.push(nowMs() - modelEnd - toolTime);
        runs = [];
        shaped = 0;
      }
      return r;
    },
  };
  const onCommit = (_events: ActorEvent[]): void => {};
  const timedModel = (inner: ModelAdapter): ModelAdapter => ({
    ...inner,
    provider: inner.provider,
    capabilities: (m) => inner.capabilities(m),
    prepare: (r) => inner.prepare(r),
    classifyError: (e) => inner.classifyError(e),
    async *stream(prepared, signal) {
      // the caller may stop reading at the final event: stamp every event, the last one counts
      for await (const event of inner.stream(prepared, signal)) {
        modelEnd = nowMs();
        yield event;
      }
    },
  });
  const actorId = newId('agent');
  const actor = new AgentActor({
    actorId,
    rootId: actorId,
    projection: emptyProjection(actorId),
    machines: null,
    snapshotEvery: 1_000_000,
    snapshotSeq: 0,
    ports: {
      log: memoryLog(actorId),
      blobs: noBlobs,
      snapshots: null,
      tools: createToolRegistry([noop]),
      tooling: defaultTooling({ redactor }),
      modelFor: async (_s, cursor) => timedModel(createScriptedModel({ responses: script, cursor, record: false })),
      clock: { nowMs: () => Date.now() },
      faults: createFaultInjector([]),
      logger: pino({ level: 'silent' }),
      onCommit,
    },
  });
  actor.open();
  const ended = actor.whenTurnEnds();
  await actor.receive({
    id: newId('message'), from: 'bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: 'go', request: { ...benchTurnRequest(workspace, steps + 1), tools: ['noop'] }, sentAt: new Date().toISOString(),
  });
  await ended;
  actor.stop();
  // the same tool, called directly in the same process, as often
  const ctx = { signal: new AbortController().signal } as ToolContext;
  for (let i = 0; i < steps * callsPerStep; i++) {
    const t = nowMs();
    await noop.execute({ n: i }, ctx);
    out.direct.push(nowMs() - t);
  }
  runs = [];
  return out;
}

/** Runs the pipeline section and prints its table. */
export async function runToolPipelineBench(opts: { steps: number; runs: number; workspace: string }): Promise<void> {
  await runOnce(1, 50, opts.workspace); // warm-up: JIT, schemas
  const rows: string[][] = [];
  let perCallP50 = Number.POSITIVE_INFINITY;
  for (const batch of [1, 8]) {
    const p50s: number[] = [];
    const p99s: number[] = [];
    const direct: number[] = [];
    for (let r = 0; r < opts.runs; r++) {
      const run = await runOnce(batch, opts.steps, opts.workspace);
      p50s.push(percentile(run.overhead, 50));
      p99s.push(percentile(run.overhead, 99));
      direct.push(percentile(run.direct, 50));
    }
    const p50 = median(p50s);
    if (batch === 1) perCallP50 = p50;
    rows.push([
      batch === 1 ? '1 call per step' : `batch of ${batch} parallel calls`,
      fmtMs(median(direct) * batch),
      fmtMs(p50),
      fmtMs(median(p99s)),
      fmtMs(p50 / batch),
    ]);
  }
  console.log('');
  console.log(`== tool pipeline: no-op tool, policy allow, log in memory (${opts.steps} steps × ${opts.runs} runs, medians) ==`);
  console.log(table(['calls', 'direct execute p50', 'pipeline p50', 'pipeline p99', 'pipeline p50 per call'], rows));
  console.log(
    'notes: pipeline = from the model answer until the last result of the step is shaped (redacted, cut to the budget), minus the ' +
      "tools' own run time: accept, resolve, validate, policy, plan digest, the tool/start intent and its commit, the execution " +
      'wrapper. Commits are validated and encoded but not sent (NATS is measured in the tool-loop section).',
  );
  console.log(`target (issue): ≤ 2 ms per call at p50 beyond its commits [${perCallP50.toFixed(3)} ms: ${perCallP50 <= 2 ? 'met' : 'MISSED'}]`);
}
