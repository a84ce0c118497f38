import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { TurnEnded } from '../../src/actors/actor/hosted-agent.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { createScriptedModel, type ScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, EventOf, EventType, TurnRequest, TurnSettings } from '../../src/protocol/events.js';
import type { InboxKind, InboxMessage } from '../../src/protocol/inbox.js';
import { newId } from '../../src/protocol/ids.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { createMemoryPorts, type MemoryPorts } from '../../src/actors/hosting/supervisor-ports.js';
import { openTestRuntime, readLog, type NatsTestRuntime, type TestRuntime, type TestRuntimeOptions } from '../helpers/runtime.js';

/** Scripted models built for the turns of a runtime, in the order they were built. */
export interface CapturedModels {
  models: ScriptedModel[];
  modelFor(settings: TurnSettings, cursor: number): Promise<ScriptedModel>;
  /** Every prepared request any of the models was asked to stream, in order. */
  requests(): ScriptedModel['requests'];
}

/** A `modelFor` that builds scripted models over `script` and keeps them, so a test sees their requests. */
export function captureModels(script: ScriptResponse[], summaries?: string[]): CapturedModels {
  const models: ScriptedModel[] = [];
  return {
    models,
    async modelFor(_settings, cursor) {
      const m = createScriptedModel({ responses: script, cursor, ...(summaries ? { summaries } : {}) });
      models.push(m);
      return m;
    },
    requests: () => models.flatMap((m) => m.requests),
  };
}

/** What `runtimes().open` takes besides where the runtime runs. */
export type OpenOptions = Omit<TestRuntimeOptions, 'natsUrl' | 'memory'> & { models?: CapturedModels };

/** Opens runtimes and closes every one of them (call `closeAll` in afterEach). */
export interface Runtimes<R extends TestRuntime> {
  open(opts?: OpenOptions): Promise<R>;
  closeAll(): Promise<void>;
}

/**
 * Runtimes on a real nats-server (`natsUrl` gives its URL), or with `memory` on in-memory ports
 * they all share, as hosts on one server share its streams.
 */
export function runtimes(natsUrl: () => string): Runtimes<NatsTestRuntime>;
export function runtimes(backend: { memory: () => MemoryPorts }): Runtimes<TestRuntime>;
export function runtimes(backend: (() => string) | { memory: () => MemoryPorts }): Runtimes<TestRuntime> {
  const open: TestRuntime[] = [];
  return {
    async open(opts = {}) {
      const { models, ...rest } = opts;
      const where = typeof backend === 'function' ? { natsUrl: backend() } : { memory: backend.memory() };
      const rt = await openTestRuntime({ ...where, ...rest, ...(models ? { modelFor: models.modelFor } : {}) });
      open.push(rt);
      return rt;
    },
    async closeAll(): Promise<void> {
      const list = open.splice(0);
      for (const rt of list) await rt.close();
    },
  };
}

/** An inbox message to `to`, with test defaults. */
export function message(to: string, content: string, over: Partial<InboxMessage> & { kind?: InboxKind } = {}): InboxMessage {
  return {
    id: newId('message'), from: 'test', to, kind: 'user_message', target: 'next_turn', wakeup: true,
    content, request: null, sentAt: new Date().toISOString(), ...over,
  };
}

/** Creates an agent and sends it `task`; returns the actor and a promise of the turn's end (not awaited). */
export async function startTurn(
  supervisor: Supervisor, task: string, request: TurnRequest,
): Promise<{ actor: AgentActor; ended: Promise<TurnEnded>; messageId: string }> {
  const actorId = newId('agent');
  const actor = await supervisor.create({
    actorId, kind: 'agent', parentId: null, rootId: actorId, title: task, workspace: request.workspace, labels: {},
  });
  const ended = actor.whenTurnEnds();
  // Handled at once so a rejection (a dropped actor) is never reported as unhandled before the test awaits it.
  ended.catch(() => {});
  const msg = message(actorId, task, { request });
  await supervisor.send(msg);
  return { actor, ended, messageId: msg.id };
}

/** Events of one type, typed. */
export function ofType<T extends EventType>(log: ActorEvent[], type: T): EventOf<T>[] {
  return log.filter((e) => e.type === type) as unknown as EventOf<T>[];
}

/** The one event of a type; fails the test when there is not exactly one. */
export function only<T extends EventType>(log: ActorEvent[], type: T): EventOf<T> {
  const found = ofType(log, type);
  expect(found, `exactly one ${type}`).toHaveLength(1);
  return found[0]!;
}

/** The projection a full replay of `log` gives. */
export function replay(actorId: string, log: ActorEvent[]): Projection {
  const p = emptyProjection(actorId);
  for (const e of log) foldEvent(p, e);
  return p;
}

/** Polls the actor's log until `done(log)` holds (or the timeout fails the test); returns the log. */
export async function waitForLog(
  supervisor: Supervisor, actor: { rootId: string; actorId: string },
  done: (log: ActorEvent[]) => boolean, timeoutMs = 15_000,
): Promise<ActorEvent[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const log = await readLog(supervisor, actor.rootId, actor.actorId);
    if (done(log)) return log;
    if (Date.now() > until) throw new Error(`log never reached the expected state; it holds ${log.map((e) => e.type).join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The setting of one test file: runtimes, a workspace, and where they run. */
export interface TestWorld<R extends TestRuntime> {
  /** Runtimes closed after each test. */
  rts: Runtimes<R>;
  /**
   * A runtime for the whole file: opened before its tests with what `opts()` says then (after the
   * file's own setup registered before this call), closed after them.
   */
  shared(opts?: () => OpenOptions): { readonly rt: R };
  /** A workspace holding `src/a.txt` ("alpha\nbeta\n"), one for the file. */
  readonly ws: string;
}

/** A world on a real nats-server. */
export interface NatsTestWorld extends TestWorld<NatsTestRuntime> {
  readonly natsUrl: string;
  readonly nats: TestNats;
}

/** A world on in-memory ports, shared by its runtimes. */
export interface MemoryTestWorld extends TestWorld<TestRuntime> {
  readonly ports: MemoryPorts;
}

/**
 * The setting actor tests share, for the file that calls it: a workspace holding `src/a.txt`
 * ("alpha\nbeta\n"), runtimes closed after each test, and under them in-memory ports (the
 * default: a test not about NATS needs none) or, with `{ nats: true }`, a real nats-server.
 */
export function actorTestWorld(opts: { nats: true }): NatsTestWorld;
export function actorTestWorld(opts?: { nats?: false }): MemoryTestWorld;
export function actorTestWorld(opts: { nats?: boolean } = {}): NatsTestWorld | MemoryTestWorld {
  let nats: TestNats | undefined;
  let ports: MemoryPorts | undefined;
  let ws = '';
  beforeAll(async () => {
    if (opts.nats) nats = await startTestNats();
    else ports = createMemoryPorts();
    ws = await tempDir('ws');
    await mkdir(join(ws, 'src'));
    await writeFile(join(ws, 'src', 'a.txt'), 'alpha\nbeta\n');
  });
  afterAll(async () => {
    await nats?.stop();
    await rm(ws, { recursive: true, force: true });
  });
  const rts = opts.nats ? runtimes(() => nats!.url) : runtimes({ memory: () => ports! });
  afterEach(async () => rts.closeAll());
  const lasting = opts.nats ? runtimes(() => nats!.url) : runtimes({ memory: () => ports! });
  return {
    rts,
    shared(o = () => ({})) {
      let rt: TestRuntime | undefined;
      beforeAll(async () => {
        rt = await lasting.open(o());
      });
      // registered after the world's own: runs before the server stops
      afterAll(async () => lasting.closeAll());
      return {
        get rt() {
          return rt!;
        },
      };
    },
    get ws(): string {
      return ws;
    },
    get natsUrl(): string {
      return nats!.url;
    },
    get nats(): TestNats {
      return nats!;
    },
    get ports(): MemoryPorts {
      return ports!;
    },
  } as NatsTestWorld | MemoryTestWorld;
}
