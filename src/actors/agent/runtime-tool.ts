import type { OpenCall } from '../../store/projection.js';
import type { EffectContext } from './effect-context.js';

/** One started call of a tool the runtime carries out itself (it commits facts of the agent, not effects on the world). */
export interface RuntimeToolRun {
  call: OpenCall;
  /** The call's validated input. */
  input: unknown;
  ids: { turn: string; step: string; call: string };
  /** True when recovery runs a call a crash left started. */
  rerun: boolean;
}

/**
 * A built-in tool the runtime runs in the actor (`ask_user`, `update_plan`, `stop`, `get_goal`, `update_goal`): its `tool/start` is
 * committed like any call's, then `run` stages the facts it makes and, when it is done, the
 * call's end. Its `ToolDefinition` (schema, semantics, policy level) lives with the other
 * built-ins; its `execute` is never called.
 */
export interface RuntimeTool {
  readonly name: string;
  run(a: EffectContext, r: RuntimeToolRun): Promise<void>;
}
