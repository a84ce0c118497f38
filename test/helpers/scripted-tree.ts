import { createScriptedModel } from '../../src/model/scripted-model.js';
import type { ScriptResponse } from '../../src/model/script.js';
import type { TurnSettings } from '../../src/protocol/events.js';

// Scripted trees for tests: one script per agent name, as the scripted model's `{agents: …}` file
// form plays them (`main` is the top agent; a child plays the name it was spawned with).

/** A final answer. */
export const answer = (content: string): ScriptResponse => ({ content, usage: { input_tokens: 50, output_tokens: 5 } });

/** One tool call. */
export const call = (name: string, args: Record<string, unknown>): ScriptResponse => ({ tool_calls: [{ name, arguments: args }], usage: { input_tokens: 60, output_tokens: 6 } });

/**
 * A `modelFor` giving each agent of a tree the responses of its name, at its log's cursor. A
 * function of scripts is read at each turn's start, so a test may fill in a later turn's meanwhile.
 */
export function treeModels(scripts: Record<string, ScriptResponse[]> | (() => Record<string, ScriptResponse[]>)) {
  const read = typeof scripts === 'function' ? scripts : () => scripts;
  return async (settings: TurnSettings, cursor: number) => createScriptedModel({ responses: read()[settings.agentName ?? 'main'] ?? [], cursor });
}
