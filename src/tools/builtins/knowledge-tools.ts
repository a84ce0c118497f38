import { z } from 'zod';
import { ToolError } from '../../protocol/errors.js';
import type { ToolDefinition } from '../tool.js';

// The tools of what the agent knows beyond its task (design §10): skills it loads on demand, and
// memory files it reads and edits. All three are carried out by the agent runtime
// (src/actors/effects/knowledge-tools.ts), which records what the model was given in the log.

/** `load_skill`'s name: offered only when the turn indexed a skill. */
export const LOAD_SKILL = 'load_skill';
/** `memory`'s name. */
export const MEMORY = 'memory';
/** `memory_search`'s name: offered only when a memory file is past its budget (the model was given its index). */
export const MEMORY_SEARCH = 'memory_search';

const runtimeOnly = (name: string) => async (): Promise<never> => {
  throw new ToolError('tool.runtime_only', `${name} is carried out by the agent runtime, not executed as a tool`);
};

const LoadSkillInput = z.strictObject({
  name: z.string().trim().min(1).max(64).describe('The name of a skill from the list of skills in your instructions'),
});
/** Input of `load_skill`. */
export type LoadSkillInput = z.infer<typeof LoadSkillInput>;

/**
 * `load_skill {name}`: the body of a skill (its SKILL.md after the front matter) and the list of
 * its other files, which the agent reads with the normal tools. It changes nothing outside the
 * agent's log (`skill/loaded`), so it is a read-level tool with no effects.
 */
export const loadSkillTool: ToolDefinition<LoadSkillInput> = {
  name: LOAD_SKILL,
  version: '1',
  description:
    'Load a skill: its instructions, and the list of its other files (read them with read_file when the ' +
    'instructions say to). Call it when a task matches a skill\'s description in your instructions.',
  input: LoadSkillInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly(LOAD_SKILL),
};

/** Characters one memory entry (or the text it replaces) may have: memory is notes, not documents. */
export const MAX_MEMORY_TEXT = 2_000;

const MemoryInput = z.strictObject({
  action: z.enum(['add', 'replace', 'remove']).describe('add an entry, replace the text old_text with text, or remove the entry holding old_text'),
  file: z.enum(['memory', 'user']).describe('memory: facts about this workspace and ways of working verified here; user: the user\'s preferences'),
  text: z.string().trim().max(MAX_MEMORY_TEXT).optional().describe('The entry to add, or the text that replaces old_text'),
  old_text: z.string().trim().min(1).max(MAX_MEMORY_TEXT).optional().describe('Text of the entry to replace or remove, exactly as the file has it'),
}).superRefine((v, ctx) => {
  if ((v.action === 'add' || v.action === 'replace') && (v.text === undefined || v.text === '')) {
    ctx.addIssue({ code: 'custom', path: ['text'], message: `${v.action} needs text` });
  }
  if ((v.action === 'replace' || v.action === 'remove') && v.old_text === undefined) {
    ctx.addIssue({ code: 'custom', path: ['old_text'], message: `${v.action} needs old_text: the entry's text as the file has it` });
  }
});
/** Input of `memory`. */
export type MemoryInput = z.infer<typeof MemoryInput>;

/**
 * `memory {action, file, text?, old_text?}`: edits the workspace's MEMORY.md or the user's
 * USER.md (kept in the user's config dir, never in the repository). It changes a file outside the
 * agent's log, so it is a write-level tool: `auto-edit` allows it, `ask` asks. A rerun after a
 * crash finds its own edit and does not make it twice.
 */
export const memoryTool: ToolDefinition<MemoryInput> = {
  name: MEMORY,
  version: '1',
  description:
    'Keep a note for later sessions: add, replace or remove an entry of MEMORY.md (facts about this workspace, ' +
    'commands and ways of working you verified here) or USER.md (the user\'s preferences). Keep entries short ' +
    'and true; what you add is given to every later session in this workspace.',
  input: MemoryInput,
  level: 'write',
  executionSemantics: (input) => ({ effects: 'possible', recovery: { kind: 'idempotent', key: `memory:${input.file}` } }),
  resources: (input) => [{ key: `memory:${input.file}`, mode: 'write' }],
  execute: runtimeOnly(MEMORY),
};

const MemorySearchInput = z.strictObject({
  query: z.string().trim().min(1).max(500).describe('Words to look for in the memory files'),
});
/** Input of `memory_search`. */
export type MemorySearchInput = z.infer<typeof MemorySearchInput>;

/** `memory_search {query}`: excerpts of the memory files, each with its file, version and lines. Read-level, no effects. */
export const memorySearchTool: ToolDefinition<MemorySearchInput> = {
  name: MEMORY_SEARCH,
  version: '1',
  description:
    'Search MEMORY.md and USER.md when your instructions give only their index: returns the matching entries ' +
    'with their file and line numbers.',
  input: MemorySearchInput,
  level: 'read',
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  execute: runtimeOnly(MEMORY_SEARCH),
};
