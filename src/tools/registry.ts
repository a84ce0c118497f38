import { z } from 'zod';
import type { ToolSpec } from '../protocol/tool-spec.js';
import type { ExecutionSemantics, PlanContext, ToolDefinition } from './tool.js';
import { valueAt } from '../protocol/value-at.js';
import { ConfigError } from '../protocol/errors.js';

/** A model's tool call after resolution: ready to run, or an observation the model must see. */
export type ResolvedCall =
  | { status: 'valid'; tool: ToolDefinition<any>; input: unknown; effects: ExecutionSemantics }
  | { status: 'unknown_tool'; error: string }
  | { status: 'invalid_arguments'; error: string };

/** The set of tools an actor can offer, by name. */
export interface ToolRegistry {
  get(name: string): ToolDefinition<any> | undefined;
  /** All tool names, sorted. */
  names(): string[];
  /** Specs for the model, sorted by name so the prompt prefix is stable; only `visible` ones when given. */
  specs(visible?: string[]): ToolSpec[];
  /** Resolves and validates one call; a tool outside `visible` (when not null) is answered as unknown. */
  resolveCall(name: string, rawArguments: string, visible: string[] | null, ctx?: PlanContext): ResolvedCall;
}

const MAX_ISSUES = 3;

/** A tool whose semantics say `reconcile` but that has no `reconcile` to ask: a definition error, never a call's. */
function noReconcile(tool: ToolDefinition<any>): ConfigError {
  return new ConfigError('tool.reconcile_missing', `tool "${tool.name}" declares reconcile recovery but has no reconcile function`, {
    hint: 'give it reconcile(input, ctx) answering applied, not_applied or unknown, or declare idempotent or manual recovery',
  });
}

function reconciles(s: ExecutionSemantics): boolean {
  return s.effects === 'possible' && s.recovery.kind === 'reconcile';
}

/**
 * At registration: semantics that do not depend on the input are asked once with none (a tool
 * whose semantics read its input throws here and is checked at each call instead).
 */
function checkReconcile(tool: ToolDefinition<any>): void {
  if (tool.reconcile) return;
  let semantics: ExecutionSemantics;
  try {
    semantics = tool.executionSemantics(undefined, { workspace: '.' });
  } catch {
    return;
  }
  if (semantics && reconciles(semantics)) throw noReconcile(tool);
}

/**
 * Builds a registry; duplicate names throw, since a second definition would silently shadow the
 * first, and so does a tool with reconcile semantics and no `reconcile` (a ConfigError).
 */
export function createToolRegistry(tools: ToolDefinition<any>[]): ToolRegistry {
  const byName = new Map<string, ToolDefinition<any>>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new Error(`duplicate tool name "${tool.name}" in the tool registry`);
    checkReconcile(tool);
    byName.set(tool.name, tool);
  }
  const sortedNames = [...byName.keys()].sort();
  const specCache = new Map<string, ToolSpec>();

  const specOf = (tool: ToolDefinition<any>): ToolSpec => {
    let spec = specCache.get(tool.name);
    if (!spec) {
      // `io: 'input'` describes what the model sends: fields with defaults stay optional.
      const { $schema: _drop, ...parameters } = z.toJSONSchema(tool.input, { io: 'input' }) as Record<string, unknown>;
      spec = { name: tool.name, description: tool.description, parameters };
      specCache.set(tool.name, spec);
    }
    return spec;
  };

  return {
    get: (name) => byName.get(name),
    names: () => [...sortedNames],
    specs(visible) {
      const allowed = visible ? new Set(visible) : null;
      return sortedNames.filter((n) => !allowed || allowed.has(n)).map((n) => specOf(byName.get(n)!));
    },
    resolveCall(name, rawArguments, visible, ctx = { workspace: '.' }) {
      const tool = byName.get(name);
      const offered = visible ? sortedNames.filter((n) => visible.includes(n)) : sortedNames;
      // A hidden tool gets the very same answer as a missing one: its existence is not revealed.
      if (!tool || !offered.includes(name)) {
        const list = offered.length > 0 ? offered.join(', ') : 'none';
        return { status: 'unknown_tool', error: `unknown tool "${name}"; available tools: ${list}` };
      }
      const parsed = parseArguments(tool.name, rawArguments);
      if (!parsed.ok) return { status: 'invalid_arguments', error: parsed.error };
      const result = tool.input.safeParse(parsed.value);
      if (!result.success) {
        return { status: 'invalid_arguments', error: describeIssues(tool.name, result.error.issues, parsed.value) };
      }
      const effects = tool.executionSemantics(result.data, ctx);
      // semantics that depend on the input could not be checked at registration
      if (!tool.reconcile && reconciles(effects)) throw noReconcile(tool);
      return { status: 'valid', tool, input: result.data, effects };
    },
  };
}

function parseArguments(tool: string, raw: string): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  // Some models send an empty string for a call without arguments; it means `{}`.
  if (raw.trim() === '') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    const reason = (err as Error).message.split('\n')[0]!.slice(0, 160);
    return { ok: false, error: `arguments for ${tool} are not valid JSON (${reason}); send one JSON object` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, error: `arguments for ${tool} must be a JSON object, got ${kindOf(value)}` };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

function describeIssues(tool: string, issues: z.core.$ZodIssue[], input: Record<string, unknown>): string {
  const parts = issues.slice(0, MAX_ISSUES).map((issue) => describeIssue(issue, input));
  const more = issues.length > MAX_ISSUES ? `; and ${issues.length - MAX_ISSUES} more` : '';
  return `invalid arguments for ${tool}: ${parts.join('; ')}${more}`;
}

function describeIssue(issue: z.core.$ZodIssue, input: Record<string, unknown>): string {
  const field = issue.path.length > 0 ? `field "${issue.path.map(String).join('.')}"` : 'arguments';
  switch (issue.code) {
    case 'invalid_type': {
      const value = valueAt(input, issue.path);
      if (value === undefined) return `${field} is required (expected ${issue.expected})`;
      return `${field} must be of type ${issue.expected}, got ${kindOf(value)}`;
    }
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_value':
      return `${field} must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'too_small':
      return `${field} must be ${bound(issue.origin, issue.inclusive === false ? 'more than' : 'at least', issue.minimum)}`;
    case 'too_big':
      return `${field} must be ${bound(issue.origin, issue.inclusive === false ? 'less than' : 'at most', issue.maximum)}`;
    default:
      return `${field}: ${issue.message}`;
  }
}

function bound(origin: string, relation: string, limit: number | bigint): string {
  if (origin === 'string') return `${relation} ${String(limit)} characters long`;
  if (origin === 'array') return `${relation} ${String(limit)} items long`;
  return `${relation} ${String(limit)}`;
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' && Number.isInteger(value)) return 'an integer';
  return `a ${typeof value}`;
}
