import { agentMachine } from '../../machines/agent.machine.js';
import { attemptMachine } from '../../machines/attempt.machine.js';
import { CompiledMachine, type EffectSink } from '../../machines/compiled-machine.js';
import type { MachineEvent } from '../../machines/machine-event.js';
import { stepMachine } from '../../machines/step.machine.js';
import { toolCallMachine } from '../../machines/tool-call.machine.js';
import { turnMachine } from '../../machines/turn.machine.js';
import type { StateValue } from 'xstate';
import type { ActorEvent } from '../../protocol/events.js';
import type { MachineEffect } from './machine-effects.js';

/** Persisted snapshots of the machines of one agent; a cache of the log, like the projection. */
export interface MachineSnapshots {
  agent: unknown;
  turn: unknown | null;
  step: unknown | null;
  attempt: unknown | null;
  calls: Record<string, unknown>;
}

type Sink = (e: MachineEffect) => void;

/** State values of an agent's open machines, for progress lines and the visualizer. */
export interface MachineStates {
  agent: StateValue;
  turn: StateValue | null;
  step: StateValue | null;
  attempt: StateValue | null;
  calls: Record<string, StateValue>;
}

/** What the set reads of a machine snapshot (a compiled one, or XState's own). */
export interface EngineSnapshot {
  readonly value: StateValue;
  readonly status: string;
  readonly context: any;
}

/**
 * What runs one machine definition: the compiled engine in the runtime; XState's own
 * `transition()` in the tests that hold the runtime to it.
 */
export interface MachineEngine {
  initial(input: object, sink: EffectSink | null): EngineSnapshot;
  transition(snapshot: EngineSnapshot, event: MachineEvent, sink: EffectSink | null): EngineSnapshot;
  persist(snapshot: EngineSnapshot): unknown;
  restore(persisted: never): EngineSnapshot;
}

/** An engine for each kind of machine of an agent. */
export type MachineEngines = Record<'agent' | 'turn' | 'step' | 'attempt' | 'call', MachineEngine>;

/** The snapshots of an agent's open machines at one moment (they never change). */
export interface MachineCells {
  agent: EngineSnapshot;
  turn: EngineSnapshot | null;
  step: EngineSnapshot | null;
  attempt: EngineSnapshot | null;
  calls: ReadonlyArray<readonly [string, EngineSnapshot]>;
}

const NO_CALLS: MachineCells['calls'] = [];

// The machines are pure (guards, `assign` and named effect slots only), so they need no XState
// actor: an actor per machine per step cost more than the transitions, and XState's general
// transition algorithm cost more than all the rest of a step. Each definition is compiled once
// and run by `CompiledMachine`, which is checked against XState's own `transition`.
const KINDS: MachineEngines = {
  agent: new CompiledMachine(agentMachine),
  turn: new CompiledMachine(turnMachine),
  step: new CompiledMachine(stepMachine),
  attempt: new CompiledMachine(attemptMachine),
  call: new CompiledMachine(toolCallMachine),
};

// The event types each machine handles: an event no state of a machine names is not sent to it.
const HANDLES = {
  agent: new Set<string>(agentMachine.events),
  turn: new Set<string>(turnMachine.events),
  step: new Set<string>(stepMachine.events),
  attempt: new Set<string>(attemptMachine.events),
  call: new Set<string>(toolCallMachine.events),
};

/** One machine's current snapshot. */
class Cell {
  constructor(
    readonly machine: MachineEngine,
    public snapshot: EngineSnapshot,
  ) {}

  get context(): any {
    return this.snapshot.context;
  }

  get done(): boolean {
    return this.snapshot.status === 'done';
  }

  persisted(): unknown {
    return this.machine.persist(this.snapshot);
  }
}

/**
 * The machines of one agent: agent, and the open turn, step, attempt and tool calls.
 * Committed (or staged) events are routed to every open machine; each creates the next when its
 * opening event passes (`turn/start`, `step/start`, `attempt/start`, `tool/call`), so the set is a
 * function of the log alone and a replay of the tail rebuilds it.
 */
export class MachineSet {
  private readonly agent: Cell;
  private turn: Cell | null = null;
  private step: Cell | null = null;
  private attempt: Cell | null = null;
  private readonly calls = new Map<string, Cell>();
  private readonly sink: EffectSink;
  private stopped = false;

  private readonly engines: MachineEngines;

  /** `engines`: what runs each kind of machine; the compiled engine unless a test says otherwise. */
  constructor(actorId: string, sink: Sink, snapshots: MachineSnapshots | null = null, engines: MachineEngines = KINDS) {
    this.engines = engines;
    // The compiled engine emits only the names of the slots its machines declare (it refuses
    // anything else when it compiles them), with the params their expressions compute.
    this.sink = sink as EffectSink;
    const restore = (machine: MachineEngine, snapshot: unknown): Cell => new Cell(machine, machine.restore(snapshot as never));
    if (snapshots) {
      this.agent = restore(this.engines.agent, snapshots.agent);
      if (snapshots.turn) this.turn = restore(this.engines.turn, snapshots.turn);
      if (snapshots.step) this.step = restore(this.engines.step, snapshots.step);
      if (snapshots.attempt) this.attempt = restore(this.engines.attempt, snapshots.attempt);
      for (const [id, snap] of Object.entries(snapshots.calls)) this.calls.set(id, restore(this.engines.call, snap));
    } else {
      this.agent = this.open(this.engines.agent, { actorId });
    }
  }

  /** Creates a machine's initial snapshot; its entry effects go to this set's sink. */
  private open(machine: MachineEngine, input: object): Cell {
    return new Cell(machine, machine.initial(input, this.stopped ? null : this.sink));
  }

  /** One macrostep of one machine; its effects go to this set's sink. */
  private deliver(cell: Cell, e: MachineEvent): void {
    if (cell.done) return;
    cell.snapshot = cell.machine.transition(cell.snapshot, e, this.sink);
  }

  /**
   * Handles one event: a log event is routed, a runtime signal sent to every open machine. Not
   * re-entrant: the agent's XState actor calls it from its mailbox, which holds an event sent
   * while a transition runs until that transition ends.
   */
  handle(e: MachineEvent): void {
    if (this.stopped) return;
    if (e.type === 'recover' || e.type === 'tick' || e.type === 'abort') this.signal(e as Exclude<MachineEvent, ActorEvent>);
    else this.route(e as ActorEvent);
  }

  /** Routes one log event: opens the machine it starts, then sends it to every open machine. */
  route(e: ActorEvent): void {
    switch (e.type) {
      case 'turn/start':
        this.turn = this.open(this.engines.turn, {
          turnId: e.turn!,
          budgets: e.data.settings.budgets,
          ...(e.data.settings.maxCompletionRejections !== undefined ? { maxCompletionRejections: e.data.settings.maxCompletionRejections } : {}),
          ...(e.data.settings.onCompletionExhausted !== undefined ? { onCompletionExhausted: e.data.settings.onCompletionExhausted } : {}),
        });
        break;
      case 'step/start':
        this.step = this.open(this.engines.step, {
          stepId: e.step!,
          index: e.data.index,
          maxAttempts: e.data.maxAttempts,
          toolBudgetLeft: e.data.toolBudgetLeft,
        });
        break;
      case 'attempt/start':
        this.attempt = this.open(this.engines.attempt, { attemptId: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest, ...(e.data.kind ? { kind: e.data.kind } : {}) });
        break;
      case 'tool/call':
        this.calls.set(
          e.call!,
          this.open(this.engines.call, {
            callId: e.call!,
            name: e.data.name,
            valid: e.data.status === 'valid',
            error: e.data.error,
            recovery: e.data.recovery ?? 'manual',
            withinBudget: e.data.withinBudget,
            confirmUnknown: e.data.confirmUnknown === true,
          }),
        );
        break;
      default:
        break;
    }
    const t = e.type;
    if (e.call !== undefined && HANDLES.call.has(t)) {
      const call = this.calls.get(e.call);
      if (call) this.deliver(call, e);
    }
    if (this.attempt && HANDLES.attempt.has(t) && e.attempt === this.attempt.context.attemptId) this.deliver(this.attempt, e);
    if (this.step && HANDLES.step.has(t) && (e.step === undefined || e.step === this.step.context.stepId)) this.deliver(this.step, e);
    if (this.turn && HANDLES.turn.has(t) && (e.turn === undefined || e.turn === this.turn.context.turnId)) this.deliver(this.turn, e);
    if (HANDLES.agent.has(t)) this.deliver(this.agent, e);
    this.prune();
  }

  /** Sends a runtime signal (`recover`, `tick`, `abort`) to the open machines, innermost first. */
  signal(e: Exclude<MachineEvent, ActorEvent>): void {
    for (const call of [...this.calls.values()]) this.deliver(call, e);
    if (this.attempt) this.deliver(this.attempt, e);
    if (this.step) this.deliver(this.step, e);
    if (this.turn) this.deliver(this.turn, e);
    this.deliver(this.agent, e);
    this.prune();
  }

  /** Drops machines that reached a final state; a new one opens with the next opening event. */
  private prune(): void {
    if (this.turn?.done) this.turn = null;
    if (this.step?.done) this.step = null;
    if (this.attempt?.done) this.attempt = null;
    for (const [id, call] of this.calls) if (call.done) this.calls.delete(id);
  }

  /** State values of the open machines, for progress lines and the visualizer. */
  states(): MachineStates {
    return MachineSet.statesOf(this.cells());
  }

  /** The compiled snapshots of the open machines now: what an agent's XState snapshot holds. */
  cells(): MachineCells {
    return {
      agent: this.agent.snapshot,
      turn: this.turn?.snapshot ?? null,
      step: this.step?.snapshot ?? null,
      attempt: this.attempt?.snapshot ?? null,
      calls: this.calls.size === 0 ? NO_CALLS : Array.from(this.calls, ([id, c]) => [id, c.snapshot] as const),
    };
  }

  /** The state values of a moment's snapshots. */
  static statesOf(c: MachineCells): MachineStates {
    return {
      agent: c.agent.value,
      turn: c.turn?.value ?? null,
      step: c.step?.value ?? null,
      attempt: c.attempt?.value ?? null,
      calls: Object.fromEntries(c.calls.map(([id, s]) => [id, s.value])),
    };
  }

  /** The state value of an open tool call (undefined: not open). */
  callState(callId: string): StateValue | undefined {
    return this.calls.get(callId)?.snapshot.value;
  }

  /** True while a turn is open. */
  hasOpenTurn(): boolean {
    return this.turn !== null;
  }

  /** True when the agent machine is waiting for `turn/start` after asking for it. */
  isClaiming(): boolean {
    return this.agent.snapshot.value === 'claiming';
  }

  /** Persisted snapshots of every open machine. */
  persist(): MachineSnapshots {
    return {
      agent: this.agent.persisted(),
      turn: this.turn?.persisted() ?? null,
      step: this.step?.persisted() ?? null,
      attempt: this.attempt?.persisted() ?? null,
      calls: Object.fromEntries([...this.calls].map(([id, c]) => [id, c.persisted()])),
    };
  }

  /** Stops every machine: no event is handled and no effect asked for after this. */
  stop(): void {
    this.stopped = true;
  }
}
