import type { Supervisor } from '../src/actors/hosting/supervisor.js';
import { createScriptedModel } from '../src/model/scripted-model.js';
import type { ModelAdapter } from '../src/model/model-port.js';
import type { ScriptResponse } from '../src/model/script.js';
import type { ActorEvent } from '../src/protocol/events.js';
import { newId } from '../src/protocol/ids.js';
import type { InboxMessage } from '../src/protocol/inbox.js';
import { benchTurnRequest, type BenchRuntime } from './harness.js';
import { fmtMs, median, nowMs, percentile, settleGc, table } from './stats.js';

/** When the model of an agent's current attempt was called, and when it handed over its answer. */
interface ModelMarks {
  called: Array<{ at: number }>;
  calledWaiters: Array<() => void>;
  doneAt: number[];
}

/** Host time (ms, `nowMs`) of every commit of one agent, by event type, as `onCommit` saw its ack. */
interface CommitMarks {
  /** Each commit: its ack time and its events' types. */
  commits: Array<{ at: number; types: string[] }>;
  waiters: Array<{ test: (e: ActorEvent) => boolean; resolve: (at: number) => void }>;
}

/** One steer: the PubAck, the commit that included it, and what happened between. */
export interface SteerSample {
  /** How far into the model's wait the steer's PubAck came (ms after `stream` was called). */
  intoAttemptMs: number;
  /** The model's first-byte delay left at the PubAck: `firstByteMs − intoAttemptMs`. */
  remainingMs: number;
  /** PubAck → the ack of the commit holding the `request/prepared` whose messageIds name it. */
  latencyMs: number;
  /** PubAck → the ack of the commit holding its `inbox/received` (delivery to the actor + one commit). */
  receivedMs: number;
  /** The model's `done` after its delay was due (timer lateness, stream chunks). */
  modelLateMs: number;
  /** The model's `done` → the commit of the prepared request (the step boundary: tool, commits). */
  boundaryMs: number;
  /** Commits acked between the model's `done` and the prepared request, that one included. */
  boundaryCommits: number;
  /** Their event types, one `+`-joined string a commit. */
  boundaryTypes: string[];
}

/** One interrupt: its PubAck to the commit of `turn/end` cancelled, and the commits between. */
export interface InterruptSample {
  intoAttemptMs: number;
  /** PubAck → the ack of the commit holding `turn/end` with outcome `cancelled`. */
  latencyMs: number;
  /** PubAck → the ack of the commit holding `interrupt/requested`. */
  requestedMs: number;
  /** Commits acked after the PubAck up to the one with `turn/end`, that one included. */
  commits: number;
}

/** The turn every sample runs: one echo step whose model answer waits `firstByteMs`, then an answer. */
function steerScript(firstByteMs: number): ScriptResponse[] {
  return [
    { tool_calls: [{ name: 'echo', arguments: { text: 'first' } }], delay_ms: firstByteMs },
    { content: 'Steered and done.' },
  ];
}

/** A model that keeps streaming (never reaches its first byte) until the interrupt aborts it. */
const INTERRUPT_SCRIPT: ScriptResponse[] = [{ tool_calls: [{ name: 'echo', arguments: { text: 'never' } }], delay_ms: 600_000 }];

/** Wraps an adapter so the bench sees when each attempt called the model and when it answered. */
function timedModel(inner: ModelAdapter, marks: ModelMarks): ModelAdapter {
  return {
    // the scripted adapter's methods are closures, not `this`-bound: a spread keeps them working
    ...inner,
    async *stream(prepared, signal) {
      marks.called.push({ at: nowMs() });
      for (const w of marks.calledWaiters.splice(0)) w();
      for await (const ev of inner.stream(prepared, signal)) {
        if (ev.type === 'done') marks.doneAt.push(nowMs());
        yield ev;
      }
    },
  };
}

/** One supervisor for a section: per agent, its model calls and its commits with their ack times. */
function instrumented(rt: BenchRuntime, script: ScriptResponse[]) {
  const models = new Map<string, ModelMarks>();
  const commits = new Map<string, CommitMarks>();
  const modelMarks = (id: string) => {
    let m = models.get(id);
    if (!m) models.set(id, (m = { called: [], calledWaiters: [], doneAt: [] }));
    return m;
  };
  const commitMarks = (id: string) => {
    let m = commits.get(id);
    if (!m) commits.set(id, (m = { commits: [], waiters: [] }));
    return m;
  };
  // the turn's settings name no agent; the bench runs one agent at a time, so the last created is it
  let current = '';
  const sup: Supervisor = rt.supervisor({
    modelFor: async (_settings, cursor) => {
      const inner = createScriptedModel({ responses: script, cursor, record: false });
      return timedModel(inner, modelMarks(current));
    },
    onCommit(actorId, events) {
      const at = nowMs();
      const m = commitMarks(actorId);
      m.commits.push({ at, types: events.map((e) => e.type) });
      m.waiters = m.waiters.filter((w) => {
        if (!events.some(w.test)) return true;
        w.resolve(at);
        return false;
      });
    },
  });
  return {
    sup,
    /** Creates an agent and makes it the one the model marks are for. */
    async agent() {
      const actorId = newId('agent');
      current = actorId;
      const actor = await sup.create({ actorId, kind: 'agent', parentId: null, rootId: actorId, title: 'inbox-latency bench', workspace: rt.workspace, labels: {} });
      return { actor, model: modelMarks(actorId), commits: commitMarks(actorId) };
    },
    /** Resolves with the ack time of the first commit from now on holding an event `test` accepts. */
    commitOf(actorId: string, test: (e: ActorEvent) => boolean): Promise<number> {
      return new Promise((resolve) => commitMarks(actorId).waiters.push({ test, resolve }));
    },
  };
}

/** Resolves once the model has been called `n` times (the `n`th attempt started streaming). */
function modelCalled(m: ModelMarks, n: number): Promise<number> {
  return new Promise((resolve) => {
    const check = () => (m.called.length >= n ? resolve(m.called[n - 1]!.at) : m.calledWaiters.push(check));
    check();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function personMessage(to: string, kind: 'steer' | 'interrupt'): InboxMessage {
  return {
    id: newId('message'), from: 'client:bench', to, kind,
    target: kind === 'steer' ? 'next_step' : 'now', wakeup: true,
    content: kind === 'steer' ? 'Also say which file you echoed.' : 'interrupted',
    request: null, sentAt: new Date().toISOString(),
  };
}

function startTurn(sup: Supervisor, rt: BenchRuntime, actorId: string): Promise<void> {
  return sup.send({
    id: newId('message'), from: 'client:bench', to: actorId, kind: 'user_message', target: 'next_turn', wakeup: true,
    content: `Agent ${actorId}: call echo, then answer.`, request: benchTurnRequest(rt.workspace, 4), sentAt: new Date().toISOString(),
  });
}

/** Spreads `count` send offsets evenly over [lo, hi] ms into the attempt. */
function offsets(count: number, lo: number, hi: number): number[] {
  return Array.from({ length: count }, (_, i) => (count === 1 ? lo : lo + ((hi - lo) * i) / (count - 1)));
}

/**
 * Steers, one agent at a time: each agent's first model answer (a call to echo) waits
 * `firstByteMs`; a steer is published at a point spread over that wait, and the sample runs from
 * its PubAck to the ack of the commit whose `request/prepared` includes it (the next step's).
 */
export async function runSteerLatency(rt: BenchRuntime, samples: number, firstByteMs: number): Promise<{ samples: SteerSample[]; failed: number }> {
  const inst = instrumented(rt, steerScript(firstByteMs));
  const out: SteerSample[] = [];
  let failed = 0;
  // the PubAck must come before the model answers: the last offset leaves it room
  for (const offset of offsets(samples, 5, Math.max(5, firstByteMs - 30))) {
    const { actor, model, commits } = await inst.agent();
    settleGc();
    const ended = actor.whenTurnEnds();
    await startTurn(inst.sup, rt, actor.actorId);
    const called = await modelCalled(model, 1);
    await sleep(Math.max(0, offset - (nowMs() - called)));
    const steer = personMessage(actor.actorId, 'steer');
    const prepared = inst.commitOf(actor.actorId, (e) => e.type === 'request/prepared' && (e.data.messageIds ?? []).includes(steer.id));
    const received = inst.commitOf(actor.actorId, (e) => e.type === 'inbox/received' && e.data.messageId === steer.id);
    await inst.sup.send(steer);
    const ack = nowMs();
    const [tPrep, tRecv] = await Promise.all([prepared, received]);
    const end = await ended;
    if (end.outcome !== 'completed') failed += 1;
    const done = model.doneAt[0]!;
    out.push({
      intoAttemptMs: ack - called,
      remainingMs: called + firstByteMs - ack,
      latencyMs: tPrep - ack,
      receivedMs: tRecv - ack,
      modelLateMs: done - (called + firstByteMs),
      boundaryMs: tPrep - done,
      boundaryCommits: commits.commits.filter((c) => c.at > done && c.at <= tPrep).length,
      boundaryTypes: commits.commits.filter((c) => c.at > done && c.at <= tPrep).map((c) => c.types.join('+')),
    });
  }
  await inst.sup.stop();
  return { samples: out, failed };
}

/**
 * Interrupts, one agent at a time: each agent's model waits (as one streaming a long answer
 * would) until aborted; an interrupt is published 20–120 ms into the attempt, and the sample runs
 * from its PubAck to the ack of the commit holding `turn/end` cancelled.
 */
export async function runInterruptLatency(rt: BenchRuntime, samples: number): Promise<{ samples: InterruptSample[]; failed: number }> {
  const inst = instrumented(rt, INTERRUPT_SCRIPT);
  const out: InterruptSample[] = [];
  let failed = 0;
  for (const offset of offsets(samples, 20, 120)) {
    const { actor, model, commits } = await inst.agent();
    settleGc();
    const ended = actor.whenTurnEnds();
    await startTurn(inst.sup, rt, actor.actorId);
    const called = await modelCalled(model, 1);
    await sleep(Math.max(0, offset - (nowMs() - called)));
    const msg = personMessage(actor.actorId, 'interrupt');
    const cancelled = inst.commitOf(actor.actorId, (e) => e.type === 'turn/end' && e.data.outcome === 'cancelled');
    const requested = inst.commitOf(actor.actorId, (e) => e.type === 'interrupt/requested' && e.data.messageId === msg.id);
    await inst.sup.send(msg);
    const ack = nowMs();
    const [tEnd, tReq] = await Promise.all([cancelled, requested]);
    const end = await ended;
    if (end.outcome !== 'cancelled') failed += 1;
    out.push({
      intoAttemptMs: ack - called,
      latencyMs: tEnd - ack,
      requestedMs: tReq - ack,
      commits: commits.commits.filter((c) => c.at > ack && c.at <= tEnd).length,
    });
  }
  await inst.sup.stop();
  return { samples: out, failed };
}

/** The value seen most often. */
function mostCommon(values: string[]): string {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '-';
}

const pStats = (xs: number[]) => [fmtMs(percentile(xs, 50)), fmtMs(percentile(xs, 90)), fmtMs(Math.max(...xs))];

/** Runs both sections (after a few unreported samples of each) and prints their tables. */
export async function runInboxLatency(rt: BenchRuntime, opts: { samples: number; firstByteMs: number }): Promise<void> {
  // warm-up, not reported: the first turns compile the inbox and interrupt paths
  await runSteerLatency(rt, 5, opts.firstByteMs);
  await runInterruptLatency(rt, 5);
  const steer = await runSteerLatency(rt, opts.samples, opts.firstByteMs);
  const intr = await runInterruptLatency(rt, opts.samples);
  const s = steer.samples;
  const excess = s.map((x) => x.latencyMs - x.remainingMs);

  console.log('');
  console.log(`== steer latency (model's first byte after ${opts.firstByteMs} ms; ${s.length} steers, one agent each) ==`);
  console.log(table(
    ['figure', 'p50 ms', 'p90 ms', 'max ms'],
    [
      ['PubAck → request/prepared including it', ...pStats(s.map((x) => x.latencyMs))],
      ["model's remaining time at the PubAck", ...pStats(s.map((x) => x.remainingMs))],
      ['excess (latency − remaining)', ...pStats(excess)],
      ['  PubAck → inbox/received committed', ...pStats(s.map((x) => x.receivedMs))],
      ["  model's done after its delay was due", ...pStats(s.map((x) => x.modelLateMs))],
      ["  model's done → request/prepared committed", ...pStats(s.map((x) => x.boundaryMs))],
    ],
  ));
  console.log(
    `notes: each steer is published (Supervisor.send, person channel) ${fmtMs(Math.min(...s.map((x) => x.intoAttemptMs)))}–` +
      `${fmtMs(Math.max(...s.map((x) => x.intoAttemptMs)))} ms into the model's wait (spread evenly); times are the host's when the publish\n` +
      "  resolved and when onCommit saw each commit acked. The steer's inbox/received lands while the model waits; after the model\n" +
      `  answers, the step boundary is the echo call and ${median(s.map((x) => x.boundaryCommits))} commits (median) up to the one holding the next step's request/prepared.\n` +
      `  The commits of the boundary, most often: ${mostCommon(s.map((x) => x.boundaryTypes.join(' | ')))}.\n` +
      `  turns not completed: ${steer.failed}.`,
  );
  const p50Excess = percentile(excess, 50);
  console.log(`target (issue): p50 ≤ the model's remaining time + 5 ms [excess p50 ${fmtMs(p50Excess)} ms: ${p50Excess <= 5 ? 'met' : 'MISSED'}]`);

  const i = intr.samples;
  console.log('');
  console.log(`== interrupt latency (during the model's stream; ${i.length} interrupts, one agent each) ==`);
  console.log(table(
    ['figure', 'p50 ms', 'p90 ms', 'max ms'],
    [
      ['PubAck → turn/end cancelled committed', ...pStats(i.map((x) => x.latencyMs))],
      ['  PubAck → interrupt/requested committed', ...pStats(i.map((x) => x.requestedMs))],
      ['  interrupt/requested → turn/end committed', ...pStats(i.map((x) => x.latencyMs - x.requestedMs))],
    ],
  ));
  console.log(
    `notes: each interrupt is published ${fmtMs(Math.min(...i.map((x) => x.intoAttemptMs)))}–${fmtMs(Math.max(...i.map((x) => x.intoAttemptMs)))} ms into an attempt whose model ` +
      `has not answered; commits acked from the PubAck to turn/end: ${median(i.map((x) => x.commits))} (median). turns not cancelled: ${intr.failed}.`,
  );
  const p50 = percentile(i.map((x) => x.latencyMs), 50);
  console.log(`target (issue): p50 ≤ 20 ms [${fmtMs(p50)} ms: ${p50 <= 20 ? 'met' : 'MISSED'}]`);
}
