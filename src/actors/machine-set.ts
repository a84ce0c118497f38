import { createActor, type Actor, type AnyStateMachine } from 'xstate';
import { agentMachine } from '../machines/agent.machine.js';
import { attemptMachine } from '../machines/attempt.machine.js';
import type { MachineEvent } from '../machines/machine-event.js';
import { stepMachine } from '../machines/step.machine.js';
import { toolCallMachine } from '../machines/tool-call.machine.js';
import { turnMachine } from '../machines/turn.machine.js';
import type { ActorEvent } from '../protocol/events.js';

/** An effect a machine asked for: the name of its action slot and the params it computed. */
export interface Effect {
  name: string;
  params: any;
}

/** Persisted snapshots of the machines of one agent; a cache of the log, like the projection. */
export interface MachineSnapshots {
  agent: unknown;
  turn: unknown | null;
  step: unknown | null;
  attempt: unknown | null;
  calls: Record<string, unknown>;
}

type Live = Actor<AnyStateMachine>;
type Sink = (e: Effect) => void;

// Each live XState actor's effect sink, found from the `self` an action runs with. The machines
// are bound once per process: `provide()` per agent rebuilt every state node (~60 KB an agent).
const sinks = new WeakMap<object, Sink>();

/** Fills every effect slot of a machine with a function that hands the effect to its actor's sink. */
function bind<M extends AnyStateMachine>(machine: M): M {
  const names = Object.keys(machine.implementations.actions);
  const actions = Object.fromEntries(
    names.map((name) => [name, ({ self }: { self: object }, params: unknown) => sinks.get(self)?.({ name, params })]),
  );
  return machine.provide({ actions } as never) as M;
}

const BOUND = {
  agent: bind(agentMachine),
  turn: bind(turnMachine),
  step: bind(stepMachine),
  attempt: bind(attemptMachine),
  call: bind(toolCallMachine),
};

// The event types each machine handles: an event no state of a machine names is not sent to it,
// which saves most of the routing cost (each send is a macrostep).
const HANDLES = {
  agent: new Set<string>(agentMachine.events),
  turn: new Set<string>(turnMachine.events),
  step: new Set<string>(stepMachine.events),
  attempt: new Set<string>(attemptMachine.events),
  call: new Set<string>(toolCallMachine.events),
};

/**
 * The live XState actors of one agent: agent, and the open turn, step, attempt and tool calls.
 * Committed (or staged) events are routed to every open machine; each creates the next when its
 * opening event passes (`turn/start`, `step/start`, `attempt/start`, `tool/call`), so the set is a
 * function of the log alone and a replay of the tail rebuilds it.
 */
export class MachineSet {
  private agentActor: Live;
  private turn: Live | null = null;
  private step: Live | null = null;
  private attempt: Live | null = null;
  private readonly calls = new Map<string, Live>();
  private readonly sink: Sink;

  constructor(
    actorId: string,
    sink: Sink,
    snapshots: MachineSnapshots | null = null,
  ) {
    this.sink = sink;
    const m = BOUND;
    const restore = (machine: AnyStateMachine, snapshot: unknown): Live =>
      this.spawn(machine, { snapshot: snapshot as never });
    this.agentActor = snapshots
      ? restore(m.agent, snapshots.agent)
      : this.spawn(m.agent, { input: { actorId } });
    if (snapshots) {
      if (snapshots.turn) this.turn = restore(m.turn, snapshots.turn);
      if (snapshots.step) this.step = restore(m.step, snapshots.step);
      if (snapshots.attempt) this.attempt = restore(m.attempt, snapshots.attempt);
      for (const [id, snap] of Object.entries(snapshots.calls)) this.calls.set(id, restore(m.call, snap));
    }
  }

  /** Creates and starts an actor whose effects go to this set's sink (registered before entry actions run). */
  private spawn(machine: AnyStateMachine, opts: object): Live {
    const actor = createActor(machine, opts as never);
    sinks.set(actor, this.sink);
    return actor.start();
  }

  /** Routes one log event: opens the machine it starts, then sends it to every open machine. */
  route(e: ActorEvent): void {
    const m = BOUND;
    switch (e.type) {
      case 'turn/start':
        this.turn = this.spawn(m.turn, { input: { turnId: e.turn!, budgets: e.data.settings.budgets } });
        break;
      case 'step/start':
        this.step = this.spawn(m.step, {
          input: {
            stepId: e.step!,
            index: e.data.index,
            maxAttempts: e.data.maxAttempts,
            toolBudgetLeft: e.data.toolBudgetLeft,
          },
        });
        break;
      case 'attempt/start':
        this.attempt = this.spawn(m.attempt, {
          input: { attemptId: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest },
        });
        break;
      case 'tool/call':
        this.calls.set(
          e.call!,
          this.spawn(m.call, {
            input: {
              callId: e.call!,
              name: e.data.name,
              valid: e.data.status === 'valid',
              error: e.data.error,
              recovery: e.data.recovery ?? 'manual',
              withinBudget: e.data.withinBudget,
              confirmUnknown: e.data.confirmUnknown === true,
            },
          }),
        );
        break;
      default:
        break;
    }
    this.send(e);
  }

  /** Sends a runtime signal (`recover`, `tick`, `abort`) to the open machines, innermost first. */
  signal(e: Exclude<MachineEvent, ActorEvent>): void {
    for (const call of [...this.calls.values()]) call.send(e);
    this.attempt?.send(e);
    this.step?.send(e);
    this.turn?.send(e);
    this.agentActor.send(e);
    this.prune();
  }

  private send(e: ActorEvent): void {
    const t = e.type;
    if (e.call !== undefined && HANDLES.call.has(t)) this.calls.get(e.call)?.send(e);
    if (this.attempt && HANDLES.attempt.has(t) && e.attempt === this.attempt.getSnapshot().context.attemptId) this.attempt.send(e);
    if (this.step && HANDLES.step.has(t) && (e.step === undefined || e.step === this.step.getSnapshot().context.stepId)) this.step.send(e);
    if (this.turn && HANDLES.turn.has(t) && (e.turn === undefined || e.turn === this.turn.getSnapshot().context.turnId)) this.turn.send(e);
    if (HANDLES.agent.has(t)) this.agentActor.send(e);
    this.prune();
  }

  /** Drops machines that reached a final state; a new one opens with the next opening event. */
  private prune(): void {
    if (this.turn?.getSnapshot().status === 'done') this.turn = null;
    if (this.step?.getSnapshot().status === 'done') this.step = null;
    if (this.attempt?.getSnapshot().status === 'done') this.attempt = null;
    for (const [id, call] of this.calls) if (call.getSnapshot().status === 'done') this.calls.delete(id);
  }

  /** State values of the open machines, for progress lines and the visualizer. */
  states(): { agent: unknown; turn: unknown; step: unknown; attempt: unknown; calls: Record<string, unknown> } {
    return {
      agent: this.agentActor.getSnapshot().value,
      turn: this.turn?.getSnapshot().value ?? null,
      step: this.step?.getSnapshot().value ?? null,
      attempt: this.attempt?.getSnapshot().value ?? null,
      calls: Object.fromEntries([...this.calls].map(([id, a]) => [id, a.getSnapshot().value])),
    };
  }

  /** True while a turn is open. */
  hasOpenTurn(): boolean {
    return this.turn !== null;
  }

  /** True when the agent machine is waiting for `turn/start` after asking for it. */
  isClaiming(): boolean {
    return this.agentActor.getSnapshot().value === 'claiming';
  }

  /** The step machine's state value, or null when no step is open. */
  stepState(): unknown {
    return this.step?.getSnapshot().value ?? null;
  }

  /** Persisted snapshots of every open machine. */
  persist(): MachineSnapshots {
    return {
      agent: this.agentActor.getPersistedSnapshot(),
      turn: this.turn?.getPersistedSnapshot() ?? null,
      step: this.step?.getPersistedSnapshot() ?? null,
      attempt: this.attempt?.getPersistedSnapshot() ?? null,
      calls: Object.fromEntries([...this.calls].map(([id, a]) => [id, a.getPersistedSnapshot()])),
    };
  }

  /** Stops every actor (no effects run after this). */
  stop(): void {
    for (const a of [this.agentActor, this.turn, this.step, this.attempt, ...this.calls.values()]) a?.stop();
  }
}
