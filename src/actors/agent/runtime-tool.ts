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

/**
 * Stages a runtime tool's result: `ok` when there is no error (a business failure the model reads,
 * never retried). Its output is the agent's own (its goal, its memory and skills as the runtime
 * read them): nothing from outside the agent, so it is not wrapped as untrusted data.
 */
export function stageRuntimeResult(a: EffectContext, r: RuntimeToolRun, tool: string, output: string, error: { code: string; message: string } | null): void {
  a.stage({
    type: 'tool/result',
    ...r.ids,
    data: {
      ok: error === null,
      output,
      error: error ? { ...error, retryable: false } : null,
      durationMs: 0,
      artifact: null,
      source: `tool:${tool}`,
      trust: 'trusted',
    },
  });
}
