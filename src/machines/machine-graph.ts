import type { AnyStateMachine } from 'xstate';
import type { MachineDefinition, MachineStateDefinition } from '../protocol/gateway.js';
import { agentMachine } from './agent.machine.js';
import { attemptMachine } from './attempt.machine.js';
import { stepMachine } from './step.machine.js';
import { toolCallMachine } from './tool-call.machine.js';
import { turnMachine } from './turn.machine.js';

// The machines as data for a client to draw (the gateway's `GET /v1/machines`): read from the
// machines' own state nodes, so a state or transition added to a machine shows without a list
// kept here. Targets are paths from the machine's root (`awaiting_approval.waiting`).

/** The shape of an XState state node this reads (v5's `StateNode`, the fields it needs). */
interface NodeLike {
  type: MachineStateDefinition['type'];
  path: string[];
  states: Record<string, NodeLike>;
  initial?: { target: ReadonlyArray<{ path: string[] }> };
  transitions: Map<string, ReadonlyArray<{ target?: ReadonlyArray<{ path: string[] }> }>>;
  always?: ReadonlyArray<{ target?: ReadonlyArray<{ path: string[] }> }>;
}

/** Every target of a list of transitions, each once; a transition with no target stays in its state and draws no edge. */
function targetsOf(ts: ReadonlyArray<{ target?: ReadonlyArray<{ path: string[] }> }>): string[] {
  const out = new Set<string>();
  for (const t of ts) for (const n of t.target ?? []) out.add(n.path.join('.'));
  return [...out];
}

function stateOf(node: NodeLike): MachineStateDefinition {
  const on: Record<string, string[]> = {};
  for (const [event, ts] of node.transitions) {
    const targets = targetsOf(ts);
    if (targets.length > 0) on[event] = targets;
  }
  if (node.always && node.always.length > 0) {
    const targets = targetsOf(node.always);
    if (targets.length > 0) on[''] = targets;
  }
  const def: MachineStateDefinition = { type: node.type, on };
  const initial = node.initial?.target[0];
  if (initial) def.initial = initial.path[initial.path.length - 1]!;
  const children = Object.entries(node.states);
  if (children.length > 0) def.states = Object.fromEntries(children.map(([k, s]) => [k, stateOf(s)]));
  return def;
}

/** One machine as `{id, initial, states}`. */
export function machineDefinition(machine: AnyStateMachine): MachineDefinition {
  const root = machine.root as unknown as NodeLike;
  const top = stateOf(root);
  return { id: machine.id, ...(top.initial ? { initial: top.initial } : {}), states: top.states ?? {} };
}

/** The runtime's machines, outermost first: agent, turn, step, attempt, tool call. */
export function machineDefinitions(): MachineDefinition[] {
  return [agentMachine, turnMachine, stepMachine, attemptMachine, toolCallMachine].map((m) => machineDefinition(m));
}
