import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
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

type Sink = (e: Effect) => void;

/** What the machines' transitions receive as their actor scope: where their actions go, nothing else. */
interface Scope {
  self: object;
  id: string;
  sessionId: string;
  system: object;
  logger: (...args: unknown[]) => void;
  defer: (fn: () => void) => void;
  stopChild: () => void;
  emit: () => void;
  actionExecutor: (action: { type: string; params: unknown; exec?: unknown }) => void;
}

// The effect sink of the transition being computed. Transitions are synchronous and never nest
// (a MachineSet queues an event routed while one of its transitions runs), so one slot suffices.
let current: Sink | null = null;

const noop = (): void => {};
const inertSystem = { _sendInspectionEvent: noop, _unregister: noop, scheduler: { schedule: noop, cancel: noop, cancelAll: noop } };

/**
 * The scope every transition of one machine runs with. The machines are pure: guards, `assign`
 * and named effect slots only (no timers, children or `sendTo`), so they need no XState actor —
 * an actor per machine per step (mailbox, system, observers) cost more than the transitions.
 * Named effect slots are handed to the current sink as data; built-in actions with an `exec` run.
 */
function scopeFor(machine: AnyStateMachine): Scope {
  const effects = new Set(Object.keys(machine.implementations.actions));
  const scope: Scope = {
    self: { id: machine.id, sessionId: machine.id },
    id: machine.id,
    sessionId: machine.id,
    system: inertSystem,
    logger: noop,
    defer: (fn) => fn(),
    stopChild: noop,
    emit: noop,
    actionExecutor: (action) => {
      if (effects.has(action.type)) current?.({ name: action.type, params: action.params });
      else if (typeof action.exec === 'function') (action.exec as (...a: unknown[]) => void)();
    },
  };
  return scope;
}

const KINDS = {
  agent: agentMachine,
  turn: turnMachine,
  step: stepMachine,
  attempt: attemptMachine,
  call: toolCallMachine,
};
const SCOPES = new Map<AnyStateMachine, Scope>(Object.values(KINDS).map((m) => [m as AnyStateMachine, scopeFor(m as AnyStateMachine)]));

// The event types each machine handles: an event no state of a machine names is not sent to it,
// which saves most of the routing cost (each send is a macrostep).
const HANDLES = {
  agent: new Set<string>(agentMachine.events),
  turn: new Set<string>(turnMachine.events),
  step: new Set<string>(stepMachine.events),
  attempt: new Set<string>(attemptMachine.events),
  call: new Set<string>(toolCallMachine.events),
};

/** One machine's current snapshot; `send` computes the next one and hands its effects to the sink. */
class Cell {
  constructor(
    readonly machine: AnyStateMachine,
    public snapshot: AnyMachineSnapshot,
  ) {}

  get context(): any {
    return this.snapshot.context;
  }

  get done(): boolean {
    return this.snapshot.status === 'done';
  }

  persisted(): unknown {
    return this.machine.getPersistedSnapshot(this.snapshot);
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
  private readonly sink: Sink;
  /** Events routed while a transition of this set runs (an effect staging one): handled in order after it. */
  private readonly pending: MachineEvent[] = [];
  private running = false;
  private stopped = false;

  constructor(actorId: string, sink: Sink, snapshots: MachineSnapshots | null = null) {
    this.sink = sink;
    const restore = (machine: AnyStateMachine, snapshot: unknown): Cell =>
      new Cell(machine, machine.restoreSnapshot!(snapshot as never, SCOPES.get(machine) as never) as AnyMachineSnapshot);
    if (snapshots) {
      this.agent = restore(KINDS.agent, snapshots.agent);
      if (snapshots.turn) this.turn = restore(KINDS.turn, snapshots.turn);
      if (snapshots.step) this.step = restore(KINDS.step, snapshots.step);
      if (snapshots.attempt) this.attempt = restore(KINDS.attempt, snapshots.attempt);
      for (const [id, snap] of Object.entries(snapshots.calls)) this.calls.set(id, restore(KINDS.call, snap));
    } else {
      this.agent = this.open(KINDS.agent, { actorId });
    }
  }

  /** Creates a machine's initial snapshot; its entry effects go to this set's sink. */
  private open(machine: AnyStateMachine, input: object): Cell {
    const prev = current;
    current = this.stopped ? null : this.sink;
    try {
      return new Cell(machine, machine.getInitialSnapshot(SCOPES.get(machine) as never, input) as AnyMachineSnapshot);
    } finally {
      current = prev;
    }
  }

  /** One macrostep of one machine; its effects go to this set's sink. */
  private deliver(cell: Cell, e: MachineEvent): void {
    if (cell.done) return;
    const prev = current;
    current = this.sink;
    try {
      cell.snapshot = cell.machine.transition(cell.snapshot, e as never, SCOPES.get(cell.machine) as never) as AnyMachineSnapshot;
    } finally {
      current = prev;
    }
  }

  /**
   * Handles one event now, or after the transition in progress when routed from one of its
   * effects (in order, as an actor's mailbox would).
   */
  private handle(e: MachineEvent): void {
    if (this.stopped) return;
    if (this.running) {
      this.pending.push(e);
      return;
    }
    this.running = true;
    try {
      this.dispatch(e);
      while (this.pending.length > 0 && !this.stopped) this.dispatch(this.pending.shift()!);
    } finally {
      this.running = false;
      this.pending.length = 0;
    }
  }

  private dispatch(e: MachineEvent): void {
    if (e.type === 'recover' || e.type === 'tick' || e.type === 'abort') this.signalNow(e as Exclude<MachineEvent, ActorEvent>);
    else this.routeNow(e as ActorEvent);
  }

  /** Routes one log event: opens the machine it starts, then sends it to every open machine. */
  route(e: ActorEvent): void {
    this.handle(e);
  }

  private routeNow(e: ActorEvent): void {
    switch (e.type) {
      case 'turn/start':
        this.turn = this.open(KINDS.turn, { turnId: e.turn!, budgets: e.data.settings.budgets });
        break;
      case 'step/start':
        this.step = this.open(KINDS.step, {
          stepId: e.step!,
          index: e.data.index,
          maxAttempts: e.data.maxAttempts,
          toolBudgetLeft: e.data.toolBudgetLeft,
        });
        break;
      case 'attempt/start':
        this.attempt = this.open(KINDS.attempt, { attemptId: e.attempt!, index: e.data.index, requestDigest: e.data.requestDigest });
        break;
      case 'tool/call':
        this.calls.set(
          e.call!,
          this.open(KINDS.call, {
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
    this.handle(e);
  }

  private signalNow(e: Exclude<MachineEvent, ActorEvent>): void {
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
  states(): { agent: unknown; turn: unknown; step: unknown; attempt: unknown; calls: Record<string, unknown> } {
    return {
      agent: this.agent.snapshot.value,
      turn: this.turn?.snapshot.value ?? null,
      step: this.step?.snapshot.value ?? null,
      attempt: this.attempt?.snapshot.value ?? null,
      calls: Object.fromEntries([...this.calls].map(([id, c]) => [id, c.snapshot.value])),
    };
  }

  /** True while a turn is open. */
  hasOpenTurn(): boolean {
    return this.turn !== null;
  }

  /** True when the agent machine is waiting for `turn/start` after asking for it. */
  isClaiming(): boolean {
    return this.agent.snapshot.value === 'claiming';
  }

  /** The step machine's state value, or null when no step is open. */
  stepState(): unknown {
    return this.step?.snapshot.value ?? null;
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
    this.pending.length = 0;
  }
}
