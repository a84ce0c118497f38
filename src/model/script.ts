import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';
import { jsonErrorPosition } from './json-error-position.js';
import { valueAt } from '../protocol/value-at.js';

// The script format is a contract with tests outside this repo: extend it, never rename.
// Objects are strict so a typo ("contnet") fails loudly instead of being silently ignored.

/** One tool call a scripted response makes; `arguments` as a string is passed through raw. */
export const ScriptToolCallSchema = z.strictObject({
  id: z.string().min(1).optional(),
  name: z.string().min(1),
  arguments: z
    .union([z.record(z.string(), z.unknown()), z.string()], {
      error: 'expected an object of arguments, or a string passed through raw',
    })
    .optional(),
});

/** One scripted model response: content and/or tool calls, or an error to throw. */
export const ScriptResponseSchema = z.strictObject({
  content: z.string().nullable().optional(),
  tool_calls: z.array(ScriptToolCallSchema).optional(),
  finish_reason: z.enum(['stop', 'tool_calls', 'length', 'content_filter']).optional(),
  usage: z
    .strictObject({
      input_tokens: z.number().int().nonnegative(),
      output_tokens: z.number().int().nonnegative(),
    })
    .optional(),
  error: z
    .strictObject({
      // `overloaded` is accepted beyond the documented four: it is a retryable class too.
      type: z.enum(['rate_limit', 'server', 'network', 'context_overflow', 'overloaded']),
      retry_after_ms: z.number().int().nonnegative().optional(),
    })
    .optional(),
  delay_ms: z.number().int().nonnegative().optional(),
});
/** One scripted model response. */
export type ScriptResponse = z.infer<typeof ScriptResponseSchema>;

const ResponsesFileSchema = z.strictObject({
  responses: z.array(ScriptResponseSchema),
  /**
   * What the agent's compaction attempts answer, in order (they do not take from `responses`);
   * absent, or past its end: a deterministic summary built from the compacted range.
   */
  summaries: z.array(z.string()).optional(),
});
const AgentsFileSchema = z.strictObject({ agents: z.record(z.string(), ResponsesFileSchema) });

/** A script file: one agent's responses, or responses per agent name (the top agent is `main`). */
export const ScriptSchema = z.union([ResponsesFileSchema, AgentsFileSchema]);
/** A parsed script file. */
export type Script = z.infer<typeof ScriptSchema>;

/** Loads the responses of one agent from a script file; every failure is one clear ConfigError line. */
export async function loadScript(path: string, agentName = 'main'): Promise<ScriptResponse[]> {
  return (await loadAgentScript(path, agentName)).responses;
}

/** One agent's part of a script file: its responses and its compaction summaries. */
export interface AgentScript {
  responses: ScriptResponse[];
  summaries?: string[];
}

/** Loads one agent's responses and summaries from a script file; failures as in `loadScript`. */
export async function loadAgentScript(path: string, agentName = 'main'): Promise<AgentScript> {
  const script = await loadScriptFile(path);
  if ('responses' in script) {
    if (agentName === 'main') return script;
    throw scriptError(
      `script ${path} has no agent "${agentName}": it holds only the main agent's responses`,
      `use { "agents": { "main": {...}, "${agentName}": {...} } }`,
    );
  }
  const agent = script.agents[agentName];
  if (agent) return agent;
  const known = Object.keys(script.agents).map((n) => `"${n}"`).join(', ') || 'none';
  throw scriptError(`script ${path} has no agent "${agentName}" (agents: ${known})`);
}

/** Loads and checks a whole script file, every agent's responses; failures as in `loadScript`. */
export async function loadScriptFile(path: string): Promise<Script> {
  return parseScript(await readScript(path), path);
}

async function readScript(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw scriptError(`script file not found: ${path}`, 'pass --model scripted:<path to a JSON script>', err);
    }
    if (code === 'EISDIR') {
      throw scriptError(`script path is a directory: ${path}`, 'pass --model scripted:<path to a JSON script>', err);
    }
    throw scriptError(`cannot read script file ${path} (${code ?? String(err)})`, undefined, err);
  }
}

function parseScript(raw: string, path: string): Script {
  // Editors on Windows write a BOM, which JSON.parse rejects; it carries no meaning.
  const text = raw.charCodeAt(0) === 0xfeff ? raw.slice(1) : raw;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    const at = jsonErrorPosition(text);
    const where = at
      ? `${at.problem} at line ${at.line}, column ${at.column} (position ${at.offset})`
      : (err as Error).message.split('\n')[0];
    throw scriptError(`script ${path} is not valid JSON: ${where}`, undefined, err);
  }
  // Pick the form by its key, so errors describe that form rather than a vague union failure.
  const isAgents = typeof json === 'object' && json !== null && !Array.isArray(json) && 'agents' in json;
  if (!isAgents && !(typeof json === 'object' && json !== null && !Array.isArray(json) && 'responses' in json)) {
    throw scriptError(
      `script ${path} is invalid at (root): expected { "responses": [...] } or { "agents": { "main": { "responses": [...] } } }`,
    );
  }
  const result = (isAgents ? AgentsFileSchema : ResponsesFileSchema).safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const extra = result.error.issues.length - 1;
  const more = extra > 0 ? ` (and ${extra} more problem${extra > 1 ? 's' : ''})` : '';
  // A missing key is reported at the object that lacks it, naming the key.
  const missing = issue.code === 'invalid_type' && issue.path.length > 0 && valueAt(json, issue.path) === undefined;
  const at = missing ? issue.path.slice(0, -1) : issue.path;
  const what = missing ? `missing required key "${String(issue.path.at(-1))}" (${issue.expected})` : describeIssue(issue, json);
  throw scriptError(`script ${path} is invalid at ${jsonPath(at)}: ${what}${more}`);
}

function scriptError(message: string, hint?: string, cause?: unknown): ConfigError {
  return new ConfigError('config.script', message, { hint, cause });
}

/** `responses[0].tool_calls[1].name`, with odd keys quoted. */
function jsonPath(path: PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(String(key))) out += out ? `.${String(key)}` : String(key);
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

function describeIssue(issue: z.core.$ZodIssue, root: unknown): string {
  switch (issue.code) {
    case 'invalid_type': {
      return `expected ${issue.expected}, got ${kindOf(valueAt(root, issue.path))}`;
    }
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(valueAt(root, issue.path))}`;
    default:
      return issue.message;
  }
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
