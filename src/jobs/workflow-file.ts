import { readFileSync } from 'node:fs';
import { parse, TomlError } from 'smol-toml';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';

/** A node ID: it names a state's entry in the run's context and a job, so it stays plain. */
const NodeIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be letters, digits, _ or - (at most 64)');

/** A literal a `when` compares with: JSON scalars only, so a comparison is `===` and nothing else. */
const LiteralSchema = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/**
 * A node's condition: a path into an earlier model node's JSON output compared with a literal
 * (`{node: "triage", path: "verdict.kind", equals: "regression"}`). Never code: a path and `===`.
 * An outcome condition (`a` succeeded / failed) would say nothing, since a node runs only when
 * every node it needs succeeded; what varies between runs is what a model node answered.
 */
export const WhenSchema = z.strictObject({
  node: NodeIdSchema,
  /** Dotted keys (array indices as numbers: `items.0.name`); absent: the whole output. */
  path: z.string().regex(/^[^.]+(\.[^.]+)*$/, 'must be dotted keys such as verdict.kind').optional(),
  equals: LiteralSchema.optional(),
  not_equals: LiteralSchema.optional(),
});
/** A node's condition on an earlier model node's output. */
export type When = z.infer<typeof WhenSchema>;

/** The keys each kind of node takes beyond the common ones (what another kind's key is refused with). */
const RUN_KEYS = { shell: ['command'], model: ['prompt', 'output_schema'], agent: ['task', 'tools'] } as const;
/** What a node runs: a sandboxed shell command, one model request, or a one-shot subagent. */
export type NodeRun = keyof typeof RUN_KEYS;

/** One node of a workflow file, as written (the checks across fields are in `checkWorkflow`). */
export const WorkflowNodeSchema = z.strictObject({
  id: NodeIdSchema,
  run: z.enum(['shell', 'model', 'agent']),
  /** shell: the command, run in the same sandbox and policy as the `shell` tool. */
  command: z.string().refine((s) => s.trim() !== '', 'is empty').optional(),
  /** model: the request's prompt. */
  prompt: z.string().refine((s) => s.trim() !== '', 'is empty').optional(),
  /** model: a JSON Schema the answer must match (a bad answer is retried with the reason). */
  output_schema: z.record(z.string(), z.unknown()).optional(),
  /** agent: the subagent's task. */
  task: z.string().refine((s) => s.trim() !== '', 'is empty').optional(),
  /** agent: the tools the subagent may call (default: its parent's). */
  tools: z.array(z.string().min(1)).optional(),
  /** Nodes that must succeed before this one starts. */
  needs: z.array(NodeIdSchema).default([]),
  when: WhenSchema.optional(),
  /** Runs again after a failure, up to this many times. */
  retries: z.number().int().min(0).max(100).default(0),
  timeout_seconds: z.number().int().positive().optional(),
});
/** One validated node. */
export type WorkflowNode = z.infer<typeof WorkflowNodeSchema>;

/** A workflow file's shape. */
export const WorkflowSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be letters, digits, _, . or - (at most 64)'),
  nodes: z.array(WorkflowNodeSchema).min(1, 'the workflow has no nodes; add at least one'),
});
/** A validated workflow: nodes in file order, every `needs` known, no cycle, every `when` reading an ancestor. */
export type Workflow = z.infer<typeof WorkflowSchema>;

/** Reads and validates a workflow file (`.json` or `.toml`); every problem is a line of one ConfigError. */
export function readWorkflowFile(path: string): Workflow {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError('config.workflow', `cannot read ${path}: ${(err as Error).message}`, { hint: 'give the path of a .json or .toml workflow file' });
  }
  return parseWorkflow(text, path);
}

/** Validates a workflow's text; `source` is its file name, whose extension says JSON or TOML and which each error line starts with. */
export function parseWorkflow(text: string, source: string): Workflow {
  const raw = parseText(text, source);
  const parsed = WorkflowSchema.safeParse(raw);
  const problems = parsed.success ? checkWorkflow(parsed.data) : parsed.error.issues.map((i) => describeIssue(i, raw));
  if (problems.length > 0) throw new ConfigError('config.workflow', problems.map((p) => `${source}: ${p}`).join('\n'));
  return parsed.data!;
}

function parseText(text: string, source: string): unknown {
  const ext = /\.([^./\\]+)$/.exec(source)?.[1]?.toLowerCase();
  if (ext === 'json') {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new ConfigError('config.workflow', `${source} is not valid JSON: ${(err as Error).message.split('\n')[0]}; fix the file`);
    }
  }
  if (ext === 'toml') {
    try {
      return parse(text);
    } catch (err) {
      const where = err instanceof TomlError ? ` at line ${err.line}, column ${err.column}` : '';
      throw new ConfigError('config.workflow', `${source} is not valid TOML${where}: ${(err as Error).message.split('\n')[0]}; fix the file`);
    }
  }
  throw new ConfigError('config.workflow', `${source} is neither JSON nor TOML; write the workflow as a .json or .toml file`);
}

/** One zod issue as a line naming the node (by its ID when it has one) and the field. */
function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  const missing = (i: z.core.$ZodIssue): boolean => missingIn(raw, i);
  const [top, index, field, ...rest] = issue.path;
  if (top !== 'nodes' || typeof index !== 'number') {
    const key = issue.path.join('.');
    if (issue.path.length === 0 && issue.code === 'invalid_type') return 'is not a workflow; write a table (object) with name and nodes';
    if (issue.code === 'unrecognized_keys') return `unknown key ${issue.keys.join(', ')}; a workflow has only name and nodes`;
    if (missing(issue)) return `${key} is missing; add it`;
    return `${key}: ${issue.message}`;
  }
  const node = (raw as { nodes: unknown[] }).nodes[index] as Record<string, unknown> | undefined;
  const name = typeof node?.id === 'string' && node.id !== '' ? `node ${node.id}` : `node ${index + 1} (no id)`;
  if (field === undefined) {
    if (issue.code === 'unrecognized_keys') {
      const known = Object.keys(WorkflowNodeSchema.shape).join(', ');
      return `${name}: unknown key ${issue.keys.join(', ')}; a node takes ${known}`;
    }
    return `${name}: ${issue.message}; a node is a table of id, run and the fields of its run`;
  }
  const key = [field, ...rest].join('.');
  if (field === 'run') return `${name}: run ${missing(issue) ? 'is missing' : 'is not shell, model or agent'}; set run to "shell", "model" or "agent"`;
  if (missing(issue)) return `${name}: ${key} is missing; add it`;
  if (issue.code === 'unrecognized_keys' && field === 'when') return `${name}: when has unknown key ${issue.keys.join(', ')}; it takes node, path and equals or not_equals`;
  return `${name}: ${key}: ${issue.message}`;
}

/** Whether an issue is about a key the file does not have (zod words that differently for an enum). */
function missingIn(raw: unknown, issue: z.core.$ZodIssue): boolean {
  if (issue.code !== 'invalid_type' && issue.code !== 'invalid_value') return false;
  let v = raw;
  for (const key of issue.path) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return true;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v === undefined;
}

/** The problems a well-shaped workflow can still have across fields and nodes, one line each (empty: none). */
export function checkWorkflow(wf: Workflow): string[] {
  const problems: string[] = [];
  const byId = new Map<string, WorkflowNode>();
  const seen = new Map<string, number>();
  wf.nodes.forEach((n, i) => {
    const first = seen.get(n.id);
    if (first !== undefined) problems.push(`node ${n.id}: the ID is also node ${first + 1}'s; give each node its own id`);
    else seen.set(n.id, i);
    if (!byId.has(n.id)) byId.set(n.id, n);
  });
  for (const n of wf.nodes) problems.push(...checkRun(n));
  for (const n of wf.nodes) {
    for (const need of n.needs) {
      if (byId.has(need)) continue;
      const others = [...byId.keys()].filter((k) => k !== n.id);
      problems.push(`node ${n.id}: needs names ${need}, which is not a node of this workflow; ${others.length > 0 ? `use one of ${others.join(', ')} or remove it` : 'remove it'}`);
    }
  }
  if (problems.length > 0) return problems;
  const cycle = findCycle(wf.nodes);
  if (cycle) return [`node ${cycle[0]}: needs form a cycle ${cycle.join(' → ')}; remove one of those needs`];
  const ancestors = ancestorsOf(wf.nodes);
  for (const n of wf.nodes) {
    if (!n.when) continue;
    const w = n.when;
    const target = byId.get(w.node);
    if (!ancestors.get(n.id)!.has(w.node)) {
      problems.push(`node ${n.id}: when names ${w.node}, which ${n.id} does not depend on; add ${w.node} to its needs (or to a need's needs)`);
    } else if (target!.run !== 'model' || !target!.output_schema) {
      problems.push(`node ${n.id}: when reads ${w.node}'s JSON output, which only a model node with an output_schema has; give ${w.node} one or remove the when`);
    }
    if (('equals' in w) === ('not_equals' in w)) problems.push(`node ${n.id}: when needs exactly one of equals and not_equals`);
  }
  return problems;
}

function checkRun(n: WorkflowNode): string[] {
  const problems: string[] = [];
  const required = { shell: 'command', model: 'prompt', agent: 'task' } as const;
  const need = required[n.run];
  if (n[need] === undefined) problems.push(`node ${n.id}: ${n.run === 'agent' ? 'an' : 'a'} ${n.run} node needs ${need}; add ${need} = "..."`);
  for (const [run, keys] of Object.entries(RUN_KEYS)) {
    if (run === n.run) continue;
    for (const k of keys) if (n[k] !== undefined) problems.push(`node ${n.id}: ${k} is for ${run} nodes; remove it or set run = "${run}"`);
  }
  if (n.output_schema) {
    // the same reader the model adapter's output check uses (`outputValidator`), so a schema that
    // loads here is one the answer can be checked against
    try {
      z.fromJSONSchema(n.output_schema as Parameters<typeof z.fromJSONSchema>[0]);
    } catch (err) {
      problems.push(`node ${n.id}: output_schema is not a JSON Schema actorloop can check (${(err as Error).message.split('\n')[0]}); give type, properties, required, ...`);
    }
  }
  return problems;
}

/** A cycle of `needs` as node IDs, first repeated at the end (`a → b → a`); null when there is none. */
function findCycle(nodes: readonly WorkflowNode[]): string[] | null {
  const needs = new Map(nodes.map((n) => [n.id, n.needs]));
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    if (state.get(id) === 'done') return null;
    if (state.get(id) === 'open') return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 'open');
    stack.push(id);
    for (const need of needs.get(id) ?? []) {
      const found = visit(need);
      if (found) return found;
    }
    stack.pop();
    state.set(id, 'done');
    return null;
  };
  for (const n of nodes) {
    const found = visit(n.id);
    // the walk runs along needs (dependent → dependency): read forward, dependency first
    if (found) return found.reverse();
  }
  return null;
}

/** Every node's transitive needs (the graph must be acyclic). */
export function ancestorsOf(nodes: readonly WorkflowNode[]): Map<string, Set<string>> {
  const needs = new Map(nodes.map((n) => [n.id, n.needs]));
  const memo = new Map<string, Set<string>>();
  const of = (id: string): Set<string> => {
    let s = memo.get(id);
    if (s) return s;
    s = new Set<string>();
    for (const need of needs.get(id) ?? []) {
      s.add(need);
      for (const a of of(need)) s.add(a);
    }
    memo.set(id, s);
    return s;
  };
  for (const n of nodes) of(n.id);
  return memo;
}
