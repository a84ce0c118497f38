/**
 * The gateway section of the tool-loop bench (`--gateway-agents 100`): the gateway started
 * in-process on the bench's runtime (`startGateway`, as `actorloop serve` starts it), A agents
 * running the tool loop, and one client connection (a WebSocket to `/v1/rpc`, one
 * `events.subscribe` per agent: the stream SSE serves too, `src/server/event-stream.ts`) that
 * receives every agent's events. Measured: commit → event at the client (the commit's time from
 * the supervisor's onCommit, the arrival from the client, one clock), and the events per second
 * that one connection carried. Then the tool loop at each A with the gateway running and no
 * client, against without it, runs interleaved. Prints tables; never asserts.
 */
import { randomBytes } from 'node:crypto';
import { GatewayClient } from '../src/client/gateway-client.js';
import { machineDefinitions } from '../src/client/machine-definitions.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ScriptResponse } from '../src/model/script.js';
import { ConfigError } from '../src/protocol/errors.js';
import { startGateway, type Gateway, type GatewayCommands } from '../src/server/gateway.js';
import { createLogReader } from '../src/store/jetstream-log.js';
import { createRedactor } from '../src/tools/redact.js';
import type { BenchRuntime } from './harness.js';
import { fmtMs, median, nowMs, percentile, table } from './stats.js';
import { createAgents, runActorloop, sendTasks, toolLoopScript, type RunResult } from './workload.js';

/** The bench sends no command through the gateway: every one is refused. */
const NO_COMMANDS: GatewayCommands = new Proxy({} as GatewayCommands, {
  get: () => async () => {
    throw new ConfigError('bench.no_commands', 'the bench gateway takes no commands');
  },
});

/** The bench gateway's token: every request is checked, as `serve` checks them. */
const BENCH_TOKEN = randomBytes(32).toString('base64url');

/** The gateway on the bench's runtime, on a free loopback port, redacting and checking the token as `serve` does. */
function startBenchGateway(rt: BenchRuntime): Promise<Gateway> {
  const redactor = createRedactor();
  return startGateway({
    host: '127.0.0.1', port: 0, token: BENCH_TOKEN, corsOrigins: [], allowFaults: false,
    reader: createLogReader({ js: rt.bus.js, jsm: rt.bus.jsm }), directory: rt.bus.directory,
    redact: (text) => redactor.redact(text).text, machines: machineDefinitions().machines, commands: NO_COMMANDS, logger: rt.logger,
  });
}

/** What one streamed run measured. */
interface StreamResult {
  /** Commit → arrival at the client, ms, one sample per event. */
  latencies: number[];
  committed: number;
  received: number;
  /** Events received / first to last arrival, s. */
  eventsPerSec: number;
  /** Events committed / first to last commit, s: what the tool loop offered the connection. */
  offeredPerSec: number;
  stepsPerSec: number;
}

/** A agents' tool loop with one client subscribed to every agent's events. */
async function runStreamed(rt: BenchRuntime, agents: number, script: ScriptResponse[]): Promise<StreamResult> {
  const committedAt = new Map<string, number>();
  let measuring = false;
  let steps = 0;
  const sup = rt.supervisor({
    modelFor: async (_settings, cursor) => createScriptedModel({ responses: script, cursor, record: false }),
    onCommit(actorId, events) {
      if (!measuring) return;
      const t = nowMs();
      for (const e of events) {
        committedAt.set(`${actorId}:${e.seq}`, t);
        if (e.type === 'step/start') steps += 1;
      }
    },
  });
  const gateway = await startBenchGateway(rt);
  const client = await GatewayClient.connect({ url: gateway.url, token: BENCH_TOKEN });
  const arrivals: { key: string; at: number }[] = [];
  try {
    const actors = await createAgents(sup, rt, agents);
    const ended = actors.map((a) => a.whenTurnEnds());
    for (const a of actors) {
      await client.subscribeEvents({ agentId: a.actorId }, (e) => {
        arrivals.push({ key: `${e.actor}:${String(e.event.seq)}`, at: nowMs() });
      }, (err) => process.stderr.write(`gateway bench: subscription ended: ${err.message}\n`));
    }
    // each subscription's consumer is made after its answer: let them start before the clock does
    await new Promise((r) => setTimeout(r, 500));
    arrivals.length = 0;
    measuring = true;
    const t0 = nowMs();
    await sendTasks(sup, rt, actors, script.length + 1);
    await Promise.allSettled(ended);
    const wallMs = nowMs() - t0;
    measuring = false;
    // the last events are on their way: wait for them (bounded: a lost one is a count short, not a hang)
    const until = nowMs() + 10_000;
    const seen = (): number => arrivals.filter((a) => committedAt.has(a.key)).length;
    while (seen() < committedAt.size && nowMs() < until) await new Promise((r) => setTimeout(r, 20));
    await sup.stop();
    const latencies: number[] = [];
    const times: number[] = [];
    for (const a of arrivals) {
      const c = committedAt.get(a.key);
      if (c === undefined) continue;
      latencies.push(a.at - c);
      times.push(a.at);
    }
    const commits = [...committedAt.values()];
    const span = (xs: number[]): number => (xs.length > 1 ? (Math.max(...xs) - Math.min(...xs)) / 1000 : NaN);
    return {
      latencies, committed: committedAt.size, received: latencies.length,
      eventsPerSec: latencies.length / span(times), offeredPerSec: commits.length / span(commits), stepsPerSec: steps / (wallMs / 1000),
    };
  } finally {
    client.close();
    await gateway.close();
  }
}

/** Options of the gateway section. */
export interface GatewayBenchOptions {
  /** Agents whose events the one client receives. */
  agents: number;
  /** Agent counts of the tool loop with and without the gateway (empty: that part left out). */
  loopAgents: number[];
  steps: number;
  runs: number;
}

/** Runs and prints the gateway section. */
export async function runGatewaySection(rt: BenchRuntime, o: GatewayBenchOptions): Promise<void> {
  const script = toolLoopScript(o.steps);
  await runStreamed(rt, Math.min(10, o.agents), script); // warm-up, not reported
  const streamed: StreamResult[] = [];
  for (let r = 0; r < o.runs; r++) streamed.push(await runStreamed(rt, o.agents, script));
  console.log('');
  console.log(`== gateway: ${o.agents} agents' events to one client connection ==`);
  console.log(table(
    ['run', 'events committed', 'received', 'commit → client p50 ms', 'p99 ms', 'events/s carried', 'events/s committed', 'steps/s'],
    streamed.map((s, i) => [
      String(i + 1), String(s.committed), String(s.received), fmtMs(percentile(s.latencies, 50)), fmtMs(percentile(s.latencies, 99)),
      s.eventsPerSec.toFixed(0), s.offeredPerSec.toFixed(0), s.stepsPerSec.toFixed(0),
    ]),
  ));
  console.log(
    '  one WebSocket to /v1/rpc, one events.subscribe per agent (the event stream SSE serves), client in this process:\n' +
      '  commit time = the supervisor\'s onCommit (the PubAck is in), arrival = the notification parsed at the client.\n' +
      '  events/s carried is bounded by what the loop commits (events/s committed), not a ceiling of the connection.',
  );
  if (o.loopAgents.length === 0) return;
  const runs = new Map<string, RunResult[]>();
  for (const a of o.loopAgents) {
    for (let r = 0; r < o.runs; r++) {
      // interleaved, so drift on the machine touches both alike
      runs.set(`${a}:without`, [...(runs.get(`${a}:without`) ?? []), await runActorloop(rt, a, script)]);
      const gateway = await startBenchGateway(rt);
      try {
        runs.set(`${a}:with`, [...(runs.get(`${a}:with`) ?? []), await runActorloop(rt, a, script)]);
      } finally {
        await gateway.close();
      }
    }
  }
  const sps = (rs: RunResult[]): number => median(rs.map((r) => r.steps / (r.wallMs / 1000)));
  console.log('');
  console.log('== tool loop with the gateway running (no client) against without ==');
  console.log(table(
    ['config (A)', 'without steps/s', 'with gateway steps/s', 'with / without', 'p99 step ms without', 'with'],
    o.loopAgents.map((a) => {
      const w = runs.get(`${a}:without`)!;
      const g = runs.get(`${a}:with`)!;
      return [
        String(a), sps(w).toFixed(0), sps(g).toFixed(0), `${((100 * sps(g)) / sps(w)).toFixed(0)}%`,
        fmtMs(median(w.map((r) => percentile(r.latencies, 99)))), fmtMs(median(g.map((r) => percentile(r.latencies, 99)))),
      ];
    }),
  ));
  console.log(`  medians over ${o.runs} run(s) each, ${o.steps} echo steps + an answer per agent.`);
}
