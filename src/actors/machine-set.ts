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

/** Fills every effect slot of a machine with a function that hands the effect to `sink`. */
function bind<M extends AnyStateMachine>(machine: M, sink: (e: Effect) => void): M {
  const names = Object.keys(machine.implementations.actions);
  const actions = Object.fromEntries(names.map((name) => [name, (_: unknown, params: unknown) => sink({ name, params })]));
  return machine.provide({ actions } as never) as M;
}

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
  private readonly machines;

  constructor(
    actorId: string,
    sink: (e: Effect) => void,
    snapshots: MachineSnapshots | null = null,
  ) {
    this.machines = {
      agent: bind(agentMachine, sink),
      turn: bind(turnMachine, sink),
      step: bind(stepMachine, sink),
      attempt: bind(attemptMachine, sink),
      call: bind(toolCallMachine, sink),
    };
    const m = this.machines;
    const restore = (machine: AnyStateMachine, snapshot: unknown): Live =>
      createActor(machine, { snapshot: snapshot as never }).start();
    this.agentActor = snapshots
      ? restore(m.agent, snapshots.agent)
      : createActor(m.agent, { input: { actorId } }).start();
    if (snapshots) {
      if (snapshots.turn) this.turn = restore(m.turn, snapshots.turn);
      if (snapshots.step) this.step = restore(m.step, snapshots.step);
      if (snapshots.attempt) this.attempt = restore(m.attempt, snapshots.attempt);
      for (const [id, snap] of Object.entries(snapshots.calls)) this.calls.set(id, restore(m.call, snap));
    }
  }

  /** Routes one log event: opens the machine it starts, then sends it to every open machine. */
  route(e: ActorEvent): void {
    const m = this.machines;
    switch (e.type) {
      case 'turn/start':
        this.turn = createActor(m.turn, {
          input: { turnId: e.turn!, budgets: e.data.settings.budgets },
        }).start();
        break;
      case 'step/start':
        this.step = createActor(m.step, {
          input: {
            stepId: e.step!,
            index: e.data.index,
            maxAttempts: e.data.maxAttempts,
            toolBudgetLeft: e.data.toolBudgetLeft,
          },
        }).start();
        break;
      case 'attempt/start':
        this.attempt = createActor(m.attempt, {
          input: { attemptId: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest },
        }).start();
        break;
      case 'tool/call':
        this.calls.set(
          e.call!,
          createActor(m.call, {
            input: {
              callId: e.call!,
              name: e.data.name,
              valid: e.data.status === 'valid',
              error: e.data.error,
              recovery: e.data.recovery ?? 'manual',
              withinBudget: e.data.withinBudget,
            },
          }).start(),
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
    if (e.call !== undefined) this.calls.get(e.call)?.send(e);
    if (e.attempt !== undefined && this.attempt?.getSnapshot().context.attemptId === e.attempt) this.attempt.send(e);
    if (this.step && (e.step === undefined || e.step === this.step.getSnapshot().context.stepId)) this.step.send(e);
    if (this.turn && (e.turn === undefined || e.turn === this.turn.getSnapshot().context.turnId)) this.turn.send(e);
    this.agentActor.send(e);
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
