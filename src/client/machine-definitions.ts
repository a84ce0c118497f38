import type { AnyStateMachine } from 'xstate';
import { agentMachine } from '../machines/agent.machine.js';
import { attemptMachine } from '../machines/attempt.machine.js';
import { stepMachine } from '../machines/step.machine.js';
import { toolCallMachine } from '../machines/tool-call.machine.js';
import { turnMachine } from '../machines/turn.machine.js';

// What a client draws a statechart from (`GET /v1/machines`, design §11): the states and
// transitions of the XState machines the actors run, read from their resolved definitions so the
// picture cannot drift from the code. Guards and actions are left out: a client draws, it does
// not decide.

/** One state of a machine definition: its kind, where each event may take it, its children. */
export interface StateDefinition {
  /** XState's node type, when not `atomic`: `compound`, `parallel`, `final`, `history`. */
  type?: string;
  /** The initial child of a compound state (its key). */
  initial?: string;
  /**
   * Event type → the targets its transitions may take, as dotted paths from the machine's root
   * (`generating.launching`); a guarded event lists each candidate once, a targetless one none.
   * Eventless (`always`) transitions are listed under the event `always`.
   */
  on: Record<string, string[]>;
  states?: Record<string, StateDefinition>;
}

/** A machine as `GET /v1/machines` serves it. */
export interface MachineDefinition {
  id: string;
  initial: string;
  /** Transitions of the root: any state may take them. */
  on: Record<string, string[]>;
  states: Record<string, StateDefinition>;
}

// The parts of XState's resolved StateNode read here.
interface XNode {
  key: string;
  path: string[];
  type: string;
  states: Record<string, XNode>;
  transitions: Map<string, Array<{ target?: XNode[] }>>;
  always?: Array<{ target?: XNode[] }>;
  initial?: { target: XNode[] };
}

function transitionsOf(n: XNode): Record<string, string[]> {
  const on: Record<string, string[]> = {};
  const add = (event: string, ts: Array<{ target?: XNode[] }>): void => {
    const targets = new Set<string>();
    for (const t of ts) for (const x of t.target ?? []) targets.add(x.path.join('.'));
    on[event] = [...targets];
  };
  for (const [event, ts] of n.transitions) add(event, ts);
  if (n.always && n.always.length > 0) add('always', n.always);
  return on;
}

function stateOf(n: XNode): StateDefinition {
  const def: StateDefinition = { on: transitionsOf(n) };
  if (n.type !== 'atomic') def.type = n.type;
  const initial = n.initial?.target[0];
  if (initial) def.initial = initial.key;
  const keys = Object.keys(n.states);
  if (keys.length > 0) def.states = Object.fromEntries(keys.map((k) => [k, stateOf(n.states[k]!)]));
  return def;
}

/** The definition of one XState machine, in the shape clients draw. */
export function machineDefinition(machine: AnyStateMachine): MachineDefinition {
  const root = machine.root as unknown as XNode;
  return {
    id: machine.id,
    initial: root.initial?.target[0]?.key ?? Object.keys(root.states)[0] ?? '',
    on: transitionsOf(root),
    states: Object.fromEntries(Object.entries(root.states).map(([k, n]) => [k, stateOf(n)])),
  };
}

/** The machines of an agent (agent, turn, step, attempt, tool call), as `GET /v1/machines` serves them. */
export function machineDefinitions(): { machines: MachineDefinition[] } {
  return { machines: [agentMachine, turnMachine, stepMachine, attemptMachine, toolCallMachine].map(machineDefinition) };
}
