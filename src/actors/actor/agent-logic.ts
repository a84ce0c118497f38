import type { ActorLogic, ActorRefFrom, InspectionEvent, Observer, StateMachine, StateValue } from 'xstate';
import type { agentMachine } from '../../machines/agent.machine.js';
import type { MachineEvent } from '../../machines/machine-event.js';
import { MachineSet, type MachineCells, type MachineSnapshots, type MachineStates } from './machine-set.js';
import type { MachineEffect } from './machine-effects.js';

// Every hosted agent is an XState actor (design §5, §7): `createActor` over this logic, which
// owns the agent's machines (agent, and the open turn, step, attempt and tool calls) and runs
// them on the compiled engine. XState's mailbox orders the events: one sent while a transition
// runs (an effect staging an event, an interrupt aborting the turn) is handled after it.

/** The agent machine's top-level states (idle, claiming, turn, stopped), read off its definition. */
type AgentState = typeof agentMachine extends StateMachine<any, any, any, any, any, any, any, infer V, any, any, any, any, any, any> ? V : never;

/**
 * What the agent is doing: its machine's state (a turn's `waiting_approval` and `waiting_input`
 * named on their own), or `stopped` once its actor stopped.
 */
export type AgentStatus = Extract<AgentState, string> | 'turn' | 'waiting_approval' | 'waiting_input' | 'stopped';

/**
 * The snapshot of a hosted agent: XState's status, the agent's own status, and the state value
 * of each of its open machines. The machines' state values are read off the compiled snapshots
 * this one holds (they never change), on first use: a snapshot nobody reads costs nothing more.
 */
export class AgentSnapshot {
  readonly output = undefined;
  readonly error = undefined;
  private states: MachineStates | null = null;

  /** @internal */
  constructor(
    readonly status: 'active' | 'stopped',
    private readonly cells: MachineCells,
  ) {}

  /** The agent machine's state value (what XState's tools show for the actor). */
  get value(): StateValue {
    return this.cells.agent.value;
  }

  /** What the agent is doing. */
  get agentStatus(): AgentStatus {
    if (this.status === 'stopped') return 'stopped';
    // the agent machine's states are flat but for a turn's: running, or waiting for a person's approval or answer
    const v = this.cells.agent.value;
    if (typeof v === 'string') return v as AgentStatus;
    const inTurn = (v as { turn?: string }).turn;
    return inTurn === 'waiting_approval' || inTurn === 'waiting_input' ? inTurn : 'turn';
  }

  /** State values of the open machines: agent, turn, step, attempt and every open tool call. */
  get machines(): MachineStates {
    return (this.states ??= MachineSet.statesOf(this.cells));
  }

  /** What an inspector that serializes snapshots writes. */
  toJSON(): { status: string; value: StateValue; agentStatus: AgentStatus; machines: MachineStates } {
    return { status: this.status, value: this.value, agentStatus: this.agentStatus, machines: this.machines };
  }
}

/** A persisted agent actor: its machines' persisted snapshots (what an LMDB snapshot holds). */
export interface PersistedAgentSnapshot {
  status: 'active';
  output: undefined;
  error: undefined;
  machines: MachineSnapshots;
}

/** The XState logic of one agent. */
export type AgentLogic = ActorLogic<AgentSnapshot, MachineEvent, { actorId: string }> & {
  /** The machines this logic runs (made by `getInitialSnapshot` or `restoreSnapshot`). @internal */
  readonly machines: MachineSet;
  /** Throws (once) an error a transition threw since the last call: the sender's to handle. @internal */
  rethrow(): void;
};

/** The XState actor of one hosted agent. */
export type AgentActorRef = ActorRefFrom<AgentLogic>;

/** Receives XState's inspection events of every agent a runtime hosts. */
export type InspectObserver = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

/**
 * The logic of one agent, its effects going to `sink`. A throw inside a transition is kept for
 * the sender rather than left to XState, which would put the actor in an error state and report
 * it as unhandled: the runtime's own failure path (`fail`) decides what an error stops.
 */
export function createAgentLogic(actorId: string, sink: (e: MachineEffect) => void): AgentLogic {
  let set: MachineSet | null = null;
  let thrown: { err: unknown } | null = null;
  const snap = (status: 'active' | 'stopped'): AgentSnapshot => new AgentSnapshot(status, set!.cells());
  return {
    get machines(): MachineSet {
      return set!;
    },
    rethrow(): void {
      const t = thrown;
      thrown = null;
      if (t) throw t.err;
    },
    getInitialSnapshot: () => {
      set = new MachineSet(actorId, sink, null);
      return snap('active');
    },
    restoreSnapshot: (persisted) => {
      set = new MachineSet(actorId, sink, (persisted as unknown as PersistedAgentSnapshot).machines);
      return snap('active');
    },
    transition: (snapshot, event) => {
      if ((event as { type: string }).type === 'xstate.stop') {
        set!.stop();
        return snap('stopped');
      }
      if (snapshot.status !== 'active') return snapshot;
      try {
        set!.handle(event);
      } catch (err) {
        thrown ??= { err };
      }
      return snap('active');
    },
    getPersistedSnapshot: (): PersistedAgentSnapshot => ({ status: 'active', output: undefined, error: undefined, machines: set!.persist() }),
  } as AgentLogic;
}
