import { pino } from 'pino';
import type { StateValue } from 'xstate';
import type { EffectContext, EffectPorts } from '../../src/actors/agent/effect-context.js';
import { createFaultInjector } from '../../src/actors/faults/faults.js';
import { OutputTexts } from '../../src/actors/agent/output-blobs.js';
import { blobScope } from '../../src/actors/agent/missing-blob.js';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { MachineEvent } from '../../src/machines/machine-event.js';
import { EVENT_VERSION, type ActorEvent, type EventDraft } from '../../src/protocol/events.js';
import { emptyProjection, foldEvent } from '../../src/store/projection.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import type { ToolDefinition } from '../../src/tools/tool.js';
import { echoTool, hangTool, memoryBlobs, turnRequest } from './agent-fixture.js';
import { resolveSettings } from '../../src/actors/agent/turn-settings.js';

/** An EffectContext with no actor behind it: what a handler staged, flushed and asked for is recorded. */
export interface FakeContext extends EffectContext {
  /** Every event staged, in order. */
  readonly staged: ActorEvent[];
  /** How many times `flush` was called, and the staged count at each. */
  readonly flushes: number[];
  readonly signals: Array<Exclude<MachineEvent, ActorEvent>>;
  readonly started: Array<{ callId: string; rerun: boolean }>;
  readonly recovered: string[];
  readonly failures: unknown[];
  /** Writes the next commit was told to wait for. */
  readonly holds: Array<Promise<unknown>>;
  /** Call states `callState` answers with. */
  readonly calls: Map<string, StateValue>;
  /** Aborts the turn's signal. */
  abort(reason: string): void;
  /** Stages (folds) events as if they were in the log already, without recording them. */
  given(...drafts: EventDraft[]): void;
}

/** Options of `fakeContext`. */
export interface FakeContextOptions {
  script?: ScriptResponse[];
  tools?: ToolDefinition<any>[];
  ports?: Partial<EffectPorts>;
  nowMs?: number;
}

/** A fake context over an empty projection of `agent_test`. */
export function fakeContext(o: FakeContextOptions = {}): FakeContext {
  const actorId = 'agent_test';
  const projection = emptyProjection(actorId);
  let seq = 0;
  let abort = new AbortController();
  const now = o.nowMs ?? Date.parse('2026-01-01T00:00:00Z');
  const ports: EffectPorts = {
    blobs: memoryBlobs(),
    tools: createToolRegistry(o.tools ?? [echoTool, hangTool]),
    tooling: defaultTooling(),
    modelFor: async (_s, cursor) => createScriptedModel({ responses: o.script ?? [], cursor, record: false }),
    clock: { nowMs: () => now },
    faults: createFaultInjector([]),
    logger: pino({ level: 'silent' }),
    ...o.ports,
  };
  const stamp = (d: EventDraft): ActorEvent => {
    const e = { v: EVENT_VERSION, seq: ++seq, id: `event_${seq}`, at: new Date(now).toISOString(), epoch: 1, actor: actorId, ...d } as ActorEvent;
    foldEvent(projection, e);
    return e;
  };
  const outputs = new OutputTexts(ports.blobs, blobScope({ actorId, ports }));
  const ctx: FakeContext = {
    actorId,
    rootId: actorId,
    projection,
    ports,
    logger: ports.logger,
    epoch: 1,
    get signal() {
      return abort.signal;
    },
    halted: false,
    turn: { model: null, prepared: new Map() },
    outputs,
    staged: [],
    flushes: [],
    signals: [],
    started: [],
    recovered: [],
    failures: [],
    holds: [],
    calls: new Map(),
    stage(d) {
      const e = stamp(d);
      ctx.staged.push(e);
      return e;
    },
    async flush() {
      ctx.flushes.push(ctx.staged.length);
    },
    afterCommit: (_seq, launch) => launch.run(),
    holdCommit: (write) => void ctx.holds.push(write),
    noteRecovered: (d) => void ctx.recovered.push(d),
    send: (s) => void ctx.signals.push(s),
    callState: (id) => ctx.calls.get(id),
    startCall: (callId, rerun) => void ctx.started.push({ callId, rerun }),
    kick: () => {},
    fail: (err) => void ctx.failures.push(err),
    abort: (reason) => abort.abort(reason),
    given(...drafts) {
      for (const d of drafts) {
        if (d.type === 'turn/start') abort = new AbortController();
        stamp(d);
      }
    },
  };
  return ctx;
}

/** Drafts that open a turn and a step in a fake context's projection. */
export function openTurnAndStep(ctx: FakeContext, nowMs = 0): void {
  const settings = resolveSettings(turnRequest(), null, nowMs, ctx.ports.tools.names());
  ctx.given(
    { type: 'turn/start', turn: 'turn_1', data: { source: 'user_message', messageIds: [], settings } },
    {
      type: 'step/start', turn: 'turn_1', step: 'step_1',
      data: { index: 1, model: settings.model, maxOutputTokens: null, effort: null, maxAttempts: 4, toolBudgetLeft: null, provider: 'scripted', capabilities: {} as never },
    },
  );
}
