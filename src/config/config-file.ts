import { readFileSync } from 'node:fs';
import { parse, TomlError } from 'smol-toml';
import { z } from 'zod';
import { ConfigError } from '../protocol/errors.js';
import { ApprovalModeSchema } from '../protocol/events.js';
import { CompleteWhenSchema, OnCompletionExhaustedSchema } from '../protocol/completion.js';
import { PolicyRuleSchema } from '../protocol/policy-rule.js';
import { didYouMean } from './did-you-mean.js';

/** What an `actorloop.toml` (workspace) or `~/.config/actorloop/config.toml` (user) may set. */
export const ConfigFileSchema = z.strictObject({
  /** The model of runs that name none: `openai:<model>` or `scripted:<file.json>`. */
  model: z.string().min(1).optional(),
  /** An OpenAI-compatible endpoint for `openai:` models. */
  base_url: z.url({ protocol: /^https?$/ }).optional(),
  /** The name of the environment variable that holds the API key (never the key itself). */
  api_key_env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name such as OPENAI_API_KEY').optional(),
  /** Where logs, snapshots and the embedded server live. */
  data_dir: z.string().min(1).optional(),
  /** A NATS server with JetStream instead of the embedded one; a cluster as a comma-separated list (`nats://a:4222,nats://b:4222`). */
  nats_url: z.string().min(1).optional(),
  /**
   * Copies of every stream and bucket actorloop creates: 1 (default) on one server, 3 on a cluster.
   * Given explicitly, an existing stream with fewer copies is scaled up to it.
   */
  replicas: z.number().int().min(1).max(5).optional(),
  /** A `.creds` file (JWT + NKey seed) to log in to `nats_url` with; passwords and tokens go in NATS_PASSWORD / NATS_TOKEN. */
  nats_creds: z.string().min(1).optional(),
  /** User file only: `[workspaces."/abs/dir"] trusted = true`, as `actorloop trust <dir>` writes it. */
  workspaces: z.record(z.string(), z.strictObject({ trusted: z.boolean() })).optional(),
  /** What a model can do, over the built-in table: `[capabilities."llama3"] context_window = 8192`. */
  capabilities: z
    .record(
      z.string(),
      z.strictObject({
        context_window: z.number().int().positive().optional(),
        max_output_tokens: z.number().int().positive().optional(),
        parallel_tool_calls: z.boolean().optional(),
        structured_output: z.boolean().optional(),
        vision: z.boolean().optional(),
      }),
    )
    .optional(),
  /** Prices in USD per million tokens by model name: `[pricing."gpt-4.1"] input_per_mtok = 2.0`. */
  pricing: z
    .record(z.string(), z.strictObject({ input_per_mtok: z.number().nonnegative(), output_per_mtok: z.number().nonnegative() }))
    .optional(),
  /**
   * The system prompt of runs that pass no `--instructions FILE` (default: a short built-in one).
   * An untrusted workspace may set it: it cannot loosen a permission, since policy gates every call.
   */
  instructions: z.string().refine((s) => s.trim() !== '', 'the instructions are empty').optional(),
  /** The run mode of runs that pass no `--approve`: ask, auto-edit, full-auto, deny-all. */
  approval_mode: ApprovalModeSchema.optional(),
  /** `[[policy.rules]]`: tool, paths, command, level, untrusted_context, network, env_allow, decision, reason, id. */
  policy: z.strictObject({ rules: z.array(PolicyRuleSchema).optional() }).optional(),
  /** User file only: let the workspace's `allow` rules loosen the policy (default: only its deny and ask rules count). */
  trust_workspace_policy: z.boolean().optional(),
  /** Tool output over this many bytes becomes an artifact the model reads in parts. */
  observation_budget_bytes: z.number().int().min(1024).max(512 * 1024).optional(),
  /** One model answer (text and tool-call arguments) over this many bytes is stopped and fails the step. */
  max_model_output_bytes: z.number().int().min(1024).max(256 * 1024 * 1024).optional(),
  /** How long an approval request stays open before the call is denied. */
  approval_ttl_seconds: z.number().positive().optional(),
  /** How long an `ask_user` question waits for its answer before it expires. */
  ask_ttl_seconds: z.number().positive().optional(),
  /** Calls of one step that may run at once. */
  max_parallel_calls: z.number().int().min(1).max(64).optional(),
  /** What an interrupt does to follow-ups queued for later turns: `keep` them (default) or `cancel` them. */
  interrupt_follow_ups: z.enum(['keep', 'cancel']).optional(),
  /** The completion policy of runs that pass no `--complete-when`: answer (default), code-change, cited. */
  complete_when: CompleteWhenSchema.optional(),
  /** Command prefixes whose passing shell run verifies a change (`code-change`), e.g. ["npm test", "node --test"]. */
  verify_commands: z.array(z.string().refine((s) => s.trim() !== '', 'an empty command')).optional(),
  /** Answers the completion policy may refuse in one turn before the turn fails (default 3). */
  max_completion_rejections: z.number().int().min(1).max(100).optional(),
  /** What the refusal at that limit does: `fail` the turn (default), or `block` the agent's active goal and stop the turn. */
  on_completion_exhausted: OnCompletionExhaustedSchema.optional(),
  /** The context window requests must fit, in tokens, for every model (default: the model's known window; none known: unchecked). */
  context_window: z.number().int().min(1024).max(100_000_000).optional(),
  /** Bytes the project docs (AGENTS.md files) may take together in a request (default 32 KiB). */
  docs_max_bytes: z.number().int().min(0).max(1024 * 1024).optional(),
  /** Tokens of excerpts a retriever (ripgrep) finds for each turn's task and adds to its requests (default 0: none). */
  retrieval_tokens: z.number().int().min(0).max(100_000).optional(),
  /** Tokens a checkpoint must save over the steps it replaces, or it is not committed (default 512). */
  compaction_min_gain_tokens: z.number().int().min(0).max(1_000_000).optional(),
  /** The newest closed steps a compaction keeps verbatim (default 2). */
  compaction_keep_steps: z.number().int().min(1).max(100).optional(),
  /** Bytes of a memory file given whole at a turn's start; past it only its index is, and memory_search reads the rest (default 8 KiB). */
  memory_max_bytes: z.number().int().min(0).max(1024 * 1024).optional(),
  /** Turns in a row without progress before a goal is `blocked` with reason `no_progress` (default 2). */
  max_idle_turns: z.number().int().min(1).max(100).optional(),
  /** How deep a tree of subagents may go (default 3: a top agent's children's children's children). */
  max_subagent_depth: z.number().int().min(1).max(16).optional(),
  /** Subagents one agent may have running at once (default 8). */
  max_children_per_parent: z.number().int().min(1).max(10_000).optional(),
  /** Subagents a whole tree may have running at once (default 64). */
  max_children_per_tree: z.number().int().min(1).max(100_000).optional(),
  /** Background jobs one host runs at once (default 4); more wait in its queue. */
  max_running_jobs: z.number().int().min(1).max(1_000).optional(),
  /** Background jobs one tree runs at once, across every host (default 4). */
  max_running_jobs_per_tree: z.number().int().min(1).max(10_000).optional(),
  /** Jobs one host keeps waiting (default 100); a start beyond it fails the job at once. */
  max_queued_jobs: z.number().int().min(0).max(100_000).optional(),
  /** How long a job runs when its start_job names no timeout (default 1800). */
  job_timeout_seconds: z.number().positive().max(7 * 86_400).optional(),
  /** Between SIGTERM and SIGKILL when a job is stopped (default 5000). */
  job_kill_grace_ms: z.number().int().min(0).max(600_000).optional(),
  /** What a parent's cancelled or failed turn does to its running subagents: `cancel` them (default) or `detach` them. */
  on_parent_end: z.enum(['cancel', 'detach']).optional(),
  /** Environment variables whose values are redacted from tool output (the API key always is). */
  redact_env: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')).optional(),
});
/** The settings of one config file. */
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

/** Reads one TOML config file; null when it does not exist. A bad file is a ConfigError naming the file and the key. */
export function readConfigFile(path: string): ConfigFile | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConfigError('config.file', `cannot read ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (err) {
    const where = err instanceof TomlError ? ` at line ${err.line}, column ${err.column}` : '';
    const what = (err as Error).message.split('\n')[0];
    throw new ConfigError('config.file', `${path} is not valid TOML${where}: ${what}`, { hint: 'fix the file or remove it' });
  }
  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError('config.file', `${path}: ${describeIssue(issue)}`, { hint: keysHint(issue) });
  }
  return parsed.data;
}

/** One zod issue of a config layer as a person reads it: the dotted key, what is wrong, a "did you mean" for a typo. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  const key = dottedKey(issue.path);
  if (issue.code === 'invalid_type' && / received undefined$/.test(issue.message)) return `${key} is missing`;
  if (issue.code !== 'unrecognized_keys') return `${key}: ${issue.message}`;
  const known = knownKeysAt(issue.path);
  const at = key === '' ? '' : `${key}.`;
  const keys = issue.keys.map((k) => `${at}${k}${didYouMean(k, known)}`);
  return `unknown key${keys.length > 1 ? 's' : ''} ${keys.join(', ')}`;
}

/** What keys there are where an issue is (the top level's, or a table's). */
export function keysHint(issue: z.core.$ZodIssue): string {
  const at = issue.code === 'unrecognized_keys' ? issue.path : issue.path.slice(0, -1);
  const keys = knownKeysAt(at);
  return `the keys ${at.length > 0 ? `of ${dottedKey(at)} ` : ''}are ${keys.join(', ')}`;
}

/** A path as a TOML key is written: `pricing."gpt-4.1".input_per_mtok`. */
export function dottedKey(path: readonly PropertyKey[]): string {
  return path.map((p) => (/^[A-Za-z0-9_-]+$/.test(String(p)) ? String(p) : JSON.stringify(String(p)))).join('.');
}

/**
 * The keys the schema knows at a path of a config layer (`[]`: the top level,
 * `['capabilities', 'llama3']`: a capability's), walking through optional values, records and arrays.
 */
export function knownKeysAt(path: readonly PropertyKey[]): string[] {
  let schema = ConfigFileSchema as unknown as z.core.$ZodType;
  const unwrap = (s: z.core.$ZodType): z.core.$ZodType => {
    const def = s._zod.def as { type: string; innerType?: z.core.$ZodType };
    return def.type === 'optional' && def.innerType ? unwrap(def.innerType) : s;
  };
  for (const step of path) {
    const def = unwrap(schema)._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; valueType?: z.core.$ZodType; element?: z.core.$ZodType };
    const next = def.type === 'object' ? def.shape?.[String(step)] : def.type === 'record' ? def.valueType : def.type === 'array' ? def.element : undefined;
    if (!next) return [];
    schema = next;
  }
  const def = unwrap(schema)._zod.def as { type: string; shape?: Record<string, unknown> };
  return def.type === 'object' && def.shape ? Object.keys(def.shape) : [];
}
