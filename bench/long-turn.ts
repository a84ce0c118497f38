import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { deltaKey } from '../src/store/blob-port.js';
import type { BenchRuntime } from './harness.js';
import { median, nowMs, table } from './stats.js';
import { createAgents, sendTasks } from './workload.js';

/** Flags of the long-turn section. */
export interface LongTurnFlags {
  /** Echo steps in the turn. */
  steps: number;
  /** Bytes of each echo's text (the tool result the history keeps). */
  resultBytes: number;
  runs: number;
}

interface LongTurnRun {
  /** Wall time per step over the first and the last fifth of the turn, ms. */
  earlyMs: number;
  lateMs: number;
  cpuMsPerStep: number;
  /** Bytes of the prepared request bodies, and what the blob store kept for them. */
  bodyBytes: number;
  storedBytes: number;
}

/** The script of one long turn: `steps` echoes of `resultBytes` each, then an answer. */
function longScript(steps: number, resultBytes: number): ScriptResponse[] {
  const text = 'x'.repeat(resultBytes);
  const usage = { input_tokens: 100, output_tokens: 10 };
  return [
    ...Array.from({ length: steps }, (_, i): ScriptResponse => ({ tool_calls: [{ name: 'echo', arguments: { text: `${i} ${text}` } }], usage })),
    { content: 'done', usage },
  ];
}

async function runOnce(rt: BenchRuntime, flags: LongTurnFlags): Promise<LongTurnRun> {
  const script = longScript(flags.steps, flags.resultBytes);
  const starts: number[] = [];
  const prepared: Array<{ digest: string; bytes: number }> = [];
  const sup = rt.supervisor({
    modelFor: async (_s, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit(_actorId, events: ActorEvent[]) {
      for (const e of events) {
        if (e.type === 'step/start') starts.push(nowMs());
        if (e.type === 'request/prepared') prepared.push({ digest: e.data.digest, bytes: e.data.bytes });
      }
    },
  });
  const [actor] = await createAgents(sup, rt, 1);
  const ended = actor!.whenTurnEnds();
  const cpu0 = process.cpuUsage();
  await sendTasks(sup, rt, [actor!], flags.steps + 5);
  await ended;
  const end = nowMs();
  const cpu = process.cpuUsage(cpu0);
  await sup.stop();
  await rt.blobs.flush();
  starts.push(end);
  const per = (from: number, to: number) => (starts[to]! - starts[from]!) / (to - from);
  const fifth = Math.max(1, Math.floor((starts.length - 1) / 5));
  let storedBytes = 0;
  for (const p of prepared) {
    storedBytes += (rt.lmdb.blobs.getBinary(p.digest) ?? rt.lmdb.blobs.getBinary(deltaKey(p.digest)))?.length ?? 0;
  }
  return {
    earlyMs: per(0, fifth),
    lateMs: per(starts.length - 1 - fifth, starts.length - 1),
    cpuMsPerStep: (cpu.user + cpu.system) / 1000 / (starts.length - 1),
    bodyBytes: prepared.reduce((n, p) => n + p.bytes, 0),
    storedBytes,
  };
}

/**
 * One agent's long turn: `steps` echo steps whose results the history keeps, on the durable
 * runtime with snapshots every 64 events. A step's cost must not grow with the turn: the late
 * steps' time against the early ones' shows any work that is repeated for the whole history.
 */
export async function runLongTurn(rt: BenchRuntime, flags: LongTurnFlags): Promise<void> {
  await runOnce(rt, { ...flags, steps: Math.min(flags.steps, 50) }); // warm-up
  const runs: LongTurnRun[] = [];
  for (let r = 0; r < flags.runs; r++) runs.push(await runOnce(rt, flags));
  const mb = (b: number) => (b / 2 ** 20).toFixed(1);
  console.log('');
  console.log(`== one long turn: ${flags.steps} echo steps of ${flags.resultBytes} B results (median of ${flags.runs} runs) ==`);
  console.log(
    table(
      ['ms/step, first fifth', 'ms/step, last fifth', 'CPU ms/step', 'request bodies MB', 'request blobs stored MB'],
      [[
        median(runs.map((r) => r.earlyMs)).toFixed(2), median(runs.map((r) => r.lateMs)).toFixed(2),
        median(runs.map((r) => r.cpuMsPerStep)).toFixed(2), mb(median(runs.map((r) => r.bodyBytes))), mb(median(runs.map((r) => r.storedBytes))),
      ]],
    ),
  );
  console.log(
    '  wall time per step between step/start commits; CPU of the whole process over the turn. Request bodies: the\n' +
      '  sum of the prepared requests\' sizes; stored: what the blob store kept for them (a body continuing the last is\n' +
      '  kept as what it adds, whole every 16th).',
  );
}
