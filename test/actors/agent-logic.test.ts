import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, InspectionEvent } from 'xstate';
import type { AgentSnapshot, PersistedAgentSnapshot } from '../../src/actors/actor/agent-logic.js';
import { MachineSet, type EngineSnapshot, type MachineEngine, type MachineEngines, type MachineStates } from '../../src/actors/actor/machine-set.js';
import { agentMachine } from '../../src/machines/agent.machine.js';
import { attemptMachine } from '../../src/machines/attempt.machine.js';
import type { MachineEvent } from '../../src/machines/machine-event.js';
import { stepMachine } from '../../src/machines/step.machine.js';
import { toolCallMachine } from '../../src/machines/tool-call.machine.js';
import { turnMachine } from '../../src/machines/turn.machine.js';
import type { ActorEvent } from '../../src/protocol/events.js';
import { fold, openAgent, readAll, task } from './agent-fixture.js';

/** XState's own `transition()` for one machine (as the differential test runs it), effects dropped. */
function xstateEngine(machine: AnyStateMachine): MachineEngine {
  const noop = (): void => {};
  const scope = {
    self: { id: machine.id, sessionId: machine.id },
    id: machine.id,
    sessionId: machine.id,
    system: { _sendInspectionEvent: noop, _unregister: noop, scheduler: { schedule: noop, cancel: noop, cancelAll: noop } },
    logger: noop,
    defer: (fn: () => void) => fn(),
    stopChild: noop,
    emit: noop,
    actionExecutor: noop,
  } as never;
  return {
    initial: (input) => machine.getInitialSnapshot(scope, input) as EngineSnapshot,
    transition: (s, e) => machine.transition(s as never, e as never, scope) as EngineSnapshot,
    persist: (s) => machine.getPersistedSnapshot(s as never),
    restore: (p) => machine.restoreSnapshot!(p, scope) as EngineSnapshot,
  };
}

const XSTATE: MachineEngines = {
  agent: xstateEngine(agentMachine),
  turn: xstateEngine(turnMachine),
  step: xstateEngine(stepMachine),
  attempt: xstateEngine(attemptMachine),
  call: xstateEngine(toolCallMachine),
};

/** The inspection events of one actor, by kind. */
function recorder() {
  const events: InspectionEvent[] = [];
  return {
    inspect: (e: InspectionEvent) => void events.push(e),
    of: (type: InspectionEvent['type']) => events.filter((e) => e.type === type),
    snapshots: () =>
      events.flatMap((e) => (e.type === '@xstate.snapshot' ? [{ event: e.event as MachineEvent | { type: 'xstate.init' }, snapshot: e.snapshot as AgentSnapshot }] : [])),
  };
}

const TURN = [{ tool_calls: [{ name: 'echo', arguments: { text: 'hi' } }] }, { content: 'done' }];

describe('a hosted agent is an XState actor', () => {
  it('reports a whole turn to an inspect observer, with the state values XState transition() gives for the same events', async () => {
    const rec = recorder();
    const { actor } = await openAgent({ script: TURN, inspect: rec.inspect });
    actor.open();
    const ended = actor.whenTurnEnds();
    await actor.receive(task(actor.actorId));
    expect((await ended).outcome).toBe('completed');
    await actor.idle();

    expect(rec.of('@xstate.actor').map((e) => e.actorRef)).toEqual([actor.ref]);
    expect(actor.ref.getSnapshot().agentStatus).toBe('idle');
    const snaps = rec.snapshots();
    const routed = snaps.filter((s) => s.event.type !== 'xstate.init');
    // every event sent to the actor is reported as sent, then as the snapshot it made
    expect(rec.of('@xstate.event').map((e) => (e as { event: { type: string } }).event.type)).toEqual(snaps.map((s) => s.event.type));
    const types = routed.map((s) => s.event.type);
    for (const t of ['inbox/received', 'turn/start', 'step/start', 'attempt/start', 'tool/call', 'tool/start', 'tool/result', 'turn/end']) {
      expect(types).toContain(t);
    }

    // the same events through XState's own transition(), machine by machine, routed as the runtime routes them
    const reference = new MachineSet(actor.actorId, () => {}, null, XSTATE);
    const seen: MachineStates[] = [];
    for (const { event, snapshot } of routed) {
      reference.handle(event as MachineEvent);
      expect(snapshot.machines).toEqual(reference.states());
      seen.push(snapshot.machines);
    }
    // the turn went through its states: a call was open, the step reached its tools, the agent its turn
    expect(seen.some((m) => Object.values(m.calls).length > 0)).toBe(true);
    expect(seen.some((m) => m.step !== null && JSON.stringify(m.step).includes('tools'))).toBe(true);
    expect(seen.some((m) => JSON.stringify(m.agent) === JSON.stringify({ turn: 'running' }))).toBe(true);
    expect(actor.ref.getSnapshot().machines).toEqual(reference.states());
    // an inspector that serializes snapshots gets the state values
    expect(JSON.parse(JSON.stringify(actor.ref.getSnapshot()))).toMatchObject({ status: 'active', agentStatus: 'idle', machines: reference.states() });
    actor.stop();
    expect(actor.ref.getSnapshot().status).toBe('stopped');
  });

  it('a subscriber sees each snapshot; a killed and rehydrated actor reports the state values it had', async () => {
    // the turn stops in a tool that never returns: a call is open when the process "dies"
    let resolveStarted!: () => void;
    const started = new Promise<void>((r) => (resolveStarted = r));
    const { actor, logs } = await openAgent({
      script: [{ tool_calls: [{ name: 'hang', arguments: { text: 'x' } }] }, { content: 'done' }],
      onCommit: (events) => events.some((e) => e.type === 'tool/start') && resolveStarted(),
    });
    const statuses = new Set<string>();
    actor.ref.subscribe((s) => statuses.add(s.agentStatus));
    actor.open();
    await actor.receive(task(actor.actorId));
    await started;
    const before = actor.ref.getSnapshot().machines;
    expect(before).toMatchObject({ agent: { turn: 'running' }, attempt: null });
    expect(Object.values(before.calls)).toEqual(['started']);
    // subscribed while idle: it sees what came after
    expect([...statuses]).toEqual(['claiming', 'turn']);
    const persisted = (actor.ref.getPersistedSnapshot() as unknown as PersistedAgentSnapshot).machines;
    actor.stop();

    // rehydrated from the whole log (no snapshot): the replayed events rebuild the machines
    const log: ActorEvent[] = await readAll(logs, actor.actorId);
    const rec = recorder();
    const { actor: again } = await openAgent({
      script: [], logs, actorId: actor.actorId, epoch: 2, projection: fold(actor.actorId, log), inspect: rec.inspect,
    });
    again.replay(log);
    expect(again.ref.getSnapshot().machines).toEqual(before);
    expect(rec.snapshots().at(-1)!.snapshot.machines).toEqual(before);
    again.stop();

    // restored from a persisted snapshot (what a store snapshot holds): the same state values
    const { actor: restored } = await openAgent({
      script: [], logs, actorId: actor.actorId, epoch: 3, projection: fold(actor.actorId, log), machines: persisted,
    });
    expect(restored.ref.getSnapshot().machines).toEqual(before);
    restored.stop();
  });
});
