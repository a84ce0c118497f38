import { pino } from 'pino';
import { z } from 'zod';
import { AgentActor } from '../../src/actors/actor/agent-actor.js';
import type { AgentPorts } from '../../src/actors/agent/agent-ports.js';
import type { InspectObserver } from '../../src/actors/actor/agent-logic.js';
import { createFaultInjector } from '../../src/actors/faults/faults.js';
import type { MachineSnapshots } from '../../src/actors/actor/machine-set.js';
import { defaultTooling } from '../../src/actors/agent/tooling.js';
import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { ActorEvent, TurnRequest } from '../../src/protocol/events.js';
import { newId } from '../../src/protocol/ids.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';
import type { BlobStore } from '../../src/store/blob-port.js';
import { createMemoryLogs, type MemoryLogs } from '../../src/store/memory-log.js';
import { emptyProjection, foldEvent, type Projection } from '../../src/store/projection.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import type { ToolDefinition } from '../../src/tools/tool.js';

// One agent actor on in-memory ports (log, blobs), no NATS: for tests about the actor itself.

const Text = z.strictObject({ text: z.string() });

/** `echo {text}`: returns its text; no effects. */
export const echoTool: ToolDefinition<z.infer<typeof Text>> = {
  name: 'echo',
  version: '1',
  description: 'Return the given text.',
  input: Text,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  async execute(input) {
    return { ok: true, output: input.text };
  },
};

/** `hang {text}`: runs until its signal aborts (a tool in flight when the process dies). */
export const hangTool: ToolDefinition<z.infer<typeof Text>> = {
  ...echoTool,
  name: 'hang',
  description: 'Never returns on its own.',
  execute: (_input, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
};

/** The in-memory blob store (content-addressed, under the blob contract suite). */
export function memoryBlobs(): BlobStore {
  return createMemoryBlobStore();
}

/** A turn request for the scripted model with the fixture's tools. */
export function turnRequest(workspace = '/tmp'): TurnRequest {
  return {
    model: 'scripted:inline', baseUrl: null, workspace, tools: ['echo', 'hang'], instructions: null,
    maxSteps: 10, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
  };
}

/** A user message to `to` that starts a turn. */
export function task(to: string, content = 'do it'): InboxMessage {
  return {
    id: newId('message'), from: 'client:test', to, kind: 'user_message', target: 'next_turn', wakeup: true,
    content, request: turnRequest(), sentAt: new Date().toISOString(),
  };
}

/** What `openAgent` builds an actor from. */
export interface AgentFixtureOptions {
  script: ScriptResponse[];
  logs?: MemoryLogs;
  actorId?: string;
  epoch?: number;
  projection?: Projection;
  machines?: MachineSnapshots | null;
  inspect?: InspectObserver;
  onCommit?: (events: ActorEvent[]) => void;
}

/** An agent actor on a memory log, opened. */
export async function openAgent(o: AgentFixtureOptions): Promise<{ actor: AgentActor; logs: MemoryLogs }> {
  const logs = o.logs ?? createMemoryLogs();
  const actorId = o.actorId ?? newId('agent');
  const position = await logs.reader.end(actorId, actorId);
  const ports: AgentPorts = {
    log: logs.writer({ rootId: actorId, actorId, position, epoch: o.epoch ?? 1 }),
    blobs: memoryBlobs(),
    snapshots: null,
    tools: createToolRegistry([echoTool, hangTool]),
    tooling: defaultTooling(),
    modelFor: async (_s, cursor) => createScriptedModel({ responses: o.script, cursor, record: false }),
    clock: { nowMs: () => Date.now() },
    faults: createFaultInjector([]),
    logger: pino({ level: 'silent' }),
    ...(o.onCommit ? { onCommit: o.onCommit } : {}),
  };
  const actor = new AgentActor({
    actorId, rootId: actorId, ports, projection: o.projection ?? emptyProjection(actorId), machines: o.machines ?? null,
    snapshotEvery: 64, snapshotSeq: 0, ...(o.inspect ? { inspect: o.inspect } : {}),
  });
  return { actor, logs };
}

/** Every event of an actor's log. */
export async function readAll(logs: MemoryLogs, actorId: string): Promise<ActorEvent[]> {
  const out: ActorEvent[] = [];
  for await (const s of logs.reader.read(actorId, actorId)) out.push(s.event);
  return out;
}

/** The projection of a whole log. */
export function fold(actorId: string, events: ActorEvent[]): Projection {
  const p = emptyProjection(actorId);
  for (const e of events) foldEvent(p, e);
  return p;
}
