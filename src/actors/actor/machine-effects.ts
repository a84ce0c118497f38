import type { ParameterizedObject, StateMachine } from 'xstate';
import type { agentMachine } from '../../machines/agent.machine.js';
import type { attemptMachine } from '../../machines/attempt.machine.js';
import type { stepMachine } from '../../machines/step.machine.js';
import type { toolCallMachine } from '../../machines/tool-call.machine.js';
import type { turnMachine } from '../../machines/turn.machine.js';

// The effects the machines can ask for, read off their `slot<P>()` declarations: a slot added,
// renamed or retyped in a machine changes these types, and the effect table stops compiling
// until a handler matches it. Nothing here is a list kept by hand.

/** The action slots one machine declares, as XState types them: `{ type: name; params: P }`. */
type SlotsOf<M> =
  M extends StateMachine<any, any, any, any, infer A extends ParameterizedObject, any, any, any, any, any, any, any, any, any> ? A : never;

type Slot =
  | SlotsOf<typeof agentMachine>
  | SlotsOf<typeof turnMachine>
  | SlotsOf<typeof stepMachine>
  | SlotsOf<typeof attemptMachine>
  | SlotsOf<typeof toolCallMachine>;

/** The name of an effect slot of one of the agent's machines. */
export type EffectName = Slot['type'];

/** The params a machine computes for the effect `N`. */
export type EffectParams<N extends EffectName> = Extract<Slot, { type: N }>['params'];

/** An effect a machine asked for, discriminated on its name. */
export type MachineEffect = { [N in EffectName]: { name: N; params: EffectParams<N> } }[EffectName];
